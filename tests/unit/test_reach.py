"""The reachability check's echoes (experiments/fabric/reach.py)."""

from __future__ import annotations

import itertools
import os
import random
import socket
import struct

import pytest

from pathdiv.experiments.fabric import reach
from pathdiv.experiments.fabric.reach import (
    Echoes,
    across,
    check_reach,
    checksum,
    crossed,
    directions,
    echo_request,
    echo_rounds,
    parse_reply,
)
from pathdiv.topologies.fattree import FatTree


@pytest.mark.parametrize("k", [2, 4, 8, 16])
def test_the_echoes_grow_with_the_links_not_the_host_pairs(k):
    topo = FatTree(k)
    plan = echo_rounds(topo)
    pairs = [p for rnd in plan for p in rnd]
    n = len(topo.hosts)
    assert len(pairs) == n * (k + 1 if k > 2 else 1)  # k + 1 per host (k=16: 17,408)
    assert len(pairs) < n * (n - 1) or k == 2
    assert all(src != dst for src, dst in pairs)
    for rnd in plan:  # nobody sends or receives two echoes in one round
        assert sorted(s for s, _ in rnd) == sorted(topo.hosts)
        assert sorted(d for _, d in rnd) == sorted(topo.hosts)


def test_every_host_meets_each_class_of_path_and_every_pod_and_index():
    topo = FatTree(8)
    pairs = [p for rnd in echo_rounds(topo) for p in rnd]
    node = topo.nodes
    for host in topo.hosts:
        mine = [d for s, d in pairs if s == host]
        assert any(topo.edge_of(d) == topo.edge_of(host) for d in mine)  # edge class
        assert any(node[d].pod == node[host].pod and topo.edge_of(d) != topo.edge_of(host)
                   for d in mine)  # pod class
        assert {node[d].pod for d in mine} == set(range(8))  # core: every other pod
    for edge in topo.edges:  # static mode: every destination index from every edge
        sent = {node[d].index for s, d in pairs if topo.edge_of(s) == edge
                and node[d].pod != node[edge].pod}
        assert sent == set(range(4))


def _hashed_paths(topo, pairs, rng):
    """Counters as if every echo (request and reply) took a random equal-cost path."""
    counts = {s: {lk.b.intf: [0, 0] for lk in topo.links_of(s) if lk.b.node == s}
              for s in topo.switches}
    for src, dst in pairs:
        for path in (rng.choice(topo.paths(src, dst)), rng.choice(topo.paths(dst, src))):
            for u, v in itertools.pairwise(path):
                lk = topo.link_between(u, v)
                counts[lk.b.node][lk.b.intf][0 if v == lk.b.node else 1] += 1
    return {s: {i: tuple(c) for i, c in m.items()} for s, m in counts.items()}


def test_crossed_reads_each_direction_at_the_links_upper_end():
    topo = FatTree(4)
    zero = {s: {lk.b.intf: (0, 0) for lk in topo.links_of(s) if lk.b.node == s}
            for s in topo.switches}
    after = {s: dict(m) for s, m in zero.items()}
    after["e1"]["e1-eth0"] = (1, 0)  # h1 -> e1 only
    after["c1"]["c1-eth2"] = (0, 3)  # c1 -> the aggregation switch of pod 2 only
    agg = topo.link_of_intf("c1-eth2").a.node
    assert crossed(topo, zero, after) == {("h1", "e1"), ("c1", agg)}
    assert len(directions(topo)) == 2 * len(topo.links)


@pytest.mark.parametrize("k", [4, 8])
def test_aimed_pairs_can_cross_the_link_they_are_aimed_at(k):
    topo = FatTree(k)
    rng = random.Random(1)
    for direction in directions(topo):
        lk = topo.link_between(*direction)
        for _ in range(3):
            src, dst = across(topo, direction, rng)
            assert src != dst
            on = [p for p in topo.paths(src, dst)
                  if any({u, v} == {lk.a.node, lk.b.node} for u, v in itertools.pairwise(p))]
            assert on, (direction, src, dst)


def test_the_scheduled_echoes_cross_nearly_every_link_and_top_ups_find_the_rest():
    """With random equal-cost paths (what hashing looks like to the check) the k + 1
    echoes per host leave few link directions uncrossed, and aimed echoes find them."""
    topo = FatTree(8)
    rng = random.Random(7)
    pairs = [p for rnd in echo_rounds(topo) for p in rnd]
    zero = _hashed_paths(topo, [], rng)
    hit = crossed(topo, zero, _hashed_paths(topo, pairs, rng))
    left = [d for d in directions(topo) if d not in hit]
    assert len(left) < 0.05 * len(directions(topo))
    left = directions(topo)  # aimed echoes alone, from nothing crossed, cover them all
    for _ in range(reach.TOPUP_ROUNDS):
        aimed = [across(topo, d, rng) for d in left for _ in range(reach.TOPUP_ECHOES)]
        hit = crossed(topo, zero, _hashed_paths(topo, aimed, rng))
        left = [d for d in left if d not in hit]
    assert left == []


class FakeEchoes(Echoes):
    """Echoes without sockets: each pair answers unless its destination is `silent`;
    the counters follow random equal-cost paths, without `dead` link directions."""

    def __init__(self, topo, silent=(), dead=()):
        self.topo, self.silent, self.dead = topo, set(silent), set(dead)
        self.sent, self.rng = 0, random.Random(3)
        self.counts = {s: {lk.b.intf: [0, 0] for lk in topo.links_of(s) if lk.b.node == s}
                       for s in topo.switches}

    def close(self):
        pass

    def ask(self, pairs):
        self.sent += len(pairs)
        for src, dst in pairs:
            for path in (self.rng.choice(self.topo.paths(src, dst)),
                         self.rng.choice(self.topo.paths(dst, src))):
                for u, v in itertools.pairwise(path):
                    if (u, v) in self.dead:
                        continue
                    lk = self.topo.link_between(u, v)
                    self.counts[lk.b.node][lk.b.intf][0 if v == lk.b.node else 1] += 1
        return sorted(p for p in pairs if p[1] in self.silent)

    def read(self):
        return {s: {i: tuple(c) for i, c in m.items()} for s, m in self.counts.items()}


@pytest.mark.parametrize(("silent", "dead", "expect"), [
    ((), (), []),
    (("h5",), (), ["host pair(s) got no echo reply"]),
    ((), (("c1", "a3"),), ["1 link direction(s) carried no answered echo", "c1->a3"]),
])
def test_the_check_fails_on_a_silent_host_or_a_link_no_echo_crossed(
        monkeypatch, silent, dead, expect):
    topo = FatTree(4)
    fake = FakeEchoes(topo, silent, dead)
    monkeypatch.setattr(reach, "Echoes", lambda *a, **kw: fake)
    report = check_reach(topo, {}, {}, fake.read)
    text = " ".join(report.problems())
    assert all(e in text for e in expect) and bool(expect) == bool(text)
    assert report.echoes == fake.sent
    if not expect:
        assert report.echoes < len(topo.hosts) * (len(topo.hosts) - 1)


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
def test_echoes_answer_on_the_loopback_and_a_silent_host_is_named(monkeypatch):
    me = os.getpid()
    echoes = Echoes({"a": me, "b": me}, {"a": "127.0.0.1", "b": "127.0.0.2"}, 1.0)
    try:
        assert echoes.ask([("a", "b"), ("b", "a")]) == []
    finally:
        echoes.close()

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
    echoes = Echoes({"a": me, "b": me, "c": me},
                    {"a": "127.0.0.1", "b": "127.0.0.2", "c": "127.0.0.3"}, 0.05)
    try:
        assert echoes.ask([("a", "c"), ("b", "c"), ("a", "b")]) == [("a", "c"), ("b", "c")]
        assert echoes.sent == 3 + 2 * reach.RETRIES  # each retry a new sequence number
    finally:
        echoes.close()
