"""`pathdiv.experiments.api` on the host kernel: the fat tree built from Python, one
transfer with its FCT, goodput and paths, everything torn down, also when the block
raises; `pathdiv net` drawing the last flow; a plan whose workload pattern was registered
from Python."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time

import pytest

from pathdiv.experiments import api
from pathdiv.experiments.api import extend
from pathdiv.experiments.config.workloads import PATTERNS
from pathdiv.experiments.plan.designations import SHAPES
from pathdiv.kernels.processes import owned_processes
from tests.conftest import REPO, count_packets

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
    with api.network(CONFIG, {"dataplane": "nftables", "switching.mode": mode,
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
        with api.network(CONFIG, {"dataplane": "nftables", "hosts.kernel": "host",
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
         "--set", "dataplane=nftables", "--set", "switching.mode=spray"],
        input=f"flow h1 h16 2MB tcp\ndraw {picture}\ndraw nope.txt\nexit\n",
        capture_output=True, text=True, timeout=240, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"wrote {picture} (4 path(s) drawn)" in proc.stdout
    assert "usage: draw FILE.svg" in proc.stdout
    svg = picture.read_text()
    assert svg.count('class="path"') == 4 and svg.count('class="link"') == 48


def ring(hosts: list[str], rng) -> list[api.Shape]:
    """One round: every host fetches from the next host (in the order given) at once."""
    return [[(h, (hosts[(i + 1) % len(hosts)],)) for i, h in enumerate(hosts)]]


def test_a_pattern_registered_from_python_runs_on_the_host_kernel(root_fabric, tmp_path):
    api.register_pattern("ring-run", "every host fetches from the next at once", ring)
    try:
        cfg = api.load_config({
            "name": "ring", "dataplane": "nftables",
            "hosts": {"kernel": "host", "transport": "tcp"},
            "topology": {"links": {t: {"bw_mbps": 100} for t in ("host", "edge", "core")}},
            "workload": {"pattern": "ring-run", "iterations": 1,
                         "flow_types": {"query": "10KB"}},
            "fidelity": {"enabled": False}})
        seen: list[api.RunProgress] = []
        result = api.run(cfg, tmp_path / "out", runs=api.plan(cfg, repetitions=1),
                         progress=seen.append, analyze=False)
    finally:
        PATTERNS.pop("ring-run", None)
        SHAPES.pop("ring-run", None)
        extend._refresh_schema()
    assert [(p.status, p.done, p.total) for p in seen] == [("complete", 1, 1)], seen
    rows = list(csv.DictReader((result.folder / "runs" / seen[0].run_id /
                                "transfers.csv").open()))
    hosts = cfg.topology().hosts
    order = sorted(hosts, key=lambda h: int(h[1:]))
    want = {(h, order[(i + 1) % len(order)]) for i, h in enumerate(order)}
    assert {(r["client"], r["server"]) for r in rows} == want
    assert all(r["ok"] == "True" for r in rows)


def test_capture_holds_the_transfer_on_its_links_only(root_fabric, tmp_path):
    with api.network(CONFIG, {"dataplane": "nftables", "switching.mode": "ecmp",
                              "hosts.transport": "tcp", "hosts.kernel": "host"}) as net:
        with net.capture(tmp_path / "pcaps") as folder:
            t = net.transfer("h1", "h2", "200KB")
        files = sorted(folder.glob("*.pcap"))
        assert len(files) == len(net.topo.links)
        on_path = {net.topo.link_between(a, b).b.intf for a, b in zip(t.paths[0],
                                                                       t.paths[0][1:],
                                                                       strict=False)}
    assert t.paths == [("h1", "e1", "h2")]
    for path in files:
        packets = count_packets(path)
        if path.stem in on_path:
            assert packets > 100, path.name  # 200 KB and its ACKs
        else:
            assert packets == 0, path.name
