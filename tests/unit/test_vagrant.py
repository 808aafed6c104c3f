"""The classroom VM's files, as far as this machine can check them without Vagrant:
the Vagrantfile parses, the provisioning script is shellcheck-clean, installs the P4
planes' tools with scripts/install-p4.sh (the script a bare machine's user runs: p4c-ebpf's
runtime headers fetched at the installed p4c's version), provisions through `make setup`
(hence scripts/install-deps.sh) and builds the lab kernel unless told not to, on a Debian
12 box (the distribution with linux-source-6.12) without nested virtualisation (the lab
kernel is User-Mode Linux). apt-get, id, curl and p4lang's tools are stand-ins here."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

PROVISION = REPO / "scripts/provision-vagrant.sh"
INSTALL_P4 = REPO / "scripts/install-p4.sh"
P4C_VERSION = "1.2.5.16"
BPFTOOL = ("https://github.com/libbpf/bpftool/releases/download/v7.5.0/"
           "bpftool-libbpf-v7.5.0-sources.tar.gz")


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


def test_provisioning_and_install_scripts_are_shellcheck_clean() -> None:
    proc = subprocess.run([need("shellcheck"), str(PROVISION), str(INSTALL_P4)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_make_setup_runs_the_shared_install_script() -> None:
    # -W setup.py: pretend it changed, so the dry run lists the whole setup recipe
    proc = subprocess.run([need("make"), "-n", "-W", "setup.py", "setup"], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "bash scripts/install-deps.sh" in proc.stdout


def archives(folder: Path) -> None:
    """p4c's source archive at P4C_VERSION and the bpftool release it names, as their
    publishers lay them out (only what install-p4.sh takes from them)."""
    p4c = folder / f"p4c-{P4C_VERSION}"
    runtime = p4c / "backends" / "ebpf" / "runtime"
    runtime.mkdir(parents=True)
    for name in ("psa.h", "ebpf_kernel.h", "kernel.mk"):
        (runtime / name).write_text(f"/* {name} of p4c {P4C_VERSION} */\n")
    (runtime.parent / "CMakeLists.txt").write_text(f'set(BPFTOOL_URL "{BPFTOOL}")\n')
    bpftool = folder / "bpftool"
    (bpftool / "libbpf" / "src").mkdir(parents=True)
    (bpftool / "libbpf" / "src" / "bpf_helpers.h").write_text("/* libbpf */\n")
    (bpftool / "include" / "uapi" / "linux").mkdir(parents=True)
    (bpftool / "include" / "uapi" / "linux" / "bpf.h").write_text("/* uapi */\n")
    for name, top in ((f"v{P4C_VERSION}.tar.gz", p4c.name), ("bpftool.tar.gz", "bpftool")):
        subprocess.run(["tar", "-czf", str(folder / name), "-C", str(folder), top], check=True)


def provision(tmp_path: Path, **env: str) -> list[str]:
    """Run the provisioning script with make, apt-get, id (root), curl (the archives
    above) and p4lang's tools (under P4_PREFIX) stubbed; the make calls."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(parents=True)
    prefix = tmp_path / "p4"
    (prefix / "bin").mkdir(parents=True)
    archives(tmp_path)
    log = tmp_path / "make.log"
    fetched = tmp_path / "curl.log"
    curl = f"""for a; do case "$a" in http*) url=$a;; esac; done
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
echo "$url" >> {fetched}
case "$url" in
  */v{P4C_VERSION}.tar.gz) cp {tmp_path}/v{P4C_VERSION}.tar.gz "$out";;
  {BPFTOOL}) cp {tmp_path}/bpftool.tar.gz "$out";;
  *) exit 22;;
esac"""
    stubs = {"make": f'echo "$*" >> {log}', "apt-get": "exit 0", "id": "echo 0",
             "curl": curl}
    for name, body in stubs.items():
        (bin_ / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_ / name).chmod(0o755)
    (prefix / "bin" / "p4c-ebpf").write_text(
        f"#!/bin/sh\necho p4c-ebpf\necho 'Version {P4C_VERSION} (SHA: 0 BUILD: release)'\n")
    (prefix / "bin" / "p4c-ebpf").chmod(0o755)
    proc = subprocess.run(
        ["bash", str(PROVISION), str(REPO)], capture_output=True, text=True,
        env={**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "P4_PREFIX": str(prefix),
             **env},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return log.read_text().splitlines()


def test_provisioning_calls_make_setup_and_builds_the_kernel_unless_told_not_to(
        tmp_path: Path) -> None:
    assert provision(tmp_path / "plain") == [f"-C {REPO} setup", f"-C {REPO} kernel"]
    assert provision(tmp_path / "nokernel", PATHDIV_BUILD_KERNEL="0") == [f"-C {REPO} setup"]


def test_provisioning_installs_p4c_ebpfs_runtime_at_the_installed_p4cs_version(
        tmp_path: Path) -> None:
    """Where pathdiv's tool finder looks for them, every header the generated C includes,
    fetched from p4c's sources at the version p4c-ebpf reports and from the bpftool release
    that version's CMakeLists.txt names; a second provisioning fetches nothing."""
    from pathdiv.experiments.dataplane.p4ebpf.tools import RUNTIME_SUBDIR, missing_runtime_files

    provision(tmp_path)
    runtime = tmp_path / "p4" / RUNTIME_SUBDIR
    assert missing_runtime_files(runtime) == []
    assert (runtime / "psa.h").read_text() == f"/* psa.h of p4c {P4C_VERSION} */\n"
    fetched = (tmp_path / "curl.log").read_text().splitlines()
    assert fetched == [f"https://github.com/p4lang/p4c/archive/refs/tags/v{P4C_VERSION}.tar.gz",
                       BPFTOOL]
    rerun = subprocess.run(["bash", str(INSTALL_P4)], capture_output=True, text=True, env={
        **os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "P4_PREFIX": str(tmp_path / "p4")})
    assert rerun.returncode == 0, rerun.stderr
    assert f"p4c {P4C_VERSION}'s eBPF runtime already in {runtime}" in rerun.stdout
    assert len((tmp_path / "curl.log").read_text().splitlines()) == 2


def test_provisioning_without_p4_leaves_the_p4_tools_out(tmp_path: Path) -> None:
    assert provision(tmp_path, PATHDIV_SKIP_P4="1", PATHDIV_BUILD_KERNEL="0") == [
        f"-C {REPO} setup"]
    assert not (tmp_path / "curl.log").exists()


def test_provisioning_refuses_a_folder_without_the_project(tmp_path: Path) -> None:
    proc = subprocess.run(["bash", str(PROVISION), str(tmp_path)], capture_output=True,
                          text=True, env={**os.environ, "PATHDIV_SKIP_P4": "1"})
    assert proc.returncode == 1
    assert f"no pathdiv checkout at {tmp_path}" in proc.stdout
