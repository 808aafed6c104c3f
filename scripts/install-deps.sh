#!/usr/bin/env bash
# Install the Debian/Ubuntu packages pathdiv needs. Idempotent: packages already
# present are not reinstalled and apt is not even consulted when nothing is missing.
# Shared by `make setup` and the Vagrantfile so the two cannot drift.
set -euo pipefail

# The lab itself: emulation, capture, analysis, and the tools the tests check with.
REQUIRED=(
  mininet iperf3 tcpdump tshark nftables iproute2 ethtool curl mptcpize iputils-ping net-tools
  python3 python3-venv python3-dev python3-thrift procps psmisc
  build-essential bc bison flex libelf-dev libssl-dev cpio kmod rsync
  ruby shellcheck
)
# Installed where the distribution has them; what needs them says so when they are
# missing: linux-source-6.12 for `make kernel` (Debian 12; Ubuntu 24.04 ships 6.8),
# chromium for the headless check of report.html, slurm-wlm (slurmctld, slurmd, munge)
# for the test that submits a plan to a one-node Slurm started on this machine.
OPTIONAL=(linux-source-6.12 chromium slurm-wlm)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
for p in "${REQUIRED[@]}"; do installed "$p" || missing+=("$p"); done
optional=()
for p in "${OPTIONAL[@]}"; do installed "$p" || optional+=("$p"); done

if [ "${#missing[@]}" -eq 0 ] && [ "${#optional[@]}" -eq 0 ]; then
  echo "install-deps: all $(( ${#REQUIRED[@]} + ${#OPTIONAL[@]} )) system packages present"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
for p in "${optional[@]}"; do
  if apt-cache show "$p" >/dev/null 2>&1; then
    missing+=("$p")
  else
    echo "install-deps: $p is not available here; the features that need it will say so"
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
