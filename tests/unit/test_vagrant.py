"""The classroom VM's files, as far as this machine can check them without Vagrant:
the Vagrantfile parses, the provisioning script is shellcheck-clean and provisions
through `make setup` (hence scripts/install-deps.sh) and builds the lab kernel unless told
not to, on a Debian 12 box (the distribution with linux-source-6.12) without nested
virtualisation (the lab kernel is User-Mode Linux)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

PROVISION = REPO / "scripts/provision-vagrant.sh"


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} not found; `make setup` installs it (scripts/install-deps.sh)")
    return path


def test_vagrantfile_parses_and_boots_debian_12_with_the_provisioner() -> None:
    proc = subprocess.run([need("ruby"), "-c", "Vagrantfile"], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "Syntax OK" in proc.stdout, proc.stderr
    text = (REPO / "Vagrantfile").read_text()
    assert 'config.vm.box = "debian/bookworm64"' in text
    assert 'path: "scripts/provision-vagrant.sh"' in text
    assert '"PATHDIV_BUILD_KERNEL" => ENV.fetch("PATHDIV_BUILD_KERNEL", "1")' in text
    code = [line.split("#")[0] for line in text.splitlines()]
    assert not any("nested" in line for line in code), "UML needs no nested virtualisation"


def test_provisioning_script_is_shellcheck_clean() -> None:
    proc = subprocess.run([need("shellcheck"), str(PROVISION)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_make_setup_runs_the_shared_install_script() -> None:
    # -W setup.py: pretend it changed, so the dry run lists the whole setup recipe
    proc = subprocess.run([need("make"), "-n", "-W", "setup.py", "setup"], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "bash scripts/install-deps.sh" in proc.stdout


def provision(tmp_path: Path, **env: str) -> list[str]:
    """Run the provisioning script with make/apt-get/p4 tools stubbed; the make calls."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(parents=True)
    log = tmp_path / "make.log"
    stubs = {"make": f'echo "$*" >> {log}', "apt-get": "exit 0",
             "simple_switch": "exit 0", "p4c-bm2-ss": "exit 0"}
    for name, body in stubs.items():
        (bin_ / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_ / name).chmod(0o755)
    proc = subprocess.run(
        ["bash", str(PROVISION), str(REPO)], capture_output=True, text=True,
        env={**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", **env},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return log.read_text().splitlines()


def test_provisioning_calls_make_setup_and_builds_the_kernel_unless_told_not_to(
        tmp_path: Path) -> None:
    assert provision(tmp_path / "plain") == [f"-C {REPO} setup", f"-C {REPO} kernel"]
    assert provision(tmp_path / "nokernel", PATHDIV_BUILD_KERNEL="0") == [f"-C {REPO} setup"]


def test_provisioning_refuses_a_folder_without_the_project(tmp_path: Path) -> None:
    proc = subprocess.run(["bash", str(PROVISION), str(tmp_path)], capture_output=True,
                          text=True, env={**os.environ, "PATHDIV_SKIP_P4": "1"})
    assert proc.returncode == 1
    assert f"no pathdiv checkout at {tmp_path}" in proc.stdout
