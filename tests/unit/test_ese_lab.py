"""What tests/support/ese_lab.py reads from ss and /proc/net/netstat, and what it makes of
a closed subflow's samples (its transfers run in the lab kernel)."""

from __future__ import annotations

import sys

from tests.conftest import REPO, load_script


def _load_ese_lab():
    support = str(REPO / "tests" / "support")
    if support not in sys.path:
        sys.path.insert(0, support)  # ese_lab imports mptcp_lab by name, as in the guest
    return load_script("tests/support/ese_lab.py")


ese_lab = _load_ese_lab()

SS = "\n".join([
    "0 0 10.77.0.1:5201 10.77.0.11:41000",
    "\t mptcp-d wscale:7,7 rto:204 rtt:10.9/0.2 mss:1448 cwnd:1 bytes_sent:73000"
    " bytes_acked:70104 notsent:65160 unacked:1",
    "0 0 10.77.0.1:5201 10.77.0.10:41001",
    "\t mptcp-d wscale:7,7 rto:210 rtt:11.2/0.4 mss:1448 cwnd:88 bytes_sent:4000000"
    " bytes_acked:3900000 unacked:60",
    "0 0 10.77.0.1:40000 10.77.0.12:8080",
    "\t cubic cwnd:10 bytes_acked:1",
])

def test_ss_lines_give_each_server_subflow_its_window_bytes_and_unsent_queue():
    states = ese_lab.subflow_states(SS)
    assert set(states) == {"10.77.0.11", "10.77.0.10"}  # not the socket on another port
    assert states["10.77.0.11"] == {"cwnd": 1, "bytes_acked": 70104, "bytes_sent": 73000,
                                    "notsent": 65160}
    assert states["10.77.0.10"]["notsent"] == 0  # ss prints no notsent when it is 0


def test_mptcp_counters_pair_the_header_with_the_values():
    text = ("TcpExt: A B\nTcpExt: 1 2\n"
            "MPTcpExt: MPCapableSYNRX MptcpDClosed MptcpDReinject\nMPTcpExt: 4 1 1\n")
    assert ese_lab.mptcp_counters(text) == {"MPCapableSYNRX": 4, "MptcpDClosed": 1,
                                            "MptcpDReinject": 1}
    assert ese_lab.mptcp_counters("TcpExt: A\nTcpExt: 1\n") == {}


def _sample(cwnd: int, sent: int, notsent: int) -> dict[str, int]:
    return {"cwnd": cwnd, "bytes_acked": sent, "bytes_sent": sent, "notsent": notsent}


def test_a_closed_subflow_that_kept_being_fed_shows_its_unsent_queue():
    fed = [(0.1, _sample(20, 10_000, 0)), (0.2, _sample(1, 20_000, 0)),
           (0.3, _sample(1, 21_448, 64_000)), (0.4, _sample(1, 22_896, 62_552)),
           (0.5, _sample(1, 24_344, 61_104))]
    got = ese_lab.after_closing(fed)
    assert got["closed_at_s"] == 0.2
    assert got["notsent_max_after_close"] == 64_000
    assert got["notsent_share_after_close"] == 0.75
    assert got["sent_after_close"] == 4_344
    # 64 kB queued after the closure, of which three packets went out
    assert got["handed_after_close"] == 24_344 + 61_104 - 20_000


def test_a_closed_subflow_left_alone_has_nothing_queued():
    idle = [(0.1, _sample(20, 10_000, 0)), (0.2, _sample(1, 20_000, 0)),
            (0.3, _sample(1, 20_000, 0))]
    got = ese_lab.after_closing(idle)
    assert got["notsent_max_after_close"] == 0 and got["sent_after_close"] == 0
    assert got["handed_after_close"] == 0
    # what it held when it closed drains without anything new being queued
    draining = [(0.1, _sample(1, 10_000, 4_344)), (0.2, _sample(1, 12_896, 1_448)),
                (0.3, _sample(1, 14_344, 0))]
    assert ese_lab.after_closing(draining)["handed_after_close"] == 0
    assert ese_lab.after_closing([(0.1, _sample(5, 1, 0))]) == {}


def test_summary_marks_closed_only_the_subflow_held_at_one_packet_late():
    a, b = "10.77.0.10", "10.77.0.11"
    samples = [(t / 10, {a: _sample(30, 1000 * t, 0), b: _sample(1 if t > 2 else 30,
                                                                    100 * t, 0)})
               for t in range(1, 9)]
    per = ese_lab.summary(samples)["subflows"]
    assert (per[a]["closed"], per[b]["closed"]) == (False, True)
    assert per[b]["closed_at_s"] == 0.3 and "closed_at_s" not in per[a]
