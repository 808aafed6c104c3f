# pathdiv — one command per workflow. The lab needs root: as a normal user every
# privileged step goes through sudo (and says so); without either it stops.
SHELL := /bin/bash
.DEFAULT_GOAL := help

CONFIG ?= configs/noisy.yaml
ARGS ?=
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-stamp

ifeq ($(shell id -u),0)
  SUDO :=
else ifneq ($(shell command -v sudo 2>/dev/null),)
  SUDO := sudo
  $(info pathdiv: not root; privileged steps run through sudo)
else
  SUDO := __no_root__
endif

.PHONY: help setup test integration unit experiment reproduce lint clean-lab need-root

help:
	@echo "make setup                         install system packages and the Python venv (idempotent)"
	@echo "make test                          run the whole test suite (runs setup when needed)"
	@echo "make integration [ARGS=...]        the integration tests alone (root), in two lanes"
	@echo "make experiment CONFIG=configs/noisy.yaml [ARGS='--quick']   run an experiment"
	@echo "make reproduce CONFIG=configs/noisy.yaml [ARGS=--preview]   reproduce the study into docs/reproduction/"
	@echo "make lint                          ruff on the Python code, mypy on the whole product"
	@echo "make kernel                        build the lab kernel (MPTCP rb scheduler), cached"
	@echo "make kernel-test                   user-space tests of the patches' C code (rb, rbstrict, lia, olia, coupled-bbr gains and cycle clock, arp, minrtt's rbuf optimisation, reorder hold, mptcp-d, juggler)"
	@echo "make clean-lab                     remove namespaces/links/processes a killed run left"

need-root:
	@if [ "$(SUDO)" = "__no_root__" ]; then \
	  echo "pathdiv needs root for network namespaces and packages: run as root or install sudo."; \
	  exit 1; fi

# The stamp depends on the files that define the environment, so setup reruns
# only when they change.
$(STAMP): setup.py scripts/install-deps.sh | need-root
	$(SUDO) bash scripts/install-deps.sh
	$(SUDO) /usr/bin/python3 -m venv --system-site-packages $(VENV)
	$(SUDO) $(PY) -m pip install -q --disable-pip-version-check --use-pep517 -e '.[dev]'
	$(SUDO) touch $(STAMP)

setup: $(STAMP)

# The unit tests run in UNIT_WORKERS processes (pytest-xdist; each worker has temporary
# folders of its own), then the integration tests in two lanes side by side: the host
# lane runs every test that touches this machine's network state, one at a time; the
# lab lane runs the lab-kernel tests (virtual clock, the network inside the guest) one
# at a time beside it; its output follows the host lane's (tests/integration/conftest.py
# says which tests and why). INTEGRATION_LANES=1 runs the whole suite one at a time.
# Both suites always run, and any failing fails the target.
UNIT_WORKERS ?= 2
INTEGRATION_LANES ?= 2
INTEGRATION := $(SUDO) $(PY) -m pytest tests/integration
test: need-root $(STAMP)
	@u=0; $(SUDO) $(PY) -m pytest tests/unit -n $(UNIT_WORKERS) $(ARGS) || u=$$?; \
	i=0; $(MAKE) --no-print-directory integration || i=$$?; \
	if [ $$u -ne 0 ] || [ $$i -ne 0 ]; then \
	  echo "make test: unit tests exit $$u, integration tests exit $$i"; exit 1; fi

# A lane that selects no test (ARGS='-k ...' naming tests of the other lane only) exits
# 5 in pytest: that lane counts as passed.
integration: need-root $(STAMP)
	@i=0; if [ "$(INTEGRATION_LANES)" = 1 ]; then $(INTEGRATION) $(ARGS) || i=$$?; else \
	  lablog=$$(mktemp); \
	  $(INTEGRATION) -m lab_lane -p no:cacheprovider $(ARGS) >"$$lablog" 2>&1 & lab=$$!; \
	  $(INTEGRATION) -m "not lab_lane" $(ARGS) || i=$$?; \
	  echo "integration tests, lab lane (pid $$lab):"; l=0; wait $$lab || l=$$?; \
	  cat "$$lablog"; rm -f "$$lablog"; \
	  [ $$i -ne 5 ] || i=0; [ $$l -ne 5 ] || l=0; [ $$i -ne 0 ] || i=$$l; fi; \
	exit $$i

unit: $(STAMP)
	$(PY) -m pytest tests/unit $(ARGS)

experiment: need-root $(STAMP)
	$(SUDO) $(VENV)/bin/pathdiv run $(CONFIG) $(ARGS)

reproduce: need-root $(STAMP)
	$(SUDO) PYTHON=$(PY) scripts/reproduce.sh $(CONFIG) $(ARGS)

# mypy on the whole product (every folder is typed). mypy cannot follow the editable
# install's import hook, so it reads the folders linked under pathdiv/.
TYPED := pathdiv
TYPECHECK := .typecheck
lint: $(STAMP)
	$(PY) -m ruff check .
	@mkdir -p $(TYPECHECK)/pathdiv && for f in topologies experiments analysis kernels; do \
	  ln -sfn "$(CURDIR)/$$f" $(TYPECHECK)/pathdiv/$$f; done && \
	  ln -sfn "$(CURDIR)/pathdiv/__init__.py" $(TYPECHECK)/pathdiv/__init__.py
	cd $(TYPECHECK) && $(CURDIR)/$(PY) -m mypy --ignore-missing-imports --follow-imports=silent \
	  --cache-dir .mypy_cache $(addprefix -p ,$(TYPED))

clean-lab: need-root $(STAMP)
	$(SUDO) $(VENV)/bin/pathdiv clean

# The lab kernel (kernels/): Debian linux-source-6.12 + the MPTCP rb/roundrobin patches,
# cached by a hash of source version + patches + config under /var/cache/pathdiv/kernels/;
# when cached it only prints the image path.
.PHONY: kernel kernel-test
kernel: $(STAMP)
	$(SUDO) $(PY) -m pathdiv.kernels.build build

# The patches' pure C code (rb allocation, lia window, reorder-hold and Juggler decisions)
# compiled with user-space drivers and tested (fast, no root).
kernel-test: $(STAMP)
	$(PY) -m pytest tests/unit/test_rb_alloc.py tests/unit/test_lia_wnd.py \
		tests/unit/test_reorder_hold.py tests/unit/test_mptcp_d.py tests/unit/test_olia_inc.py \
		tests/unit/test_coupled_bbr_gain.py tests/unit/test_coupled_bbr_cycle.py \
		tests/unit/test_arp_plan.py tests/unit/test_juggler.py tests/unit/test_rb_strict.py \
		tests/unit/test_rbuf_opti.py -q
