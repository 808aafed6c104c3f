"""Sample the host while a run's traffic flows, cheaply: no per-packet work, no process
per link.

- CPU per core from `/proc/stat` (busy, softirq, steal), at start and stop;
- every node's root qdiscs (bytes, drops, overlimits, queue length) every
  `interval_s`, through one netlink socket per network namespace, opened once by the
  sampler thread (it enters each namespace with setns(2) just to open the socket);
  where that fails, one `tc -s -j qdisc show` per namespace per sample;
- TCP retransmission timeouts (TcpExt TCPTimeouts) per host from
  `/proc/<host pid>/net/netstat`, and the kernel input-backlog drops from
  `/proc/net/softnet_stat`, at start and stop; from the same file the subflow windows
  mptcp-d's extra subflow elimination closed (MPTcpExt MptcpDClosed, lab kernel patch
  0015; absent elsewhere); each host's CPU time (`fabric/cpuacct.py`: a cgroup per
  host), at start and stop.

An egress is backlogged over a sample interval when its queue held packets at both
ends of it; the bytes it sent over such intervals, against their length, give its
achieved rate while it had something to send (`experiments.fidelity.verdict`).
Parsers are pure; `Monitor` does the reading. The sampler's own CPU time is recorded.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import json
import logging
import os
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pathdiv.experiments.fabric.cpuacct import cpu_seconds
from pathdiv.experiments.fidelity.verdict import CoreShare, LinkShare, Samples

log = logging.getLogger("pathdiv")

CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


# ---- pure parsers ----------------------------------------------------------------------
def parse_proc_stat(text: str) -> dict[str, tuple[int, ...]]:
    """/proc/stat -> per core ('cpu0', ...) its first eight time counters (ticks)."""
    out: dict[str, tuple[int, ...]] = {}
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0].startswith("cpu") and parts[0] != "cpu":
            values = [int(v) for v in parts[1:9]]
            out[parts[0]] = tuple(values + [0] * (8 - len(values)))
    return out


def core_shares(before: Mapping[str, tuple[int, ...]],
                after: Mapping[str, tuple[int, ...]]) -> list[CoreShare]:
    """Per core present in both: busy, softirq and steal as fractions of elapsed ticks."""
    out = []
    for core in sorted(before, key=lambda c: int(c[3:]) if c[3:].isdigit() else 0):
        if core not in after:
            continue
        d = dict(zip(CPU_FIELDS, (a - b for a, b in zip(after[core], before[core],
                                                           strict=True)), strict=True))
        total = sum(d.values())
        if total <= 0:
            continue
        busy = d["user"] + d["nice"] + d["system"] + d["irq"] + d["softirq"]
        out.append(CoreShare(core, busy / total, d["softirq"] / total, d["steal"] / total))
    return out


def parse_netstat(text: str, section: str = "TcpExt") -> dict[str, int]:
    """/proc/net/netstat (name line, value line per section) -> {field: value}."""
    lines = text.splitlines()
    for names, values in itertools.pairwise(lines):
        if names.startswith(section + ":") and values.startswith(section + ":"):
            keys, vals = names.split()[1:], values.split()[1:]
            return {k: int(v) for k, v in zip(keys, vals, strict=False)}
    return {}


def parse_softnet_drops(text: str) -> int:
    """/proc/net/softnet_stat: the second column (hex) of each CPU's line is the number of
    packets dropped because that CPU's input backlog was full."""
    return sum(int(line.split()[1], 16) for line in text.splitlines() if len(line.split()) > 1)


def parse_pressure(text: str) -> int | None:
    """/proc/pressure/cpu -> the 'some' line's total: microseconds in which at least one
    runnable task waited for a CPU (None where the kernel has no PSI)."""
    for line in text.splitlines():
        if line.startswith("some "):
            for item in line.split()[1:]:
                key, _, value = item.partition("=")
                if key == "total":
                    return int(value)
    return None


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


# netlink (rtnetlink qdisc dump), see linux/rtnetlink.h, pkt_sched.h, gen_stats.h
NLMSG_ERROR, NLMSG_DONE = 2, 3
RTM_NEWQDISC, RTM_GETQDISC = 36, 38
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
TCA_STATS2 = 7
TCA_STATS_BASIC, TCA_STATS_QUEUE = 1, 3
TC_H_ROOT = 0xFFFFFFFF
NLMSG_HDR = struct.Struct("=IHHII")
TCMSG = struct.Struct("=BBHiIII")
RTATTR = struct.Struct("=HH")


def _align(n: int) -> int:
    return (n + 3) & ~3


def _attrs(buf: bytes, start: int, end: int) -> dict[int, bytes]:
    out = {}
    while start + RTATTR.size <= end:
        length, kind = RTATTR.unpack_from(buf, start)
        if length < RTATTR.size:
            break
        out[kind & 0x3FFF] = buf[start + RTATTR.size:start + length]
        start += _align(length)
    return out


def qdisc_dump_request(seq: int) -> bytes:
    body = TCMSG.pack(0, 0, 0, 0, 0, 0, 0)
    return NLMSG_HDR.pack(NLMSG_HDR.size + len(body), RTM_GETQDISC,
                          NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body


def parse_qdisc_dump(buf: bytes) -> tuple[dict[int, QdiscStat], bool]:
    """One netlink datagram of a qdisc dump -> (ifindex -> root qdisc counters, done)."""
    out: dict[int, QdiscStat] = {}
    off = 0
    while off + NLMSG_HDR.size <= len(buf):
        length, kind, _, _, _ = NLMSG_HDR.unpack_from(buf, off)
        if length < NLMSG_HDR.size:
            break
        if kind == NLMSG_DONE:
            return out, True
        if kind == NLMSG_ERROR:
            err = -struct.unpack_from("=i", buf, off + NLMSG_HDR.size)[0]
            raise OSError(err, f"qdisc dump: {os.strerror(err)}")
        if kind == RTM_NEWQDISC:
            _, _, _, ifindex, _, parent, _ = TCMSG.unpack_from(buf, off + NLMSG_HDR.size)
            attrs = _attrs(buf, off + NLMSG_HDR.size + TCMSG.size, off + length)
            if parent == TC_H_ROOT and TCA_STATS2 in attrs:
                st = attrs[TCA_STATS2]
                nested = _attrs(st, 0, len(st))
                nbytes, packets = struct.unpack_from("=QI", nested.get(TCA_STATS_BASIC,
                                                                       bytes(12)))
                qlen, backlog, drops, _, overlimits = struct.unpack_from(
                    "=IIIII", nested.get(TCA_STATS_QUEUE, bytes(20)))
                out[ifindex] = QdiscStat(nbytes, packets, drops, overlimits, backlog, qlen)
        off += _align(length)
    return out, False


@dataclass
class EgressTrack:
    """Accumulates one egress's samples into backlogged time and bytes."""

    first: QdiscStat | None = None
    last: QdiscStat | None = None
    last_t: float = 0.0
    backlogged_s: float = 0.0
    backlogged_bytes: int = 0

    def add(self, t: float, stat: QdiscStat) -> None:
        if self.last is not None and self.last.qlen > 0 and stat.qlen > 0 \
                and stat.bytes >= self.last.bytes:
            self.backlogged_s += t - self.last_t
            self.backlogged_bytes += stat.bytes - self.last.bytes
        if self.first is None:
            self.first = stat
        self.last, self.last_t = stat, t

    def share(self, name: str, rate_bps: float | None) -> LinkShare:
        first, last = self.first, self.last
        drops = 0 if first is None or last is None else max(0, last.drops - first.drops)
        over = 0 if first is None or last is None else max(0, last.overlimits - first.overlimits)
        return LinkShare(name, rate_bps, self.backlogged_bytes, round(self.backlogged_s, 4),
                         drops, over)

    @property
    def sent(self) -> int:
        return 0 if self.first is None or self.last is None else self.last.bytes - self.first.bytes


# ---- reading the system ----------------------------------------------------------------
CLONE_NEWNET = 0x40000000


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


class NetlinkQdiscs:
    """One rtnetlink socket inside a node's network namespace (call from one thread)."""

    def __init__(self, pid: int) -> None:
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
        try:
            _setns(target)
            try:
                self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
                self.names = dict(socket.if_nameindex())
            finally:
                _setns(own)
        finally:
            os.close(own)
            os.close(target)
        self.sock.bind((0, 0))
        self.seq = 0

    def read(self) -> dict[str, QdiscStat]:
        self.seq += 1
        self.sock.send(qdisc_dump_request(self.seq))
        out: dict[int, QdiscStat] = {}
        done = False
        while not done:
            part, done = parse_qdisc_dump(self.sock.recv(1 << 16))
            out.update(part)
        return {self.names.get(i, str(i)): s for i, s in out.items()}

    def close(self) -> None:
        self.sock.close()


class TcQdiscs:
    """Fallback: one `tc -s -j qdisc show` in the node's namespace per sample."""

    def __init__(self, pid: int) -> None:
        self.argv = ["nsenter", "-t", str(pid), "-n", "tc", "-s", "-j", "qdisc", "show"]

    def read(self) -> dict[str, QdiscStat]:
        done = subprocess.run(self.argv, capture_output=True, text=True, timeout=10)
        return parse_tc_json(done.stdout) if done.returncode == 0 else {}

    def close(self) -> None:
        pass


def read_text(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


@dataclass
class Monitor:
    """Samples one lab between `start()` and `stop()` (a context manager too).

    nodes: node name -> pid of a process in its namespace; rates: 'node:intf' -> the
    configured egress rate in bit/s (None: unshaped); hosts: nodes whose RTOs count;
    host_cpu: the network's per-host CPU accounting (`fabric.cpuacct.HostCgroups`, its
    `usage_ns()`), or None.
    """

    nodes: dict[str, int]
    rates: dict[str, float | None]
    hosts: list[str]
    interval_s: float = 0.2
    host_cpu: Any = None
    tracks: dict[str, EgressTrack] = field(default_factory=dict)
    method: str = "netlink"
    samples: int = 0
    cpu_s: float = 0.0
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._duration = 0.0
        self._cpu0: dict[str, tuple[int, ...]] = {}
        self._cpu1: dict[str, tuple[int, ...]] = {}
        self._rto0: dict[str, int] = {}
        self._rto1: dict[str, int] = {}
        self._closed0: dict[str, int] = {}
        self._closed1: dict[str, int] = {}
        self._hostcpu: tuple[dict[str, int] | None, dict[str, int] | None] = (None, None)
        self._softnet = (0, 0)
        self._psi: tuple[int | None, int | None] = (None, None)

    def _rtos(self) -> dict[str, int]:
        return {h: parse_netstat(read_text(f"/proc/{self.nodes[h]}/net/netstat"))
                .get("TCPTimeouts", 0) for h in self.hosts}

    def _host_cpu(self) -> dict[str, int] | None:
        return None if self.host_cpu is None else self.host_cpu.usage_ns()

    def _closed(self) -> dict[str, int]:
        """Per host, MPTcpExt MptcpDClosed where the kernel counts it."""
        out = {}
        for h in self.hosts:
            mptcp = parse_netstat(read_text(f"/proc/{self.nodes[h]}/net/netstat"), "MPTcpExt")
            if "MptcpDClosed" in mptcp:
                out[h] = mptcp["MptcpDClosed"]
        return out

    def start(self) -> Monitor:
        self._t0 = time.monotonic()
        self._cpu0 = parse_proc_stat(read_text("/proc/stat"))
        self._rto0 = self._rtos()
        self._closed0 = self._closed()
        self._hostcpu = (self._host_cpu(), None)
        self._softnet = (parse_softnet_drops(read_text("/proc/net/softnet_stat")), 0)
        self._psi = (parse_pressure(read_text("/proc/pressure/cpu")), None)
        self._thread = threading.Thread(target=self._loop, name="fidelity-monitor",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> Samples:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._duration = time.monotonic() - self._t0
        self._cpu1 = parse_proc_stat(read_text("/proc/stat"))
        self._rto1 = self._rtos()
        self._closed1 = self._closed()
        self._hostcpu = (self._hostcpu[0], self._host_cpu())
        self._softnet = (self._softnet[0],
                         parse_softnet_drops(read_text("/proc/net/softnet_stat")))
        self._psi = (self._psi[0], parse_pressure(read_text("/proc/pressure/cpu")))
        return self.result()

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if not self._stop.is_set():
            self.stop()

    def result(self) -> Samples:
        links = [track.share(name, self.rates.get(name))
                 for name, track in sorted(self.tracks.items()) if track.sent > 0]
        rtos = {h: self._rto1.get(h, 0) - self._rto0.get(h, 0) for h in self.hosts}
        p0, p1 = self._psi
        waited = None if p0 is None or p1 is None or self._duration <= 0 \
            else (p1 - p0) / 1e6 / self._duration
        closed = {h: self._closed1[h] - self._closed0.get(h, 0) for h in self._closed1}
        return Samples(self._duration, core_shares(self._cpu0, self._cpu1), links,
                       {h: n for h, n in rtos.items() if n > 0},
                       max(0, self._softnet[1] - self._softnet[0]), waited,
                       None if not self._closed1 else
                       {h: n for h, n in closed.items() if n > 0},
                       cpu_seconds(*self._hostcpu))

    def cost(self) -> dict[str, Any]:
        return {"method": self.method, "interval_s": self.interval_s,
                "samples": self.samples, "namespaces": len(self.nodes),
                "cpu_s": round(self.cpu_s, 4),
                "cpu_per_sample_ms": round(1000 * self.cpu_s / self.samples, 3)
                if self.samples else None,
                "errors": self.errors[:5]}

    # ---- the sampler thread ----
    def _open(self) -> dict[str, Any]:
        readers: dict[str, Any] = {}
        for name, pid in self.nodes.items():
            try:
                readers[name] = NetlinkQdiscs(pid)
            except OSError as exc:
                self.method = "tc"
                self.errors.append(f"{name}: netlink unavailable ({exc}); using tc")
                readers[name] = TcQdiscs(pid)
        return readers

    def _sample(self, readers: dict[str, Any]) -> None:
        t = time.monotonic()
        for name, reader in readers.items():
            try:
                stats = reader.read()
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                if len(self.errors) < 20:
                    self.errors.append(f"{name}: {type(exc).__name__}: {exc}")
                continue
            for intf, stat in stats.items():
                key = f"{name}:{intf}"
                if key in self.rates:
                    self.tracks.setdefault(key, EgressTrack()).add(t, stat)
        self.samples += 1

    def _loop(self) -> None:
        c0 = time.thread_time()
        readers: dict[str, Any] = {}
        try:
            readers = self._open()
            self._sample(readers)
            while not self._stop.wait(self.interval_s):
                self._sample(readers)
            self._sample(readers)
        except Exception as exc:  # the monitor never fails a run; the record says why
            self.errors.append(f"sampler stopped: {type(exc).__name__}: {exc}")
        finally:
            for reader in readers.values():
                with contextlib.suppress(OSError):
                    reader.close()
            self.cpu_s = time.thread_time() - c0
