"""The bmv2 data plane on a k=4 fat tree at 20 Mbit/s: the kernel plane's checks, plus
the P4 port counters against packet captures."""

from __future__ import annotations

import os

import pytest

from experiments.config import load
from experiments.network import Lab, lab_processes, wait_for_line
from experiments.probe import run_probe
from tests.conftest import REPO

pytestmark = [pytest.mark.root, pytest.mark.slow]

PORT = 5002
BYTES = 4_000_000


@pytest.fixture(scope="module")
def bmv2():
    from experiments.dataplane.bmv2 import Bmv2DataPlane, find_p4_tools

    tools, reason = find_p4_tools()
    if tools is None:
        pytest.skip(f"bmv2 not available: {reason}")
    return Bmv2DataPlane


def cores_used(per_core: dict[str, int], share: float = 0.01) -> list[str]:
    total = sum(per_core.values())
    return [c for c, n in per_core.items() if total and n / total >= share]


@pytest.fixture(scope="module")
def lab(root_lab, bmv2, tmp_path_factory):
    cfg = load(REPO / "configs/lab-probe.yaml")
    with Lab(cfg, bmv2, tmp_path_factory.mktemp("lab")) as running:
        yield running
    assert not [p for p, owner in lab_processes() if owner == os.getpid()], \
        "the lab left processes behind"


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


def test_probe_static_pins_one_flow_to_one_core(lab):
    lab.dp.set_mode("static", "random")
    r = run_probe(lab)
    per_core = r["tcp_single"]["per_core"]
    assert sum(1 for n in per_core.values() if n > 0) == 1, per_core
    assert r["goodput_fraction"] >= 0.9, r


def pcap_packets(path) -> int:
    import dpkt

    with open(path, "rb") as f:
        return sum(1 for _ in dpkt.pcap.Reader(f))


def test_port_counters_agree_with_captures(lab, tmp_path):
    """Every core port: packets the P4 program counted in and out = packets captured (1%)."""
    lab.dp.set_mode("spray", "random")  # so every core carries traffic
    topo = lab.topo
    client, server = topo.hosts[0], topo.hosts[-1]
    srv = lab.python(server, "experiments.transfer", ["serve", "--port", str(PORT)])
    try:
        wait_for_line(srv, srv.stdout, "ready", 15, "transfer server")
        lab.start_capture(tmp_path / "pcap", snaplen=96, budget_mb=200)
        before = {c: lab.counters(c) for c in topo.cores}
        fetch = lab.python(client, "experiments.transfer",
                           ["fetch", f"{topo.nodes[server].address}:{PORT}:{BYTES}",
                            "--timeout", "120"])
        out, err = fetch.communicate(timeout=150)
        assert '"ok": true' in out, err
        after = {c: lab.counters(c) for c in topo.cores}
        lab.stop_capture()
    finally:
        srv.terminate()
    checked = 0
    for core in topo.cores:
        for intf, now in after[core].items():
            then = before[core][intf]
            counted = (now.rx_packets - then.rx_packets) + (now.tx_packets - then.tx_packets)
            captured = pcap_packets(tmp_path / "pcap" / f"{intf}.pcap")
            if counted or captured:
                checked += 1
                assert abs(counted - captured) <= 0.01 * max(counted, captured), \
                    (intf, counted, captured)
    assert checked >= 4
