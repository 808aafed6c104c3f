"""FCT slowdown against the ideal FCT on an idle path, its table by size bucket, and the
goodput timeline the time plots draw (pure)."""

from __future__ import annotations

import pandas as pd
import pytest

from pathdiv.analysis.capture.pcap import ip_to_int
from pathdiv.analysis.metrics.slowdown import ideal_fct_s, size_bucket, slowdown_table, slowdowns
from pathdiv.analysis.metrics.timeline import goodput_timeline
from pathdiv.experiments.config.load import validate


def test_ideal_fct_is_transmission_plus_two_rtts_on_the_best_path():
    cfg = validate({})  # 20 Mbit/s everywhere, no delay
    topo, conds = cfg.topology(), cfg.link_conditions()
    # h1 and h2 share e1: 2 hops; 1000 full segments = 1,514,000 bytes on the wire
    assert ideal_fct_s(topo, conds, "h2", "h1", 1_448_000) == pytest.approx(
        1_514_000 * 8 / 20e6 + 2 * 1514 * 8 / 20e6)
    slow = validate({"topology": {"link_overrides": {
        "a1>e1": {"bw_mbps": 5}, "c1>a1": {"delay_ms": 10}}}})
    # h16 -> h1: the paths through a2 avoid the slow a1>e1, so the best stays at 20 Mbit/s
    fast = ideal_fct_s(topo, conds, "h16", "h1", 1_448_000)
    assert ideal_fct_s(slow.topology(), slow.link_conditions(), "h16", "h1", 1_448_000) == fast
    only_slow = validate({"topology": {"link_overrides": {"a1>e1": {"bw_mbps": 5},
                                                          "a2>e1": {"delay_ms": 10}}}})
    ideal = ideal_fct_s(only_slow.topology(), only_slow.link_conditions(), "h16", "h1", 1_448_000)
    via_a2 = fast + 2 * 0.010  # 10 ms one way on the data path: 2 RTTs of 10 ms more
    assert ideal == pytest.approx(via_a2)


def test_slowdown_per_transfer_and_by_size_bucket():
    cfg = validate({})
    tr = pd.DataFrame({
        "client": ["h1", "h1", "h1"], "server": ["h2", "h2", "h2"],
        "size_bytes": [1_448_000, 1_448_000, 5_000], "ok": [True, True, False],
        "start_s": [0.0, 0.0, 0.0], "end_s": [9.0, 9.0, 9.0],
        "fct_s": [1.2136224, float("nan"), 1.0], "switching": ["ecmp"] * 3,
    })
    sd = slowdowns(tr, cfg.topology(), cfg.link_conditions())
    assert sd[0] == pytest.approx(2.0)
    assert sd[1] == pytest.approx(9.0 / 0.6068112)  # no capture FCT: the application's
    assert pd.isna(sd[2])  # failed transfers have none
    tr["slowdown"] = sd
    table = slowdown_table(tr, ["switching"])
    assert table.to_dict("records") == [{
        "switching": "ecmp", "size_bucket": "1-10MB", "flows": 2,
        "slowdown_p50": pytest.approx((2.0 + 9.0 / 0.6068112) / 2),
        "slowdown_p99": pytest.approx(2.0 + 0.99 * (9.0 / 0.6068112 - 2.0))}]
    assert [size_bucket(s) for s in (1, 10_000, 10_001, 2_000_000, 20_000_000)] == [
        "<=10KB", "<=10KB", "10-100KB", "1-10MB", ">10MB"]


def test_timeline_counts_payload_going_down_to_hosts_by_server_port():
    topo = validate({}).topology()
    link = [lk.name for lk in topo.links].index("h1-e1")
    h1 = ip_to_int(topo.nodes["h1"].address)
    h2 = ip_to_int(topo.nodes["h2"].address)
    pk = pd.DataFrame({
        "ts": [100.1, 100.2, 100.6, 100.6, 100.7],
        "link": [link] * 5,
        "src": [h2, h2, h2, h1, h2],
        "dst": [h1, h1, h1, h2, h1],  # the h2-bound packet is on h1's link going up
        "sport": [8080, 8080, 8081, 8080, 8080],
        "dport": [40000] * 5,
        "seq": [1, 1001, 1, 1, 2001],
        "payload": [1000, 1000, 500, 1000, 0],
    })
    tl = goodput_timeline(pk, topo, 8080, t0_wall=100.0)
    assert list(tl["t_s"]) == [0.0, 0.25, 0.5]
    assert list(tl["measured_mbps"]) == pytest.approx([2000 * 8 / 0.25 / 1e6, 0, 0])
    assert list(tl["other_mbps"]) == pytest.approx([0, 0, 500 * 8 / 0.25 / 1e6])


def test_timeline_counts_a_segment_that_arrives_twice_once():
    """A spurious retransmission (the segment had arrived) delivers nothing new; the same
    sequence number on another connection (other ports) is its own data."""
    topo = validate({}).topology()
    link = [lk.name for lk in topo.links].index("h1-e1")
    h1 = ip_to_int(topo.nodes["h1"].address)
    h2 = ip_to_int(topo.nodes["h2"].address)
    pk = pd.DataFrame({
        "ts": [100.1, 100.2, 100.3, 100.4],
        "link": [link] * 4,
        "src": [h2] * 4,
        "dst": [h1] * 4,
        "sport": [8080] * 4,
        "dport": [40000, 40000, 40000, 40001],
        "seq": [1, 1001, 1, 1],  # the third repeats the first; the fourth: another port
        "payload": [1000] * 4,
    })
    tl = goodput_timeline(pk, topo, 8080, t0_wall=100.0)
    assert list(tl["measured_mbps"]) == pytest.approx([2000 * 8 / 0.25 / 1e6,
                                                      1000 * 8 / 0.25 / 1e6])
