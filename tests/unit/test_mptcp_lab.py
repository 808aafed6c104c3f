"""The capture analysis of tests/support/mptcp_lab.py (its checks run in the lab kernel)."""

from __future__ import annotations

import struct

import dpkt
import pytest

from tests.conftest import load_script

mptcp_lab = load_script("tests/support/mptcp_lab.py")


# ------------------------------------------------------------------ capture analysis


def _dss(dsn: int, ssn: int, length: int) -> bytes:
    # kind 30, len 20, subtype 2, flags: A (4-byte data ack), M, m (8-byte DSN)
    return struct.pack("!BBBBIQIH", 30, 22, 0x20, 0x01 | 0x04 | 0x08, 7, dsn, ssn, length)


def test_dss_mapping_is_parsed_after_nops_and_data_ack():
    opts = b"\x01\x01" + _dss(123456789, 1, 1400) + b"\x00\x00"
    assert mptcp_lab.dss_mapping(opts) == (123456789, 1, 1400)
    assert mptcp_lab.dss_mapping(b"\x01\x01\x08\x0a" + b"\x00" * 8) is None


def _segment(sport: int, dport: int, seq: int, flags: int, opts: bytes, payload: int) -> bytes:
    opts += b"\x00" * (-len(opts) % 4)
    tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq, flags=flags, opts=opts,
                       data=b"x" * payload)
    tcp.off = (20 + len(opts)) // 4
    ip = dpkt.ip.IP(src=bytes([10, 77, 0, 1]), dst=bytes([10, 77, 0, 10 + dport % 4]),
                    p=dpkt.ip.IP_PROTO_TCP, data=tcp)
    ip.len = 20 + len(bytes(tcp))
    return bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip))


def test_data_sequence_numbers_from_a_capture(tmp_path):
    pcap = tmp_path / "x.pcap"
    with pcap.open("wb") as f:
        w = dpkt.pcap.Writer(f)
        for port, isn in ((40000, 1000), (40001, 5000)):
            w.writepkt(_segment(mptcp_lab.PORT, port, isn, dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK,
                                b"", 0))
        # subflow A: one mapping of 2 segments at DSN 0; subflow B: DSN 2000 in one segment
        w.writepkt(_segment(mptcp_lab.PORT, 40000, 1001, dpkt.tcp.TH_ACK, _dss(0, 1, 2000), 1000))
        w.writepkt(_segment(mptcp_lab.PORT, 40000, 2001, dpkt.tcp.TH_ACK, _dss(0, 1, 2000), 1000))
        w.writepkt(_segment(mptcp_lab.PORT, 40001, 5001, dpkt.tcp.TH_ACK, _dss(2000, 1, 1000),
                            1000))
    packets = mptcp_lab.data_packets(pcap)
    assert [(dsn, flow[3], n) for dsn, flow, n in packets] == [
        (0, 40000, 1000), (1000, 40000, 1000), (2000, 40001, 1000)]


def test_a_segment_without_its_own_mapping_takes_its_subflows_last_one(tmp_path):
    pcap = tmp_path / "x.pcap"
    with pcap.open("wb") as f:
        w = dpkt.pcap.Writer(f)
        w.writepkt(_segment(mptcp_lab.PORT, 40000, 1000, dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK,
                            b"", 0))
        # one mapping of 3 segments at DSN 7000; only the first segment carries it
        w.writepkt(_segment(mptcp_lab.PORT, 40000, 1001, dpkt.tcp.TH_ACK, _dss(7000, 1, 3000),
                            1000))
        for seq in (2001, 3001, 4001):  # the last one is past the mapping: not counted
            w.writepkt(_segment(mptcp_lab.PORT, 40000, seq, dpkt.tcp.TH_ACK, b"", 1000))
    assert [dsn for dsn, _, _ in mptcp_lab.data_packets(pcap)] == [7000, 8000, 9000]


def test_interleave_fraction_counts_subflow_changes_between_consecutive_dsns():
    a, b = ("a",), ("b",)
    alternating = [(k * 1400, a if k % 2 else b, 1400) for k in range(10)]
    # counting starts at DSN 1400, the first packet of the later subflow
    assert mptcp_lab.interleave_fraction(alternating) == (1.0, 8)
    runs = [(k * 1400, a if (k // 5) % 2 else b, 1400) for k in range(20)]
    assert mptcp_lab.interleave_fraction(runs) == (2 / 14, 14)


def test_interleave_fraction_skips_the_time_before_all_subflows_joined():
    a, b = ("a",), ("b",)
    early = [(k, a, 1) for k in range(50)]
    steady = [(50 + k, a if k % 2 else b, 1) for k in range(11)]
    # retransmitted copy of DSN 51 on the other subflow is ignored
    frac, pairs = mptcp_lab.interleave_fraction([*early, *steady, (51, b, 1)])
    assert (frac, pairs) == (1.0, 10)


def test_turn_fraction_sees_a_stand_in_that_interleaving_does_not():
    a, b, c = ("a",), ("b",), ("c",)
    turns = [(k, (a, b, c)[k % 3], 1) for k in range(12)]
    # counting from c's first packet (DSN 2): DSNs 5..11 against the DSN three before
    assert mptcp_lab.turn_fraction(turns) == (1.0, 7)
    # DSN 7 was b's turn, c stood in and b took c's next one (rb's swap): still
    # interleaved, but four misses: DSNs 7 and 8, and 10 and 11 compared with them
    swapped = [*turns[:7], (7, c, 1), (8, b, 1), *turns[9:]]
    assert mptcp_lab.interleave_fraction(swapped) == (1.0, 9)
    assert mptcp_lab.turn_fraction(swapped) == (3 / 7, 7)
    # a retransmitted copy of DSN 5 on another subflow is ignored
    assert mptcp_lab.turn_fraction([*turns, (5, a, 1)]) == (1.0, 7)
    assert mptcp_lab.turn_fraction([]) == (0.0, 0)
    # c leaves after DSN 11: a and b keep their turns, one miss where the set changes
    left = [*turns, *((k, (a, b)[k % 2], 1) for k in range(12, 24))]
    assert mptcp_lab.turn_fraction(left) == (18 / 19, 19)


def test_wire_interleave_fraction_follows_the_capture_order_not_the_dsns():
    a, b, c = ("a",), ("b",), ("c",)
    # DSNs dealt round robin, but each subflow sent its share as one run (the lab kernel's
    # rb in the noisy experiment): interleaved by DSN, not on the wire
    dealt = [(k * 1400, (a, b, c)[k % 3], 1400) for k in range(12)]
    by_subflow = sorted(dealt, key=lambda p: ((a, b, c).index(p[1]), p[0]))
    assert mptcp_lab.interleave_fraction(by_subflow) == (1.0, 9)
    # counting from c's first packet (index 8): c c c c, three pairs, no change
    assert mptcp_lab.wire_interleave_fraction(by_subflow) == (0.0, 3)
    assert mptcp_lab.wire_interleave_fraction(dealt) == (1.0, 9)


def test_wire_interleave_fraction_leaves_resends_out():
    a, b = ("a",), ("b",)
    sent = [(k, a if k % 2 else b, 1) for k in range(6)]
    # a resend of DSN 4 on subflow a, between b's and a's packets, changes nothing
    assert mptcp_lab.wire_interleave_fraction([*sent[:5], (4, a, 1), sent[5]]) == (1.0, 4)
    assert mptcp_lab.wire_interleave_fraction([]) == (0.0, 0)


def test_copied_share_counts_segments_that_repeat_a_dsn():
    a, b = ("a",), ("b",)
    sent = [(k * 1400, a, 1400) for k in range(6)]
    # b copies the first three segments: 3 of 9 segments repeat a DSN
    assert mptcp_lab.copied_share([*sent, *((dsn, b, n) for dsn, _, n in sent[:3])]) == 3 / 9
    assert mptcp_lab.copied_share(sent) == 0.0
    assert mptcp_lab.copied_share([]) == 0.0


def test_path_shares_tell_copies_from_new_data():
    import socket

    a, b = socket.inet_aton("10.78.0.10"), socket.inet_aton("10.78.1.10")
    fa, fb = ("s", 5201, a, 40000), ("s", 5201, b, 40001)
    # path 0 carries DSNs 0..5 as new data; path 1 copies 0..2 and carries 6 alone
    packets = [*((k * 1400, fa, 1400) for k in range(6)),
               *((k * 1400, fb, 1400) for k in range(3)), (6 * 1400, fb, 1400)]
    p0, p1 = mptcp_lab.path_shares(packets, [a, b])
    assert (p0["segments"], p0["bytes"], p0["shared_share"]) == (6, 8400, 0.5)
    assert (p1["segments"], p1["shared_share"]) == (4, 0.75)
    assert mptcp_lab.path_shares([], [a]) == [{"segments": 0, "bytes": 0, "shared_share": 0.0}]


def test_parse_path_reads_rate_delay_loss_and_refuses_nonsense():
    import argparse

    assert mptcp_lab.parse_path("100:25:0.01") == (100.0, 25.0, 0.01)
    for bad in ("100:25", "a:b:c", "100:25:100", "-1:25:0"):
        with pytest.raises(argparse.ArgumentTypeError):
            mptcp_lab.parse_path(bad)
