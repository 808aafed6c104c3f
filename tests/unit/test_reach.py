"""The reachability check's echoes (experiments/fabric/reach.py)."""

from __future__ import annotations

import os
import socket
import struct

import pytest

from pathdiv.experiments.fabric import reach
from pathdiv.experiments.fabric.reach import (
    checksum,
    echo_request,
    parse_reply,
    ping_pairs,
    rounds,
)


def test_rounds_cover_every_ordered_pair_once_with_one_request_per_host_each():
    hosts = [f"h{i}" for i in range(1, 17)]
    plan = rounds(hosts)
    assert len(plan) == 15
    pairs = [p for rnd in plan for p in rnd]
    assert len(pairs) == len(set(pairs)) == 16 * 15
    assert all(src != dst for src, dst in pairs)
    for rnd in plan:  # nobody sends or receives two echoes in one round
        assert sorted(s for s, _ in rnd) == sorted(hosts)
        assert sorted(d for _, d in rnd) == sorted(hosts)


def test_an_echo_request_carries_a_valid_checksum():
    packet = echo_request(0x1234, 7)
    assert packet[0] == 8 and struct.unpack_from("!HH", packet, 4) == (0x1234, 7)
    assert checksum(packet) == 0  # a correct checksum sums to zero
    assert checksum(b"\x00\x01\xf2\x03\xf4\xf5\xf6\xf7") == 0x220D  # RFC 1071's example


def _ipv4(src: str, icmp: bytes) -> bytes:
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), 0, 0, 64, 1, 0,
                       socket.inet_aton(src), socket.inet_aton("10.0.0.2")) + icmp


def test_only_echo_replies_are_read_back():
    reply = bytes([0]) + echo_request(77, 9)[1:]  # type 0: the same message answered
    assert parse_reply(_ipv4("10.3.0.2", reply)) == ("10.3.0.2", 77, 9)
    assert parse_reply(_ipv4("10.3.0.2", echo_request(77, 9))) is None  # a request
    assert parse_reply(b"\x45\x00") is None


@pytest.mark.skipif(os.geteuid() != 0, reason="raw ICMP sockets need root (CAP_NET_RAW)")
def test_pairs_answer_on_the_loopback_and_a_silent_host_is_named(monkeypatch):
    me = os.getpid()
    assert ping_pairs({"a": me, "b": me}, {"a": "127.0.0.1", "b": "127.0.0.2"}, 1.0) == []

    class Lossy(socket.socket):  # every echo towards 127.0.0.3 is lost on the way
        def sendto(self, data, address):  # type: ignore[override]
            return len(data) if address[0] == "127.0.0.3" else super().sendto(data, address)

    real = reach.icmp_socket

    def lossy(pid: int) -> socket.socket:
        sock = real(pid)
        out = Lossy(fileno=sock.detach())
        out.setblocking(False)
        return out

    monkeypatch.setattr(reach, "icmp_socket", lossy)
    failed = ping_pairs({"a": me, "b": me, "c": me},
                        {"a": "127.0.0.1", "b": "127.0.0.2", "c": "127.0.0.3"}, 0.05)
    assert failed == [("a", "c"), ("b", "c")]
