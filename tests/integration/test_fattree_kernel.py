"""The kernel data plane on a k=4 fat tree at 20 Mbit/s, as a user checks it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from experiments.config import load
from experiments.dataplane.kernel import KernelDataPlane
from experiments.network import Lab, lab_processes
from experiments.probe import run_probe
from tests.conftest import REPO

pytestmark = pytest.mark.root


def cores_used(per_core: dict[str, int], share: float = 0.01) -> list[str]:
    total = sum(per_core.values())
    return [c for c, n in per_core.items() if total and n / total >= share]


@pytest.fixture(scope="module")
def lab(root_lab, tmp_path_factory):
    cfg = load(REPO / "configs/lab-probe.yaml")
    with Lab(cfg, KernelDataPlane, tmp_path_factory.mktemp("lab")) as running:
        yield running
    assert not [p for p, owner in lab_processes() if owner == running_pid()], \
        "the lab left processes behind"


def running_pid() -> int:
    import os

    return os.getpid()


@pytest.mark.parametrize(("mode", "spray"), [
    ("static", "random"), ("ecmp", "random"), ("spray", "random"), ("spray", "roundrobin"),
])
def test_pingall_in_every_mode(lab, mode, spray):
    lab.dp.set_mode(mode, spray)
    assert lab.ping_all() == []


def test_probe_ecmp_spreads_flows_and_subflows(lab):
    lab.dp.set_mode("ecmp", "random")
    r = run_probe(lab)
    assert len(cores_used(r["tcp_flows"]["per_core"])) >= 3, r["tcp_flows"]
    assert r["mptcp"]["subflows"] == 4
    assert len(cores_used(r["mptcp"]["per_core"])) >= 2, r["mptcp"]
    assert len(cores_used(r["tcp_single"]["per_core"])) == 1, r["tcp_single"]
    assert r["goodput_fraction"] >= 0.9, r


def test_probe_spray_puts_one_flow_on_all_cores_evenly(lab):
    lab.dp.set_mode("spray", "random")
    r = run_probe(lab)
    per_core = r["tcp_single"]["per_core"]
    assert min(per_core.values()) > 0, per_core
    assert max(per_core.values()) / min(per_core.values()) <= 1.5, per_core


def test_probe_cli_static_pins_one_flow_to_one_core(root_lab):
    """`pathdiv probe --json` as a user runs it: one JSON object with the documented keys."""
    out = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "probe", "configs/lab-probe.yaml", "--json",
         "--set", "switching.mode=static"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert {"dataplane", "mode", "pair", "tcp_flows", "mptcp", "tcp_single",
            "goodput_fraction"} <= set(r)
    assert (r["dataplane"], r["mode"]) == ("kernel", "static")
    assert r["pair"] == ["h1", "h16"] and r["mptcp"]["subflows"] == 4
    per_core = r["tcp_single"]["per_core"]
    assert sorted(per_core) == ["c1", "c2", "c3", "c4"]
    assert sum(1 for n in per_core.values() if n > 0) == 1, per_core
    assert r["goodput_fraction"] >= 0.9, r
