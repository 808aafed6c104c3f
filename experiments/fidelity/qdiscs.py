"""The links' queues as the fidelity monitor reads them: a root qdisc's counters
(`QdiscStat`), read in a node's namespace over rtnetlink (`NetlinkQdiscs`) or from
`tc -j` (`TcQdiscs`), and an egress's samples turned into how long it was backlogged
against its rate (`EgressTrack` -> `LinkShare`, judged in verdict.py)."""

from __future__ import annotations

import json
import struct
import subprocess
from dataclasses import dataclass

from pathdiv.experiments.fabric.rtnl import (
    RTM_GETQDISC,
    RTM_NEWQDISC,
    TC_H_ROOT,
    TCMSG,
    RouteSocket,
    attributes,
    messages,
)
from pathdiv.experiments.fidelity.verdict import LinkShare


@dataclass(frozen=True)
class QdiscStat:
    """A root qdisc's counters at one instant."""

    bytes: int
    packets: int
    drops: int
    overlimits: int
    backlog: int
    qlen: int


def parse_tc_json(text: str) -> dict[str, QdiscStat]:
    """`tc -s -j qdisc show` -> interface -> its root qdisc's counters."""
    out: dict[str, QdiscStat] = {}
    for q in json.loads(text or "[]"):
        if q.get("root") and "dev" in q:
            out[q["dev"]] = QdiscStat(int(q.get("bytes", 0)), int(q.get("packets", 0)),
                                      int(q.get("drops", 0)), int(q.get("overlimits", 0)),
                                      int(q.get("backlog", 0)), int(q.get("qlen", 0)))
    return out


# a root qdisc's counters in its rtnetlink message (fabric/rtnl.py; gen_stats.h)
TCA_STATS2 = 7
TCA_STATS_BASIC, TCA_STATS_QUEUE = 1, 3


def root_qdisc_stats(msgs: list[tuple[int, bytes]]) -> dict[int, QdiscStat]:
    """Messages of a qdisc dump -> ifindex -> its root qdisc's counters."""
    out: dict[int, QdiscStat] = {}
    for kind, body in msgs:
        if kind != RTM_NEWQDISC:
            continue
        _, _, _, ifindex, _, parent, _ = TCMSG.unpack_from(body, 0)
        attrs = attributes(body, TCMSG.size, len(body))
        if parent == TC_H_ROOT and TCA_STATS2 in attrs:
            st = attrs[TCA_STATS2]
            nested = attributes(st, 0, len(st))
            nbytes, packets = struct.unpack_from("=QI", nested.get(TCA_STATS_BASIC, bytes(12)))
            qlen, backlog, drops, _, overlimits = struct.unpack_from(
                "=IIIII", nested.get(TCA_STATS_QUEUE, bytes(20)))
            out[ifindex] = QdiscStat(nbytes, packets, drops, overlimits, backlog, qlen)
    return out


def parse_qdisc_dump(buf: bytes) -> tuple[dict[int, QdiscStat], bool]:
    """One netlink datagram of a qdisc dump -> (ifindex -> root qdisc counters, done)."""
    msgs, done = messages(buf)
    return root_qdisc_stats(msgs), done


# What a working HTB egress may fall short of min(queued, rate x interval) by: one frame
# it may still owe tokens for at the interval's start, one in flight at its end.
SLACK_BYTES = 2 * 1514


@dataclass
class EgressTrack:
    """Accumulates one egress's samples into the time it surely had something to send and
    what it sent then.

    HTB is work-conserving up to its rate R: holding B bytes at one sample, it sends until
    they are out, so over the next T seconds a working egress sends at least
    cap = min(B, R*T) - SLACK_BYTES, whatever arrives meanwhile. Each interval adds cap/R
    seconds and min(sent, cap) bytes; their ratio (`LinkShare.ratio`) is the share of its
    rate the egress achieved while it was certainly backlogged, 1 for a working one.
    A queue that forms and drains between two samples (an egress fed in bursts faster
    than its rate but limited further on, not a bottleneck) adds only what it held, which
    it also sent: no false alarm. Until 2026-11 an interval counted whole when the queue
    was non-empty at both ends, which judged such egresses at 0.40-0.8 of their rate
    (seed 004's real-clock MPTCP runs, docs/fidelity.md). The sensitivity is bounded by
    the queue: a slow egress is seen only where it held more than it can send in one
    interval, hence short intervals on the real clock."""

    rate_bps: float | None = None
    first: QdiscStat | None = None
    last: QdiscStat | None = None
    last_t: float = 0.0
    backlogged_s: float = 0.0
    backlogged_bytes: float = 0.0

    def add(self, t: float, stat: QdiscStat) -> None:
        last = self.last
        if last is not None and self.rate_bps and stat.bytes >= last.bytes \
                and last.qlen > 0 and t > self.last_t:
            rate = self.rate_bps / 8  # bytes per second
            cap = min(last.backlog, rate * (t - self.last_t)) - SLACK_BYTES
            if cap > 0:
                self.backlogged_s += cap / rate
                self.backlogged_bytes += min(stat.bytes - last.bytes, cap)
        if self.first is None:
            self.first = stat
        self.last, self.last_t = stat, t

    def share(self, name: str, rate_bps: float | None) -> LinkShare:
        first, last = self.first, self.last
        drops = 0 if first is None or last is None else max(0, last.drops - first.drops)
        over = 0 if first is None or last is None else max(0, last.overlimits - first.overlimits)
        return LinkShare(name, rate_bps, round(self.backlogged_bytes),
                         round(self.backlogged_s, 4), drops, over)

    @property
    def sent(self) -> int:
        return 0 if self.first is None or self.last is None else self.last.bytes - self.first.bytes


# ---- reading the system ----------------------------------------------------------------
class NetlinkQdiscs:
    """One rtnetlink socket inside a node's network namespace (call from one thread)."""

    def __init__(self, pid: int) -> None:
        self.rtnl = RouteSocket(pid)

    def read(self) -> dict[str, QdiscStat]:
        stats = root_qdisc_stats(self.rtnl.dump(RTM_GETQDISC))
        return {self.rtnl.names.get(i, str(i)): s for i, s in stats.items()}

    def close(self) -> None:
        self.rtnl.close()


class TcQdiscs:
    """Fallback: one `tc -s -j qdisc show` in the node's namespace per sample."""

    def __init__(self, pid: int) -> None:
        self.argv = ["nsenter", "-t", str(pid), "-n", "tc", "-s", "-j", "qdisc", "show"]

    def read(self) -> dict[str, QdiscStat]:
        done = subprocess.run(self.argv, capture_output=True, text=True, timeout=10)
        return parse_tc_json(done.stdout) if done.returncode == 0 else {}

    def close(self) -> None:
        pass
