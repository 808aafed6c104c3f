#!/usr/bin/env bash
# Provision the pathdiv classroom VM (run by the Vagrantfile as root, on Debian 12).
#
#   1. p4lang's official bmv2 + p4c packages from p4lang's repository on the openSUSE
#      Build Service (skipped with PATHDIV_SKIP_P4=1; see docs/p4.md);
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

install_p4lang() {
  if command -v simple_switch >/dev/null && command -v p4c-bm2-ss >/dev/null; then
    log "bmv2 and p4c already installed"
    return
  fi
  # shellcheck disable=SC1091  # os-release exists on every Ubuntu/Debian
  . /etc/os-release
  local repo
  case "$ID" in
    ubuntu) repo="xUbuntu_${VERSION_ID}" ;;
    debian) repo="Debian_${VERSION_ID}" ;;
    *) log "no p4lang packages for '$ID'; set PATHDIV_SKIP_P4=1 to go without bmv2"; exit 1 ;;
  esac
  local url="https://download.opensuse.org/repositories/home:/p4lang/${repo}"
  log "adding p4lang's package repository ${url}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends curl gpg ca-certificates
  curl -fsSL "${url}/Release.key" | gpg --dearmor --yes -o /etc/apt/trusted.gpg.d/home_p4lang.gpg
  echo "deb ${url}/ /" > /etc/apt/sources.list.d/home:p4lang.list
  apt-get update -qq
  apt-get install -y -qq p4lang-p4c p4lang-bmv2
}

if [ ! -f "${PROJECT}/scripts/install-deps.sh" ]; then
  log "no pathdiv checkout at ${PROJECT} (expected scripts/install-deps.sh there)"
  exit 1
fi

if [ "${SKIP_P4}" = "1" ]; then
  log "PATHDIV_SKIP_P4=1: not installing bmv2/p4c (kernel data plane only)"
else
  install_p4lang
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
