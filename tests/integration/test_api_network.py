"""`pathdiv.api.network` on the host kernel: the fat tree built from Python, one transfer
with its FCT, goodput and paths, and everything torn down, also when the block raises."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from pathdiv import api
from pathdiv.kernels.processes import owned_processes
from tests.conftest import REPO

pytestmark = pytest.mark.root

# class-probe: k=4, 20 Mbit/s links; ECMP keeps a TCP flow on one path, spraying uses all
CONFIG = str(REPO / "configs" / "class-probe.yaml")


def network_processes() -> list[int]:
    """This test process's network processes (node shells, servers, captures), once
    those that exit by themselves are gone."""
    last: list[int] = []
    for _ in range(25):
        now = [p for p, owner in owned_processes() if owner == os.getpid()]
        if now == last:
            break
        last = now
        time.sleep(0.2)
    return last


@pytest.mark.parametrize("mode,cores", [("ecmp", 1), ("spray", 4)])
def test_a_transfer_from_python_reports_fct_goodput_and_paths(root_fabric, mode, cores):
    with api.network(CONFIG, {"dataplane": "kernel", "switching.mode": mode,
                              "hosts.transport": "tcp", "hosts.kernel": "host"}) as net:
        assert network_processes(), "the nodes should run while the block does"
        assert len(net.hosts) == 16 and "c1" in net.switches
        assert len(net.paths("h1", "h16")) == 4
        assert net.cmd("h16", ["echo", "hi"]).strip() == "hi"
        t = net.transfer("h1", "h16", "2MB")
        assert t.received == 2_000_000 and t.fct_s > 0
        assert 1 < t.goodput_mbps <= 20  # the links' 20 Mbit/s
        assert len(t.paths) == cores
        assert all(p[0] == "h1" and p[-1] == "h16" for p in t.paths)
        svg = net.draw()
        assert svg.count('class="path"') == cores
    assert network_processes() == []


def test_the_network_is_torn_down_when_the_block_raises(root_fabric):
    with pytest.raises(RuntimeError, match="user code failed"):
        with api.network(CONFIG, {"dataplane": "kernel", "hosts.kernel": "host",
                                  "hosts.transport": "tcp"}) as net:
            assert net.cmd("h1", ["true"]) == ""
            raise RuntimeError("user code failed")
    assert network_processes() == []
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "e1-eth0" not in links  # no switch port left in the root namespace


def test_pathdiv_net_draws_the_last_flow(root_fabric, tmp_path):
    picture = tmp_path / "flow.svg"
    proc = subprocess.run(
        [sys.executable, "-m", "pathdiv.experiments.cli", "net", CONFIG,
         "--set", "dataplane=kernel", "--set", "switching.mode=spray"],
        input=f"flow h1 h16 2MB tcp\ndraw {picture}\ndraw nope.txt\nexit\n",
        capture_output=True, text=True, timeout=240, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"wrote {picture} (4 path(s) drawn)" in proc.stdout
    assert "usage: draw FILE.svg" in proc.stdout
    svg = picture.read_text()
    assert svg.count('class="path"') == 4 and svg.count('class="link"') == 48
