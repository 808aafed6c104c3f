"""The crafted peer's packets in tests/support/datafin_replay.py (the DATA_FIN replay of
tests/integration/test_uml_datafin.py): checksums, option layout, parsing back. The
keys' tokens, IDSNs and the MP_JOIN HMACs are checked by the lab kernel itself in the
replay (the peer verifies the kernel's HMAC; the kernel, the peer's)."""

from __future__ import annotations

import struct

from tests.support import datafin_replay as replay


def test_segment_checksums_verify():
    packet = replay.tcp_segment("10.79.0.2", "10.79.0.1", 40001, 5301, 0xFFFFFFF0, 7,
                                replay.ACK | replay.PSH, replay.dss(5, 9, 1, 3, True), b"abc")
    assert replay.checksum(packet[:20]) == 0
    tcp = packet[20:]
    pseudo = packet[12:20] + struct.pack("!BBH", 0, 6, len(tcp))
    assert replay.checksum(pseudo + tcp) == 0


def test_dss_with_data_fin_layout_and_parse_back():
    opt = replay.dss(data_ack=2**40 + 1, dsn=2**63 + 5, ssn=1, length=2153, data_fin=True)
    # kind, length, subtype 2, flags F|m|M|a|A; 64-bit data ACK, DSN; SSN; data-level length
    assert opt[:4] == bytes([30, 26, 0x20, 0x1F])
    assert struct.unpack("!QQIH", opt[4:]) == (2**40 + 1, 2**63 + 5, 1, 2153)
    packet = replay.tcp_segment("10.79.0.1", "10.79.0.2", 5301, 40002, 100, 200,
                                replay.ACK, opt, b"x" * 10)
    seg = replay.parse_segment(packet, at=1.5)
    assert (seg.sport, seg.dport, seg.seq, seg.ack, seg.flags, seg.length) == \
        (5301, 40002, 100, 200, replay.ACK, 10)
    assert seg.mptcp == [opt]
    assert replay.data_ack_of(seg.mptcp) == 2**40 + 1


def test_bare_data_fin_and_handshake_options():
    bare = replay.dss(data_ack=1, dsn=1000, ssn=0, length=1, data_fin=True)
    assert struct.unpack("!QIH", bare[12:]) == (1000, 0, 1)
    assert replay.mp_capable() == bytes([30, 4, 0x01, 0x01])  # v1, HMAC-SHA256, no csum
    assert len(replay.mp_capable([b"k" * 8, b"K" * 8])) == 20
    assert replay.mp_join_syn(b"tokn", b"nonc")[:4] == bytes([30, 12, 0x10, 1])
    assert len(replay.mp_join_ack(bytes(32))) == 24
    # a 32-bit data ACK reads as its 32 bits
    assert replay.data_ack_of([bytes([30, 8, 0x20, 0x01]) + struct.pack("!I", 77)]) == 77
