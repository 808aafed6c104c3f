"""Does the fabric forward? ICMP echoes between hosts, sent from the runner, until every
host has answered and every link has carried an answered echo in both directions.

A fresh network is checked before its first run. The check used to send an echo between
every ordered host pair: 240 at k=4, 16,256 at k=8, about a million at k=16. What that
caught is wrong state on a node: a host's address, route or gateway neighbour, a
switch's down route, up group member, static entry or neighbour entry, a link's veth
or qdisc. In a fat tree every such entry is used by the packets of one link in one
direction: a switch's down routes are per port (a host /32 at an edge, an edge /24 at an
aggregation switch, a pod /16 at a core: each core has exactly one link into each pod),
a member of its up group is one uplink, a static entry picks one uplink, and a
neighbour entry is one port's peer. So "every link carried an answered echo both ways"
exercises every entry of every node at least once, and "every host sent and answered"
every host's own state: more than the pairs did (with hashed paths, all pairs need not
cross every link), with k + 1 echoes a host (hosts x k grows as k^4, the pairs as k^6).

The echoes (`echo_rounds`), each round one echo from every host and one to every host,
so no queue sees a burst:
  edge  each host to the next host on its edge (its access link both ways, the edge's
        down route to each host);
  pod   each host to the host of the same index on the next edge of its pod (the edges'
        uplinks, the aggregation switches' routes down to each edge);
  core  for every other pod, each host to a host there, the destination's edge and index
        turning with the pod (the aggregation switches' uplinks, the cores' routes down
        to each pod; every destination index from every edge, for the static table).
That is k + 1 echoes per host (80 at k=4, 1,152 at k=8, 17,408 at k=16). Which links they
crossed is read from the switches' port counters (a link's upper end: received = up,
sent = down; nothing else flows while the check runs). A link not yet crossed in a
direction gets echoes between hosts on either side of it, new sequence numbers each
round (the ECMP hash reads the ICMP header), up to TOPUP_ROUNDS rounds; a link still
not crossed, or a pair that never answered (each asked up to RETRIES more times: a
lossy link may lose an echo), fails the check.

The runner opens one raw ICMP socket in each host's namespace (a thread enters it with
setns(2) just to open the socket) and sends the requests itself: no process per echo.
Pure parts first (`echo_rounds`, `directions`, `crossed`, `across`, `checksum`,
`echo_request`, `parse_reply`); `check_reach` sends and receives.
"""

from __future__ import annotations

import ctypes
import os
import random
import select
import socket
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.model import Role

RETRIES = 5
TOPUP_ROUNDS = 8
TOPUP_ECHOES = 4  # per link direction not yet crossed, per top-up round
ICMP_ECHO_REPLY, ICMP_ECHO_REQUEST = 0, 8
CLONE_NEWNET = 0x40000000

Pair = tuple[str, str]  # (source host, destination host)
Direction = tuple[str, str]  # a link, from one node to the other
Counters = Mapping[str, Mapping[str, tuple[int, int]]]  # switch -> intf -> (rx, tx) packets


def echo_rounds(topo: FatTree) -> list[list[Pair]]:
    """The scheduled echoes, in rounds (module docstring); in each round every host is
    the source of at most one echo and the destination of at most one."""
    h, k = topo.half, topo.k

    def host(pod: int, edge: int, index: int) -> str:
        return f"h{pod * h * h + edge * h + index + 1}"

    where = [(p, e, x) for p in range(k) for e in range(h) for x in range(h)]
    out: list[list[Pair]] = []
    if h > 1:
        out.append([(host(p, e, x), host(p, e, (x + 1) % h)) for p, e, x in where])
        out.append([(host(p, e, x), host(p, (e + 1) % h, x)) for p, e, x in where])
    for turn in range(1, k):
        out.append([(host(p, e, x), host((p + turn) % k, (e + turn) % h, (x + turn) % h))
                    for p, e, x in where])
    return out


def directions(topo: FatTree) -> list[Direction]:
    """Every link of `topo` in both directions, lower end first."""
    return [d for lk in topo.links for d in ((lk.a.node, lk.b.node), (lk.b.node, lk.a.node))]


def crossed(topo: FatTree, before: Counters, after: Counters) -> set[Direction]:
    """The link directions whose packet counters moved between `before` and `after`
    (each read at the link's upper end, a switch: received = up, sent = down)."""
    out: set[Direction] = set()
    for lk in topo.links:
        intf = lk.b.intf
        rx0, tx0 = before.get(lk.b.node, {}).get(intf, (0, 0))
        rx1, tx1 = after.get(lk.b.node, {}).get(intf, (0, 0))
        if rx1 > rx0:
            out.add((lk.a.node, lk.b.node))
        if tx1 > tx0:
            out.add((lk.b.node, lk.a.node))
    return out


def _under(topo: FatTree, node: str) -> list[str]:
    """The hosts whose packets towards the core may pass `node` (all of a pod's for an
    aggregation switch, every host for a core)."""
    n = topo.nodes[node]
    if n.role is Role.HOST:
        return [node]
    if n.role is Role.EDGE:
        return [lk.a.node for lk in topo.downlinks(node)]
    if n.role is Role.AGG:
        return [x for x in topo.hosts if topo.nodes[x].pod == n.pod]
    return list(topo.hosts)


def across(topo: FatTree, direction: Direction, rng: random.Random) -> Pair:
    """A host pair whose echo may cross the link of `direction`, either way: a source
    below the link's lower end and a destination that is not (the request may go up
    the link, the reply down it)."""
    lower = topo.link_between(*direction).a.node
    below = _under(topo, lower)
    mine = set(below)
    src = rng.choice(below)
    return src, rng.choice([x for x in topo.hosts if x not in mine and x != src])


@dataclass
class ReachReport:
    """What a check sent and found."""

    echoes: int = 0
    rounds: int = 0
    topup_rounds: int = 0
    unanswered: list[Pair] = field(default_factory=list)
    uncovered: list[Direction] = field(default_factory=list)
    links: int = 0

    def problems(self) -> list[str]:
        out = []
        if self.unanswered:
            out.append(f"{len(self.unanswered)} host pair(s) got no echo reply after "
                       f"{1 + RETRIES} tries (e.g. {self.unanswered[:3]})")
        if self.uncovered:
            shown = ", ".join(f"{a}->{b}" for a, b in self.uncovered[:5])
            out.append(f"{len(self.uncovered)} link direction(s) carried no answered echo "
                       f"after {self.topup_rounds} more round(s) aimed at them: {shown}")
        return out

    def to_dict(self) -> dict[str, object]:
        return {"echoes": self.echoes, "rounds": self.rounds, "topup_rounds":
                self.topup_rounds, "links": self.links,
                "unanswered": len(self.unanswered), "uncovered": len(self.uncovered)}


def checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of `data`."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def echo_request(ident: int, seq: int, payload: bytes = b"pathdiv-reach") -> bytes:
    """An ICMP echo request (type 8) with its checksum."""
    head = struct.pack("!BBHHH", ICMP_ECHO_REQUEST, 0, 0, ident & 0xFFFF, seq & 0xFFFF)
    total = checksum(head + payload)
    return struct.pack("!BBHHH", ICMP_ECHO_REQUEST, 0, total, ident & 0xFFFF,
                       seq & 0xFFFF) + payload


def parse_reply(packet: bytes) -> tuple[str, int, int] | None:
    """(source address, identifier, sequence) of an IPv4 packet carrying an ICMP echo
    reply (what a raw ICMP socket reads), None for anything else."""
    if len(packet) < 20 or packet[0] >> 4 != 4:
        return None
    start = (packet[0] & 0x0F) * 4
    if len(packet) < start + 8 or packet[start] != ICMP_ECHO_REPLY:
        return None
    ident, seq = struct.unpack_from("!HH", packet, start + 4)
    return socket.inet_ntoa(packet[12:16]), ident, seq


# ---- side effects ----------------------------------------------------------------------
def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def icmp_socket(pid: int) -> socket.socket:
    """A raw ICMP socket in the network namespace of process `pid` (this thread enters
    the namespace to open it and returns; the socket stays in that namespace)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        _setns(target)
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        finally:
            _setns(own)
    finally:
        os.close(own)
        os.close(target)
    sock.setblocking(False)
    return sock


class Echoes:
    """Raw ICMP sockets in the hosts' namespaces, and echoes sent in rounds through them.
    Every echo gets a sequence number of its own (an identifier per 65,536), so the same
    pair asked again takes another hash, and a late reply is never taken for a new one."""

    def __init__(self, pids: Mapping[str, int], addresses: Mapping[str, str],
                 timeout_s: float) -> None:
        self.addresses, self.timeout_s = addresses, timeout_s
        self.owner = {addresses[h]: h for h in pids}
        self.socks = {h: icmp_socket(pids[h]) for h in sorted(pids)}
        self.by_fd = {s.fileno(): h for h, s in self.socks.items()}
        self.poller = select.poll()
        for s in self.socks.values():
            self.poller.register(s, select.POLLIN)
        self.base = os.getpid() & 0xFFFF
        self.sent = 0

    def close(self) -> None:
        for s in self.socks.values():
            s.close()

    def ask(self, pairs: list[Pair]) -> list[Pair]:
        """One echo per pair, all at once, each pair asked again up to RETRIES times
        when it got no reply; the pairs that never answered."""
        missing = pairs
        for _ in range(1 + RETRIES):
            waiting: dict[tuple[int, int], Pair] = {}
            for src, dst in missing:
                ident, seq = (self.base + self.sent // 0x10000) & 0xFFFF, self.sent & 0xFFFF
                self.sent += 1
                waiting[(ident, seq)] = (src, dst)
                self.socks[src].sendto(echo_request(ident, seq), (self.addresses[dst], 0))
            missing = self._collect(waiting)
            if not missing:
                return []
        return sorted(missing)

    def _collect(self, waiting: dict[tuple[int, int], Pair]) -> list[Pair]:
        deadline = time.monotonic() + self.timeout_s
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for fd, _ in self.poller.poll(left * 1000):
                src = self.by_fd[fd]
                while True:
                    try:
                        packet = self.socks[src].recv(2048)
                    except BlockingIOError:
                        break
                    reply = parse_reply(packet)
                    if reply is None or reply[0] not in self.owner:
                        continue
                    pair = waiting.get((reply[1], reply[2]))
                    if pair == (src, self.owner[reply[0]]):
                        del waiting[(reply[1], reply[2])]
        return sorted(waiting.values())


def check_reach(topo: FatTree, pids: Mapping[str, int], addresses: Mapping[str, str],
                counters: Callable[[], Counters], timeout_s: float = 2.0,
                seed: int = 0) -> ReachReport:
    """Send the scheduled echoes, then echoes aimed at the link directions no answered
    echo crossed yet; what was sent and what failed (`ReachReport.problems`)."""
    report = ReachReport(links=len(topo.links))
    echoes = Echoes(pids, addresses, timeout_s)
    rng = random.Random(f"pathdiv-reach|{seed}")
    try:
        start = counters()
        for batch in echo_rounds(topo):
            report.unanswered += echoes.ask(batch)
            report.rounds += 1
        if report.unanswered:  # a broken entry: no need to look for the links it left
            report.echoes = echoes.sent
            return report
        done = crossed(topo, start, counters())
        left = [d for d in directions(topo) if d not in done]
        while left and report.topup_rounds < TOPUP_ROUNDS:
            report.topup_rounds += 1
            aimed = [across(topo, d, rng) for d in left for _ in range(TOPUP_ECHOES)]
            report.unanswered += echoes.ask(aimed)
            if report.unanswered:
                break
            done = crossed(topo, start, counters())
            left = [d for d in left if d not in done]
        report.uncovered = left
        report.echoes = echoes.sent
        return report
    finally:
        echoes.close()
