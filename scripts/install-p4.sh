#!/usr/bin/env bash
# Install what pathdiv's P4 data planes need on Debian 12 or Ubuntu 24.04 (as root):
#
#   1. p4lang's bmv2 and p4c packages (p4lang-bmv2, p4lang-p4c: simple_switch, its CLI,
#      p4c-bm2-ss and p4c-ebpf) from p4lang's repository on the openSUSE Build Service,
#      and Debian's python3-thrift for simple_switch_CLI;
#   2. what p4c-ebpf's output needs to become an eBPF object and run at tc: clang, llvm
#      (llc), libbpf1, iproute2 (tc), util-linux (nsenter);
#   3. p4c's eBPF runtime headers, which p4c's `make install` and its packages leave out:
#      backends/ebpf/runtime of p4c's published sources at the version of the installed
#      p4c-ebpf, with the libbpf and bpftool headers p4c's build fetches (the bpftool
#      release named in that version's backends/ebpf/CMakeLists.txt), into
#      $P4_PREFIX/share/p4c/ebpf/runtime, or /usr/local/share/p4c/ebpf/runtime, where
#      pathdiv looks for them (docs/p4.md, "Installing the tools").
#
# Then `pathdiv check configs/noisy.yaml` says which plane each run gets (dataplane:
# auto: p4-ebpf). Idempotent; each step says what it did. Knobs (environment):
#   P4_PREFIX=DIR         tools already installed under DIR (bin/): no packages for them,
#                         the runtime headers go to DIR/share/p4c/ebpf/runtime
#   PATHDIV_P4_SOURCES=URL  where p4c's source archives are (default GitHub's; a mirror
#                         or a local file:// folder holding p4c-<version>.tar.gz)
#   PATHDIV_SKIP_P4_PACKAGES=1   do not add p4lang's repository (tools already there)
set -euo pipefail

log() { echo "install-p4: $*"; }
die() { echo "install-p4: $*" >&2; exit 1; }

SOURCES=${PATHDIV_P4_SOURCES:-https://github.com/p4lang/p4c/archive/refs/tags}
# the bpftool release p4c 1.2.5.x builds with, where p4c's CMakeLists.txt names none
BPFTOOL_DEFAULT=https://github.com/libbpf/bpftool/releases/download/v7.5.0/bpftool-libbpf-v7.5.0-sources.tar.gz

# the version p4c-ebpf reports: "p4c-ebpf\nVersion 1.2.5.16 (SHA: ... BUILD: ...)"
p4c_version() {
  "$1" --version 2>&1 | grep -oE '[0-9]+\.[0-9]+\.[0-9]+(\.[0-9]+)?' | head -n 1
}

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "$@"
}

add_p4lang_repository() {
  # shellcheck disable=SC1091  # os-release exists on every Debian and Ubuntu
  . /etc/os-release
  local repo
  case "${ID}:${VERSION_ID}" in
    debian:12) repo=Debian_12 ;;
    ubuntu:24.04) repo=xUbuntu_24.04 ;;
    ubuntu:22.04) repo=xUbuntu_22.04 ;;
    *) die "no p4lang packages for ${ID} ${VERSION_ID}: build bmv2 and p4c from source" \
           "(docs/p4.md) and rerun with P4_PREFIX=<their prefix>" ;;
  esac
  local url="https://download.opensuse.org/repositories/home:/p4lang/${repo}"
  if [ ! -f /etc/apt/sources.list.d/home:p4lang.list ]; then
    log "adding p4lang's package repository ${url}"
    apt-get update -qq
    apt_install curl gpg ca-certificates
    curl -fsSL "${url}/Release.key" | gpg --dearmor --yes -o /etc/apt/trusted.gpg.d/home_p4lang.gpg
    echo "deb ${url}/ /" > /etc/apt/sources.list.d/home:p4lang.list
  fi
  apt-get update -qq
  apt_install p4lang-p4c p4lang-bmv2
}

find_tool() {  # $1: name; $P4_PREFIX/bin first, then PATH
  if [ -n "${P4_PREFIX:-}" ] && [ -x "${P4_PREFIX}/bin/$1" ]; then
    echo "${P4_PREFIX}/bin/$1"
  else
    command -v "$1" || true
  fi
}

# $1: p4c's version, $2: the runtime folder to fill. Fetches p4c's sources at that
# version, copies backends/ebpf/runtime, then the libbpf headers (install/libbpf/include/
# bpf/) and bpftool's uapi headers (contrib/bpftool/include/uapi/) from the bpftool
# release that version's CMakeLists.txt fetches.
install_runtime() {
  local version=$1 dest=$2 work
  work=$(mktemp -d)
  trap 'rm -rf "${work}"; trap - RETURN' RETURN
  log "fetching p4c ${version}'s eBPF runtime from ${SOURCES}"
  curl -fsSL "${SOURCES}/v${version}.tar.gz" -o "${work}/p4c.tar.gz" \
    || curl -fsSL "${SOURCES}/p4c-${version}.tar.gz" -o "${work}/p4c.tar.gz" \
    || die "cannot fetch p4c ${version}'s sources from ${SOURCES}"
  tar -xzf "${work}/p4c.tar.gz" -C "${work}" --wildcards \
    '*/backends/ebpf/runtime/*' '*/backends/ebpf/CMakeLists.txt'
  local src
  src=$(find "${work}" -maxdepth 4 -type d -path '*/backends/ebpf/runtime' | head -n 1)
  [ -n "${src}" ] || die "p4c ${version}'s archive has no backends/ebpf/runtime"
  local bpftool
  bpftool=$(grep -oE 'https://github.com/libbpf/bpftool/releases/download/[^ ")]+' \
              "${src}/../CMakeLists.txt" | head -n 1 || true)
  bpftool=${bpftool:-${BPFTOOL_DEFAULT}}
  log "fetching the libbpf and bpftool headers p4c ${version} builds with: ${bpftool}"
  curl -fsSL "${bpftool}" -o "${work}/bpftool.tar.gz" || die "cannot fetch ${bpftool}"
  mkdir -p "${work}/bpftool"
  tar -xzf "${work}/bpftool.tar.gz" -C "${work}/bpftool"
  local libbpf uapi
  libbpf=$(find "${work}/bpftool" -type d -path '*/libbpf/src' | head -n 1)
  uapi=$(find "${work}/bpftool" -maxdepth 3 -type d -path '*/include/uapi' | head -n 1)
  if [ -z "${libbpf}" ] || [ -z "${uapi}" ]; then
    die "${bpftool} holds no libbpf/src or include/uapi"
  fi
  mkdir -p "${dest}"
  cp -r "${src}/." "${dest}/"
  mkdir -p "${dest}/install/libbpf/include/bpf" "${dest}/contrib/bpftool/include"
  cp "${libbpf}"/*.h "${dest}/install/libbpf/include/bpf/"
  cp -r "${uapi}" "${dest}/contrib/bpftool/include/"
  echo "${version}" > "${dest}/.pathdiv-p4c-version"
  log "p4c ${version}'s eBPF runtime is in ${dest}"
}

main() {
  [ "$(id -u)" = 0 ] || die "run as root (sudo $0)"
  if [ "${PATHDIV_SKIP_P4_PACKAGES:-0}" = 1 ] || [ -n "${P4_PREFIX:-}" ]; then
    log "p4lang's packages: skipped (P4_PREFIX or PATHDIV_SKIP_P4_PACKAGES)"
  elif [ -n "$(find_tool simple_switch)" ] && [ -n "$(find_tool p4c-ebpf)" ]; then
    log "p4lang's bmv2 and p4c already installed"
  else
    add_p4lang_repository
  fi
  log "clang, llvm, libbpf1, iproute2, util-linux, python3-thrift, curl"
  apt-get update -qq
  apt_install clang llvm libbpf1 iproute2 util-linux python3-thrift curl ca-certificates tar
  local compiler version dest
  compiler=$(find_tool p4c-ebpf)
  [ -n "${compiler}" ] || die "p4c-ebpf is not installed (p4lang-p4c, or P4_PREFIX/bin)"
  version=$(p4c_version "${compiler}")
  [ -n "${version}" ] || die "${compiler} --version names no version"
  if [ -n "${P4_PREFIX:-}" ]; then
    dest="${P4_PREFIX}/share/p4c/ebpf/runtime"
  else
    dest=/usr/local/share/p4c/ebpf/runtime
  fi
  if [ "$(cat "${dest}/.pathdiv-p4c-version" 2>/dev/null)" = "${version}" ]; then
    log "p4c ${version}'s eBPF runtime already in ${dest}"
  else
    install_runtime "${version}" "${dest}"
  fi
  log "done: pathdiv check configs/noisy.yaml says which data plane each run gets"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
