"""The lab kernel as User-Mode Linux: release, schedulers, RB interleaving, write protection, stop.

Boots the cached UML kernel (built first when it is not: about 15 minutes on 2 cores,
once per patch/fragment change) on the host's root, in virtual time unless said otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments import labvm
from kernels import uml

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (UML's private mount namespace and the guest's namespaces)"
    if not labvm.SOURCE_TARBALL.exists():
        return f"{labvm.SOURCE_TARBALL} missing (apt-get install {labvm.SOURCE_PACKAGE})"
    tools = [t for t in ("make", "gcc", "bc", "flex", "bison", "patch") if not shutil.which(t)]
    return f"missing {', '.join(tools)} (scripts/install-deps.sh)" if tools else None


@pytest.fixture(scope="session")
def uml_kernel() -> Path:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    return uml.find_uml_kernel() or uml.build_uml_kernel()


def _uml_processes(kernel: Path) -> list[int]:
    """Host processes running the UML binary (the kernel and every guest address space)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "exe").startswith(str(kernel)):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def test_release_schedulers_and_rb_interleaving(uml_kernel, tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    res = uml.run_in_uml(
        ["sh", "-c", f"cat /proc/sys/net/mptcp/available_schedulers && exec {sys.executable} "
         f"{uml.KERNELS_DIR / 'mptcp_lab.py'} check --schedulers default rb "
         f"--out {share / 'check'}"],
        share=share, kernel=uml_kernel, timeout_s=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.kernel_release.endswith("-pathdiv")
    assert res.kernel_release == labvm.kernel_release(uml_kernel)
    assert res.clock == "virtual"
    first, report_text = res.stdout.split("\n", 1)
    assert first.split() == ["default", "rb", "roundrobin"]
    report = json.loads(report_text)
    runs = {run["scheduler"]: run for run in report["runs"]}
    fractions = {name: run["interleave_fraction"] for name, run in runs.items()}
    print(f"uml seconds={res.seconds:.0f} fractions={fractions}")
    for name, run in runs.items():
        assert run["complete"], (name, run["bytes"])
        assert run["capture_dropped"] == 0, (name, run)
        assert run["packet_pairs"] > 500, (name, run)
    assert fractions["rb"] >= 0.95, fractions
    assert fractions["default"] <= 0.1, fractions


def test_the_guest_writes_only_into_the_share(uml_kernel, tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    outside = tmp_path / "outside"
    script = (
        f"touch {share}/inside && echo inside-ok; "
        f"touch {outside} 2>/dev/null && echo outside-written; "
        # guest root remounts its hostfs root read-write: the host still refuses
        f"mount -o remount,rw / ; touch {outside} 2>/dev/null && echo outside-written-rw; "
        f"mkdir -p /tmp/x && touch /tmp/x/y && echo guest-tmp-ok; "
        f"echo 1 > /proc/sys/net/ipv4/ip_forward && echo guest-proc-ok"
    )
    res = uml.run_in_uml(["sh", "-c", script], share=share, kernel=uml_kernel, timeout_s=300)
    lines = res.stdout.split()
    assert "inside-ok" in lines
    assert (share / "inside").exists()
    assert "outside-written" not in lines and "outside-written-rw" not in lines
    assert not outside.exists()
    assert "guest-tmp-ok" in lines  # the guest's own /tmp (tmpfs), not the host's
    assert not Path("/tmp/x/y").exists()
    assert "guest-proc-ok" in lines  # the guest's own /proc


def test_sigint_mid_run_leaves_no_uml_process(uml_kernel, tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    code = (
        "import sys\nfrom pathlib import Path\nfrom kernels import uml\n"
        f"uml.run_in_uml(['sleep', '3600'], Path({str(share)!r}), Path({str(uml_kernel)!r}), "
        "timeout_s=None, clock='real')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=uml.REPO_DIR)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(share.glob(".labvm/*/release")):
            time.sleep(0.5)  # the guest wrote its release: it booted and runs `sleep`
        assert list(share.glob(".labvm/*/release")), "the guest did not boot within 120 s"
        assert _uml_processes(uml_kernel)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert _uml_processes(uml_kernel) == []


def test_pathdiv_clean_ends_the_uml_of_a_killed_owner(uml_kernel, tmp_path):
    from experiments.clean import clean

    share = tmp_path / "share"
    share.mkdir()
    code = (
        "from pathlib import Path\nfrom kernels import uml\n"
        f"uml.run_in_uml(['sleep', '3600'], Path({str(share)!r}), Path({str(uml_kernel)!r}), "
        "timeout_s=None, clock='real')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=uml.REPO_DIR)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(share.glob(".labvm/*/release")):
            time.sleep(0.5)
        assert list(share.glob(".labvm/*/release")), "the guest did not boot within 120 s"
        proc.kill()  # SIGKILL: no finally runs in the owner
        proc.wait()
        assert _uml_processes(uml_kernel)
        report = clean()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert report.killed
    assert _uml_processes(uml_kernel) == []
