"""The receiver's out-of-order queue rebuilt from captured DSNs (seed 003's Fig. 11 metric),
and the parsing a paths run reads its samples with."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pathdiv.analysis.metrics.reorder_queue import (
    Segment,
    dss_mapping,
    mean_queue,
    queue_series,
    sampled,
    segments_from_pcap,
)
from pathdiv.experiments.manifest import parse_netstat
from pathdiv.experiments.traffic.paths_run import (
    copied_share,
    parse_ss,
    parse_ss_state,
    rates,
)

A = ("10.0.0.2", 5301, "10.1.1.2", 40000)
B = ("10.0.0.2", 5301, "10.2.1.2", 40001)


def seg(ts: float, dsn: int, flow=A, length: int = 100) -> Segment:
    return Segment(ts, dsn, length, flow)


def test_in_order_arrivals_hold_nothing():
    series = queue_series([seg(0.1 * k, 1000 + 100 * k) for k in range(10)])
    assert [q for _, q in series] == [0] * 10
    assert mean_queue(series) == 0


def test_a_late_segment_holds_those_after_it_until_it_arrives():
    # DSN 1100 travels the slow path: 1200, 1300, 1400 wait for it
    arrivals = [seg(0.0, 1000), seg(0.1, 1200, B), seg(0.2, 1300, B), seg(0.3, 1400, B),
                seg(0.4, 1100), seg(0.5, 1500)]
    assert [q for _, q in queue_series(arrivals)] == [0, 1, 2, 3, 0, 0]
    # held 1 for 0.1 s, 2 for 0.1 s, 3 for 0.1 s, then 0 for 0.1 s: mean 0.6/0.5
    assert mean_queue(queue_series(arrivals)) == pytest.approx(1.2)
    assert sampled(queue_series(arrivals), 0.2) == [(0.0, 0), (0.2, 2), (0.4, 0)]


def test_a_copy_of_delivered_data_changes_nothing():
    arrivals = [seg(0.0, 1000), seg(0.1, 1100), seg(0.2, 1000, B), seg(0.3, 1200)]
    assert [q for _, q in queue_series(arrivals)] == [0, 0, 0, 0]
    assert copied_share([s.dsn for s in arrivals]) == pytest.approx(0.25)


def test_dss_mapping_reads_a_64_bit_dsn_after_a_data_ack():
    # kind 30, length 22, subtype 2 << 4, flags: A (1) | M (4) | m (8); 4-byte data ACK
    body = bytes([30, 22, 0x20, 0x0D]) + struct.pack("!I", 7) + struct.pack("!Q", 2**40 + 5)
    body += struct.pack("!IH", 1, 1400)
    assert dss_mapping(bytes([1, 1]) + body) == (2**40 + 5, 1, 1400)
    assert dss_mapping(bytes([30, 8, 0x20, 0x01, 0, 0, 0, 7])) is None  # ACK only


def _frame(src: str, dst: str, sport: int, dport: int, seq: int, flags: int,
           opts: bytes, payload: int) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, (20 + len(opts)) // 4 << 4,
                      flags, 65535, 0, 0) + opts
    total = 20 + len(tcp) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0, 64, 6, 0,
                     bytes(int(x) for x in src.split(".")), bytes(int(x) for x in dst.split(".")))
    return b"\x00" * 12 + b"\x08\x00" + ip + tcp  # payload not captured (snaplen)


def test_segments_from_a_pcap_carry_their_dsn(tmp_path: Path):
    frames = [_frame("10.0.0.2", "10.1.1.2", 5301, 40000, 500, 0x12, b"", 0)]
    dss = bytes([30, 16, 0x20, 0x04]) + struct.pack("!IIH", 9000, 1, 2800) + b"\x00\x00"
    frames.append(_frame("10.0.0.2", "10.1.1.2", 5301, 40000, 501, 0x10, dss, 1400))
    frames.append(_frame("10.0.0.2", "10.1.1.2", 5301, 40000, 1901, 0x10, b"", 1400))
    frames.append(_frame("10.1.1.2", "10.0.0.2", 40000, 5301, 1, 0x10, b"", 0))
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 160, 1)
    for k, f in enumerate(frames):
        out += struct.pack("<IIII", 100, 1000 * k, len(f), len(f)) + f
    pcap = tmp_path / "c.pcap"
    pcap.write_bytes(out)
    segs = segments_from_pcap(pcap, 5301)
    assert [(s.dsn, s.length) for s in segs] == [(9000, 1400), (10400, 1400)]
    assert segs[0].subflow == ("10.0.0.2", 5301, "10.1.1.2", 40000)


def test_ss_netstat_and_rates_parsing():
    ss = ("ESTAB 0      0      10.0.0.2:5301 10.1.1.2:40000\n"
          "\t cubic wscale:7,7 rto:204 bytes_sent:300 bytes_acked:250 segs_out:3\n"
          "0      0      10.0.0.2:5301 10.2.1.2:40001\n"
          "\t bbr bytes_acked:1000\n")
    assert parse_ss(ss) == {("10.0.0.2", "10.1.1.2"): 250, ("10.0.0.2", "10.2.1.2"): 1000}
    detail = ("0 0 10.0.0.2:5301 10.2.1.2:40001\n\t bbr rtt:121.5/30.2 bytes_acked:9 "
              "pacing_rate 12.4Mbps delivery_rate 3Mbps unacked:37 retrans:0/12 "
              "notsent:43440\n")
    assert parse_ss_state(detail)[("10.0.0.2", "10.2.1.2")] == {
        "bytes_acked": 9.0, "rtt_ms": 121.5, "unacked_pkts": 37.0, "notsent_bytes": 43440.0,
        "pacing_mbps": 12.4}
    assert parse_ss_state(ss)[("10.0.0.2", "10.1.1.2")]["rtt_ms"] == 0.0  # not printed
    netstat = "TcpExt: A B\nTcpExt: 1 2\nMPTcpExt: MPJoinAckRx ArpRedundant\nMPTcpExt: 1 3\n"
    assert parse_netstat(netstat, "MPTcpExt") == {"MPJoinAckRx": 1, "ArpRedundant": 3}
    series = rates([(0.0, {"path1": 0}), (0.5, {"path1": 625_000, "path2": 0})])
    assert series == {"path1": [[0.5, 10.0]], "path2": [[0.5, 0.0]]}
