"""scripts/seed000_rb.py's `wire` measures: how a transfer's data left the server, and what
the burstiness metric (frames re-timed as a link sends them) and the same gap rule on the
capture times make of it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.conftest import load_script

rb = load_script("scripts/seed000_rb.py")
FRAME = 1514
TX_S = FRAME * 8 / 20e6  # one full frame at 20 Mbit/s


def test_chunks_released_at_once_are_one_burst_on_a_link_that_sends_them_back_to_back():
    # a backlogged shaper that lets out 4-frame chunks at once, a chunk's time apart:
    # at the capture times, bursts of 4; sent one frame at a time, one burst of 12
    ts = np.repeat(np.arange(3) * 4 * TX_S, 4)
    wire = np.full(12, FRAME)
    sent = pd.DataFrame({"ts": ts, "wire_len": wire, "subflow": [1] * 12})
    m = rb.transfer_wire(sent, 20.0, list(range(12)))
    assert m["burstiness"] == pytest.approx(12.0)  # metrics.csv's
    assert m["burstiness_at_capture"] == pytest.approx(4.0)
    # every pair inside the captured bursts left at the same instant
    assert m["same_instant_pct"] == pytest.approx(100.0)
    assert m["subflow_run"] == 12.0
    assert m["dsn_behind_pct"] == 0.0


def test_subflow_runs_and_dsns_sent_behind():
    # DSNs dealt round robin over three subflows, each subflow's share sent as a run
    dsns = [0, 3, 6, 1, 4, 7, 2, 5, 8]
    assert rb.behind_pct(dsns) == pytest.approx(100 * 4 / 8)  # 1, 4, 2, 5
    assert rb.behind_pct(sorted(dsns)) == 0.0
    assert rb.run_lengths(np.array([1, 1, 1, 2, 2, 2, 3, 3, 3])) == 3.0
    assert rb.run_lengths(np.array([1, 2, 3] * 3)) == 1.0


def test_runs_in_dsn_order_are_the_schedulers_not_the_wires():
    # dealt round robin, sent subflow by subflow: long runs on the wire, none in DSN order
    wire = [(0, "a"), (3, "a"), (6, "a"), (1, "b"), (4, "b"), (7, "b"), (2, "c"), (5, "c")]
    assert rb.decision_run(wire) == 1.0
    # dealt in runs of three: the same run in DSN order whatever the wire order; a resend
    # (DSN 1 again, on another subflow) counts at its first transmission only
    dealt = [(0, "a"), (1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "b"), (1, "b")]
    assert rb.decision_run(dealt) == 3.0
    # subflows named by their 4-tuples, as the captures give them
    a, b = ("10.0.0.1", 80, "10.0.1.1", 5000), ("10.0.0.2", 80, "10.0.1.2", 5001)
    assert rb.decision_run([(0, a), (1, a), (2, b)]) == pytest.approx(5 / 3)


def test_rb_counts_follow_the_kernels_quantisation():
    assert rb.rb_counts([4000, 4100, 4700, 4400]) == [4, 4, 4, 4]  # within 20 %: equal
    assert rb.rb_counts([1000, 31000, 52000, 70000]) == [4, 1, 1, 1]
    assert rb.rb_counts([1000, 2000]) == [4, 2]


def test_handshake_and_data_rtts_from_one_links_packets():
    # server port 80; subflow 1: SYN-ACK out at 0, client's ACK in at 1 ms; two segments
    # at 2 and 3 ms, the first resent at 9 ms (no sample), the second acked at 8 ms
    cols = ["ts", "subflow", "sport", "dport", "flags", "seq", "ack", "payload"]
    rows = [(0.000, 1, 80, 5000, 0x12, 99, 1, 0),
            (0.001, 1, 5000, 80, 0x10, 1, 100, 0),
            (0.002, 1, 80, 5000, 0x18, 100, 1, 1000),
            (0.003, 1, 80, 5000, 0x18, 1100, 1, 1000),
            (0.008, 1, 5000, 80, 0x10, 1, 2100, 0),
            (0.009, 1, 80, 5000, 0x18, 100, 1, 1000)]
    pk = pd.DataFrame(rows, columns=cols)
    assert rb.handshake_rtts(pk, 80) == {1: pytest.approx(0.001)}
    assert rb.data_rtts(pk, 80) == {1: pytest.approx(0.005)}


def test_runs_longer_than_rbs_pattern_allows():
    # runs of 1, 5 and 2 in DSN order: the run of 5 holds 5 of the 8 packets
    segs = [(0, "a"), *[(k, "b") for k in range(1, 6)], (6, "a"), (7, "a")]
    assert rb.longer_runs_pct(segs) == pytest.approx(100 * 5 / 8)
    assert rb.longer_runs_pct(segs, longer_than=5) == 0.0


def test_burst_parts_add_up_to_burstiness_and_split_at_the_first_ack():
    # a burst of 8 (the initial windows), then after the first ACK two bursts of 2
    ts = np.r_[np.zeros(8), 1.0, 1.0, 2.0, 2.0]
    wire = np.full(12, FRAME)
    initial, later = rb.burst_parts(ts, wire, 20.0, 0.5)
    assert initial == pytest.approx(64 / 12)
    assert later == pytest.approx(8 / 12)
    whole = rb.burstiness(rb.burst_sizes(ts, wire, 20.0))[0]
    assert initial + later == pytest.approx(whole)
    sent = pd.DataFrame({"ts": ts, "wire_len": wire, "subflow": [1] * 12})
    m = rb.transfer_wire(sent, 20.0, list(range(12)), 0.5)
    assert m["burstiness_initial_windows"] == pytest.approx(initial)


def test_egress_kinds_name_the_hops_from_server_to_client():
    from pathdiv.topologies.fattree import FatTree

    topo = FatTree(4)
    assert rb.egress_kind(topo, "h1:h1-eth0") == "server access"
    assert rb.egress_kind(topo, "e1:e1-eth0") == "client access"
    assert rb.egress_kind(topo, "e1:e1-eth2") == "edge to agg"
    assert rb.egress_kind(topo, "a1:a1-eth0") == "agg to edge"
    assert rb.egress_kind(topo, "a3:a3-eth2") == "agg to core"
    assert rb.egress_kind(topo, "c1:c1-eth1") == "core to agg"
    assert rb.hop_names([0, 5, 9, 12, 7, 3], ["host", "edge", "core", "core", "edge",
                                              "host"]) == [
        "server access", "edge to agg", "agg to core", "core to agg", "agg to edge",
        "client access"]
    assert rb.hop_names([0, 3], ["host", "host"]) == ["server access", "client access"]


def test_a_packet_is_lost_at_the_first_hop_it_did_not_cross():
    assert rb.drop_hop({0, 5, 9}, (0, 5, 9, 12, 7, 3)) == 3
    assert rb.drop_hop({0, 5, 9, 12, 7, 3}, (0, 5, 9, 12, 7, 3)) is None


def test_losses_and_resends_followed_along_the_subflows_path():
    # one subflow over links 0 (server) -> 4 -> 3 -> 2 (client), one pod; seq 100 lost at
    # the client's access queue and resent, seq 200 lost on the edge's uplink and resent,
    # seq 300 resent
    # although delivered (spurious); the first ACK at t = 0.5
    rows = []

    def send(seq: int, ip_id: int, ts: float, links: list[int]) -> None:
        rows.extend({"subflow": 7, "seq": seq, "ip_id": ip_id, "payload": 100,
                     "wire_len": FRAME, "link": lk, "ts": ts + k * 1e-3}
                    for k, lk in enumerate(links))

    send(0, 1, 0.0, [0, 4, 3, 2])
    send(100, 2, 0.1, [0, 4, 3])
    send(200, 3, 0.6, [0])
    send(300, 4, 0.7, [0, 4, 3, 2])
    send(100, 5, 1.0, [0, 4, 3, 2])
    send(200, 6, 1.1, [0, 4, 3, 2])
    send(300, 7, 1.2, [0, 4, 3, 2])
    data = pd.DataFrame(rows).sort_values("ts", kind="stable")
    out = rb.transfer_losses(data, 0, 2, ["host", "edge", "host", "edge", "edge"], 0.5)
    assert out["sent"] == 7 and out["lost"] == 2
    assert out["lost client access"] == 1 and out["lost edge to agg"] == 1
    assert out["lost_initial_windows"] == 1
    assert out["resent"] == 3
    assert out["resent_after_loss_client_access"] == 1
    assert out["resent_after_loss_elsewhere"] == 1
    assert out["resent_not_lost"] == 1
    # without the link's rate no burst is long; at 20 Mbit/s each packet alone
    assert out["sent_in_big_bursts"] == 0 and out["lost_in_small_bursts"] == 2
    out = rb.transfer_losses(data, 0, 2, ["host", "edge", "host", "edge", "edge"], 0.5, 20.0)
    assert out["sent_in_small_bursts"] == 7 and out["lost_in_small_bursts"] == 2


def test_subflows_per_later_burst():
    # before t0 a burst of 4 on two subflows (not counted); then a burst of 3 on one
    # subflow and a burst of 2 on two: (3 * 1 + 2 * 2) / 5
    ts = np.r_[np.zeros(4), 1.0, 1.0, 1.0, 2.0, 2.0]
    wire = np.full(9, FRAME)
    sfs = np.array([1, 2, 1, 2, 3, 3, 3, 1, 2])
    assert rb.later_burst_subflows(ts, wire, 20.0, sfs, 0.5) == pytest.approx(7 / 5)


def test_data_ack_of_a_dss_option_and_the_windows_headroom():
    # DSS with an 8-byte data ACK (flags A|a) and no mapping, after two NOPs
    dss = bytes([30, 12, 0x20, 0x03]) + (5000).to_bytes(8, "big")
    assert rb.dss_data_ack(b"\x01\x01" + dss) == (5000, 8)
    assert rb.dss_data_ack(bytes([30, 8, 0x20, 0x01]) + (7).to_bytes(4, "big")) == (7, 4)
    assert rb.dss_data_ack(bytes([30, 4, 0x20, 0x00])) is None  # no data ACK
    flow = ("10.0.0.1", 80, "10.0.1.1", 5000)
    sent = [rb.Segment(0.0, 0, 1000, flow), rb.Segment(0.2, 1000, 1000, flow),
            rb.Segment(0.3, 2000, 1000, flow)]
    acks = [rb.DataAck(0.1, 5000, 1000, 3000)]  # window 2000 from DSN 1000
    room = rb.window_headroom(sent, acks)
    assert np.isnan(room[0]) and room[1] == 1000 and room[2] == 0
