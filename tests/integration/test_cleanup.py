"""Nothing is left behind: Ctrl-C tears down; after SIGKILL, `pathdiv clean` does."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

import pytest

from pathdiv.experiments.config.load import load
from pathdiv.experiments.dataplane.nftables.plane import NftablesDataPlane
from pathdiv.experiments.fabric.nodeprocs import wait_for_line
from pathdiv.experiments.network.network import Network
from pathdiv.kernels.processes import owned_processes
from tests.conftest import REPO

pytestmark = pytest.mark.root
PATHDIV = [sys.executable, "-m", "pathdiv.experiments.cli"]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a script's `pathdiv ... &` starts it


def start_probe(until: str = "network up", sigint_ignored: bool = False
                ) -> subprocess.Popen[str]:
    proc = subprocess.Popen([*PATHDIV, "-v", "probe", "configs/class-probe.yaml"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_ignore_sigint if sigint_ignored else None)
    wait_for_line(proc, proc.stderr, until, 60, "pathdiv probe")
    return proc


def settled_leftovers(pid: int) -> list[int]:
    """Network processes of a dead owner once those that exit by themselves are gone
    (node shells end when their terminal closes; servers and captures do not)."""
    last = owned_by(pid)
    for _ in range(50):
        time.sleep(0.2)
        now = owned_by(pid)
        if now == last:
            return now
        last = now
    return last


def owned_by(pid: int) -> list[int]:
    return [p for p, owner in owned_processes() if owner == pid]


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["terminal", "background"])
def test_ctrl_c_tears_everything_down(root_fabric, sigint_ignored):
    proc = start_probe(sigint_ignored=sigint_ignored)
    assert owned_by(proc.pid), "the lab should be running before Ctrl-C"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted; the network was torn down" in err
    assert owned_by(proc.pid) == []


def test_clean_after_sigkill_then_a_new_lab_works(root_fabric, tmp_path):
    proc = start_probe(until="measuring")  # servers run, traffic flows
    proc.kill()
    proc.wait(timeout=10)
    left = settled_leftovers(proc.pid)
    assert left, "SIGKILL mid-traffic should leave lab processes for clean to find"
    out = subprocess.run([*PATHDIV, "clean"], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    killed = re.search(r"killed (\d+) leftover", out.stdout)
    assert killed and int(killed.group(1)) >= len(left), out.stdout
    assert owned_by(proc.pid) == []
    again = subprocess.run([*PATHDIV, "clean"], cwd=REPO, capture_output=True, text=True,
                           timeout=60)
    assert "killed 0 leftover" in again.stdout  # idempotent
    cfg = load(REPO / "configs/class-probe.yaml")
    with Network(cfg, NftablesDataPlane, tmp_path) as net:
        assert net.ping_all() == []


def test_clean_deletes_only_namespaces_pathdiv_marked_and_whose_owner_is_gone(root_fabric):
    from pathdiv.experiments.fabric.environment import mark_namespace_argv
    from pathdiv.kernels.processes import owner_mark

    gone = subprocess.Popen(["true"])
    gone.wait()
    names = {"pdfoo": None,  # named like pathdiv's, made by someone else: no mark
             "pdlab-cleantest": f"{gone.pid}:1",  # pathdiv's, owner gone
             "pd4cleantest": owner_mark()}  # pathdiv's, owner (this test) alive
    try:
        for name, mark in names.items():
            subprocess.run(["ip", "netns", "add", name], check=True)
            if mark:
                subprocess.run(mark_namespace_argv(name, mark), check=True)
        out = subprocess.run([*PATHDIV, "clean"], cwd=REPO, capture_output=True, text=True,
                             timeout=60)
        left = subprocess.run(["ip", "netns", "list"], capture_output=True,
                              text=True).stdout
    finally:
        for name in names:
            subprocess.run(["ip", "netns", "delete", name], capture_output=True)
    print(out.stdout)
    assert out.returncode == 0, out.stderr
    present = {line.split()[0] for line in left.splitlines() if line.strip()}
    assert "pdfoo" in present and "pd4cleantest" in present
    assert "pdlab-cleantest" not in present
    assert "deleted namespace(s) pdlab-cleantest" in out.stdout
    assert "pdfoo" in out.stdout.split("did not make alone")[1]  # and it says so
