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
