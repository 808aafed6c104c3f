"""The spray lab's capture comparison (tests/support/reorder_captures.py) on crafted captures
whose answers are worked out by hand: reordering as TCP got it, how long a segment was held,
GRO merges, and merges that run past an MPTCP mapping."""

from __future__ import annotations

import struct
from pathlib import Path

import dpkt

from tests.support.reorder_captures import (
    dss_mapping,
    hold_delays,
    late_segments,
    mapping_overruns,
    merges,
    read_segments,
    summary,
)

SERVER, CLIENT = b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02"
PORT, CPORT, ISN, MSS = 5201, 40000, 1000, 100


def dss(dsn: int, ssn: int, dlen: int) -> bytes:
    """A DSS option with a 4-byte data ACK and an 8-byte DSN mapping (no checksum)."""
    body = struct.pack("!BBBB", 30, 22, DSS_FLAGS >> 8, DSS_FLAGS & 0xFF)
    return body + struct.pack("!IQIH", 7, dsn, ssn, dlen)


DSS_FLAGS = (2 << 12) | 0x01 | 0x04 | 0x08  # subtype DSS; data ACK, mapping, 8-byte DSN


def frame(seq: int, length: int, flags: int = dpkt.tcp.TH_ACK, opts: bytes = b"",
          sport: int = PORT, dport: int = CPORT) -> bytes:
    pad = (-len(opts)) % 4
    tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq, flags=flags,
                       opts=opts + b"\x01" * pad, data=b"\x00" * length)
    tcp.off = (20 + len(opts) + pad) // 4
    ip = dpkt.ip.IP(src=SERVER, dst=CLIENT, p=dpkt.ip.IP_PROTO_TCP, data=tcp)
    ip.len = 20 + len(bytes(tcp))
    return bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip))


def pcap(path: Path, packets: list[tuple[float, bytes]]) -> Path:
    with path.open("wb") as f:
        writer = dpkt.pcap.Writer(f)
        for t, buf in packets:
            writer.writepkt(buf, ts=t)
    return path


def syn() -> tuple[float, bytes]:
    return 0.0, frame(ISN, 0, dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK)


def seg(k: int, t_ms: float, n: int = 1, opts: bytes = b"") -> tuple[float, bytes]:
    """n segments from segment k on (one packet), at t ms."""
    return t_ms / 1000, frame(ISN + 1 + k * MSS, n * MSS, opts=opts)


def test_late_data_and_repeats_are_told_apart(tmp_path):
    wire = read_segments(pcap(tmp_path / "w.pcap", [syn(), seg(0, 1), seg(2, 2), seg(1, 3),
                                                    seg(3, 4), seg(1, 5)]), PORT)
    assert [s.seq for s in wire] == [0, 200, 100, 300, 100]
    assert late_segments(wire) == {"segments": 5, "late": 1, "repeats": 1}


def test_hold_delay_counts_from_arrival_to_the_packet_tcp_got(tmp_path):
    wire = read_segments(pcap(tmp_path / "w.pcap", [syn(), seg(0, 1), seg(2, 2), seg(1, 3)]),
                         PORT)
    # the receiver held 2 until 1 came, and GRO handed 1 and 2 up as one packet at 3.5 ms
    got = read_segments(pcap(tmp_path / "r.pcap", [syn(), seg(0, 1), seg(1, 3.5, n=2)]), PORT)
    assert sorted(round(d) for d in hold_delays(wire, got)) == [0, 500, 1500]
    assert late_segments(got)["late"] == 0
    assert merges(got, MSS) == {"packets": 2, "merged": 1, "largest": 2 * MSS}
    assert summary([0.0, 500.0, 1500.0])["max"] == 1500.0


def test_a_merge_across_two_mappings_is_an_overrun(tmp_path):
    # subflow bytes 1..100 map to one DSN range: a packet holding bytes 1..200 under that
    # mapping overruns it; bytes 201..400 under a mapping of those 200 bytes do not
    got = read_segments(pcap(tmp_path / "r.pcap", [
        syn(), seg(0, 1, n=2, opts=dss(5000, 1, MSS)),
        seg(2, 2, n=2, opts=dss(9000, 201, 2 * MSS))]), PORT)
    assert got[0].mapping == (5000, 1, MSS)
    assert mapping_overruns(got) == {"mapped": 2, "overruns": 1}


def test_the_dss_parser_reads_a_mapping_after_a_data_ack():
    assert dss_mapping(b"\x01\x01" + dss(2**40, 77, 1400)) == (2**40, 77, 1400)
    assert dss_mapping(b"\x02\x04\x05\xb4") is None  # an MSS option only
