"""Shared test fixtures: root/namespace detection for integration tests."""

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
def root_lab() -> None:
    reason = namespaces_usable()
    if reason:
        pytest.skip(reason)
