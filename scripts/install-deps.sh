#!/usr/bin/env bash
# Install the Debian/Ubuntu packages pathdiv needs. Idempotent: packages already
# present are not reinstalled and apt is not even consulted when nothing is missing.
# Shared by `make setup` and the Vagrantfile so the two cannot drift.
set -euo pipefail

PACKAGES=(
  mininet iperf3 tcpdump tshark nftables iproute2 ethtool curl mptcpize iputils-ping net-tools
  python3 python3-venv python3-dev python3-thrift procps psmisc
  build-essential bc bison flex libelf-dev libssl-dev cpio kmod rsync
  qemu-system-x86 linux-source-6.12
  ruby shellcheck chromium
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} system packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
