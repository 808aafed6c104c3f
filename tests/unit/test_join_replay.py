"""The crafted server's packets in tests/support/join_replay.py (the MP_JOIN replay of
tests/integration/test_uml_join.py): the SYN/ACK's MP_JOIN and reading the kernel's
reset reason back. The HMACs are checked by the lab kernel itself in the replay."""

from __future__ import annotations

from tests.support import join_replay as replay
from tests.support.datafin_replay import parse_segment


def test_join_synack_layout():
    opt = replay.mp_join_synack(bytes(range(20)), b"\xaa\xbb\xcc\xdd", addr_id=3)
    # kind, length 16, subtype 1 (no backup flag), address id, truncated HMAC, nonce
    assert opt == bytes([30, 16, 0x10, 3]) + bytes(range(8)) + b"\xaa\xbb\xcc\xdd"


def test_a_reset_reason_is_read_from_the_kernels_mp_tcprst():
    rst = bytes([30, 4, replay.MP_TCPRST_SUB << 4, 0])  # MP_TCPRST, reason 0 (unspecified)
    packet = replay.tcp_segment(replay.JOIN_ADDR, replay.PEER_ADDR, 40541, replay.PORT, 1, 1,
                                replay.RST | replay.ACK, rst)
    seg = parse_segment(packet, at=0.0)
    assert replay.suboption(seg, replay.MP_TCPRST_SUB) == rst
    assert replay.suboption(seg, replay.MP_JOIN_SUB) is None
    assert seg.src == replay.JOIN_ADDR
