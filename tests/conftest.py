"""Shared test fixtures: root/namespace detection, the lab kernel (built once)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def namespaces_usable() -> str | None:
    """None when network namespaces work here, else the reason they do not."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "tc", "nft", "mnexec", "tcpdump"):
        if shutil.which(tool) is None:
            return f"{tool} not found; run `make setup`"
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True)
    if probe.returncode != 0:
        return f"cannot create a network namespace: {probe.stderr.decode().strip()}"
    return None


@pytest.fixture(scope="session")
def root_fabric() -> None:
    reason = namespaces_usable()
    if reason:
        pytest.skip(reason)


def lab_vm_missing() -> str | None:
    """None when the lab kernel can be built and booted here, else what is missing."""
    from pathdiv.kernels import vm as labvm

    if os.geteuid() != 0:
        return "needs root (network namespaces inside the VM run as the calling user)"
    if not labvm.SOURCE_TARBALL.exists():
        return f"{labvm.SOURCE_TARBALL} missing (apt-get install {labvm.SOURCE_PACKAGE})"
    missing = labvm.missing_vm_tools()
    missing += [f"{t} (scripts/install-deps.sh)" for t in ("make", "gcc", "bc", "flex", "bison",
                                                           "patch") if not shutil.which(t)]
    return f"missing {', '.join(missing)}" if missing else None


@pytest.fixture(scope="session")
def lab_kernel() -> Path:
    """The lab kernel image, built first when not cached (~12 min on 2 idle cores)."""
    from pathdiv.kernels import vm as labvm

    reason = lab_vm_missing()
    if reason:
        pytest.skip(reason)
    return labvm.find_lab_kernel() or labvm.build_lab_kernel()
