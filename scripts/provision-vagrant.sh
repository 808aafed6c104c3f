#!/usr/bin/env bash
# Provision the pathdiv classroom VM (run by the Vagrantfile as root, on Debian 12).
#
#   1. scripts/install-p4.sh: p4lang's bmv2 and p4c packages, clang, llvm and libbpf, and
#      p4c's eBPF runtime headers fetched at the installed p4c's version: everything the
#      P4 planes need, so `dataplane: auto` runs the reference experiment on p4-ebpf
#      (skipped with PATHDIV_SKIP_P4=1: the nftables plane only; docs/p4.md);
#   2. `make setup`, which runs scripts/install-deps.sh (Mininet, iproute2, nftables,
#      tcpdump, MPTCP tools, linux-source-6.12, ...) and creates the venv: the same steps
#      as on a bare machine, never a copy of them;
#   3. `make kernel`: the RB lab kernel as User-Mode Linux (~15 min on 4 CPUs, cached);
#      skipped with PATHDIV_BUILD_KERNEL=0 (the first lab-kernel run builds it then).
#
# Idempotent: rerun with `vagrant provision`.
set -euo pipefail

PROJECT=${1:-/opt/pathdiv}
BUILD_KERNEL=${PATHDIV_BUILD_KERNEL:-1}
SKIP_P4=${PATHDIV_SKIP_P4:-0}

log() { echo "provision-vagrant: $*"; }

if [ ! -f "${PROJECT}/scripts/install-deps.sh" ]; then
  log "no pathdiv checkout at ${PROJECT} (expected scripts/install-deps.sh there)"
  exit 1
fi

if [ "${SKIP_P4}" = "1" ]; then
  log "PATHDIV_SKIP_P4=1: not installing the P4 tools (the nftables plane only)"
else
  log "scripts/install-p4.sh: bmv2, p4c, p4c-ebpf's toolchain and runtime headers"
  bash "${PROJECT}/scripts/install-p4.sh"
fi

# make setup is what runs scripts/install-deps.sh; call it, don't repeat it.
apt-get install -y -qq make >/dev/null
log "make setup (scripts/install-deps.sh + venv)"
make -C "${PROJECT}" setup

if [ "${BUILD_KERNEL}" = "0" ]; then
  log "PATHDIV_BUILD_KERNEL=0: lab kernel not built (the first lab-kernel run builds it;"
  log "or run: cd ${PROJECT} && sudo make kernel)"
else
  log "make kernel: the RB lab kernel as User-Mode Linux (~15 min on 4 CPUs; cached)"
  make -C "${PROJECT}" kernel
fi

log "done: vagrant ssh, then: cd ${PROJECT} && sudo .venv/bin/pathdiv check configs/noisy.yaml"
log "(it says which data plane each run gets: p4-ebpf where its tools were installed)"
