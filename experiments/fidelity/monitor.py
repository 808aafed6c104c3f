"""Sample the host while a run's traffic flows, cheaply: no per-packet work, no process
per link.

- CPU per core from `/proc/stat` (busy, softirq, steal), at start and stop;
- every node's root qdiscs (bytes, drops, overlimits, queue length) every
  `interval_s`, through one netlink socket per network namespace, opened once by the
  sampler thread (it enters each namespace with setns(2) just to open the socket);
  where that fails, one `tc -s -j qdisc show` per namespace per sample;
- TCP retransmission timeouts (TcpExt TCPTimeouts) and retransmitted segments (Tcp
  RetransSegs, subflows included) per host from `/proc/<host pid>/net/{netstat,snmp}`,
  and the kernel input-backlog drops from `/proc/net/softnet_stat`, at start and stop;
- for switches: the CPU time of every process in the switch's namespace (a software
  switch such as bmv2's `simple_switch`; none on the nftables plane, whose forwarding
  is softirq work no process is charged for), the link captures (tcpdump, which
  run there too, or the one linkcap of all links) counted apart: the namespaces'
  processes are found again at start, every SCAN_S during the run and at stop, and each
  process (a pid and its start time: a reused pid is another process) counts the CPU it
  spent between the samples it was seen in: from its value at the first sample, or from
  zero when it started later, up to its last sample (`ProcessCpu`), so a process that
  exits or starts meanwhile never makes the figure negative;
  and the packets a switch received on its ports (`/proc/<pid>/net/dev`, at the first and last qdisc
  sample) against what its egress qdiscs sent, dropped or still hold: the difference
  is what the switch lost outside the emulated queues (a software switch that fell
  behind its ports);
- the subflow windows mptcp-d's extra subflow elimination closed (MPTcpExt
  MptcpDClosed in each host's `/proc/<pid>/net/netstat`, lab kernel patch 0015; absent
  elsewhere) and each host's CPU time (`fabric/cpuacct.py`: a cgroup per host), at
  start and stop;
- the reordering each host's TCP saw and what Juggler did about it (`REORDER_COUNTERS`
  of TcpExt: segments queued out of order, reordering a sender detected, DSACKs of
  spurious retransmissions; Juggler's counters where the kernel has them, lab kernel
  patch 0016), at start and stop.

An egress is judged only over what it surely had to send: the bytes its queue held at
one sample, up to what its rate sends by the next (`EgressTrack`); what it sent of them,
against the time they take at its rate, is its achieved rate while backlogged
(`experiments.fidelity.verdict`).
Parsers are pure; `Monitor` does the reading. The sampler's own CPU time is recorded.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pathdiv.experiments.dataplane.base import parse_proc_net_dev
from pathdiv.experiments.fabric.cpuacct import cpu_seconds
from pathdiv.experiments.fabric.linkcap import COMMAND as LINKCAP_COMMAND
from pathdiv.experiments.fidelity.qdiscs import EgressTrack, NetlinkQdiscs, TcQdiscs
from pathdiv.experiments.fidelity.verdict import (
    REORDER_COUNTERS,
    CoreShare,
    Samples,
)
from pathdiv.experiments.manifest import parse_netstat

log = logging.getLogger("pathdiv")

CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
# the link captures: one tcpdump per link in the switches' namespaces, or one linkcap
# for all links in the runner's (fabric/linkcap.py); their CPU is not the switches'
CAPTURE_COMMAND = "tcpdump"
CAPTURES = "captures"  # their ticks' key
SCAN_S = 0.5  # how often the switches' processes are found again during a run


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


def parse_pid_cpu_ticks(text: str) -> int:
    """/proc/<pid>/stat -> the process's user + system time (clock ticks, all threads).
    The command name (field 2) may hold spaces and parentheses: fields are counted from
    the last ')'."""
    rest = text.rpartition(")")[2].split()
    if len(rest) < 13:
        return 0
    return int(rest[11]) + int(rest[12])  # fields 14 and 15: utime, stime


def parse_pid_start(text: str) -> int:
    """/proc/<pid>/stat -> the process's start time (clock ticks after boot, field 22):
    with the pid, what tells a process from a later one given the same pid."""
    rest = text.rpartition(")")[2].split()
    return int(rest[19]) if len(rest) > 19 else 0


Proc = tuple[int, int]  # (pid, start time)


class ProcessCpu:
    """CPU ticks a changing set of processes spent between the first and the last sample
    (pure). Each process counts from its value at the first sample (or from zero when
    it appeared later: it started after that sample) to its value at its last sample (a
    process that exited keeps that), so the total never goes down and never below 0."""

    def __init__(self) -> None:
        self.base: dict[Proc, int] = {}
        self.last: dict[Proc, int] = {}
        self.samples = 0

    def add(self, ticks: Mapping[Proc, int]) -> None:
        for proc, now in ticks.items():
            if proc not in self.base:
                self.base[proc] = now if self.samples == 0 else 0
            self.last[proc] = max(now, self.last.get(proc, 0))
        self.samples += 1

    def total(self) -> int:
        return sum(max(0, self.last[p] - self.base[p]) for p in self.last)


def group_by_namespace(namespace_of: Mapping[int, str],
                       nodes: Mapping[str, int]) -> dict[str, list[int]]:
    """Every process (pid -> its network namespace id) grouped under the node whose own
    process (`nodes`: name -> pid) shares that namespace; nodes without a known
    namespace get none."""
    node_of = {namespace_of[pid]: name for name, pid in nodes.items() if pid in namespace_of}
    out: dict[str, list[int]] = {name: [] for name in nodes}
    for pid, ns in sorted(namespace_of.items()):
        if ns in node_of:
            out[node_of[ns]].append(pid)
    return out


def switch_losses(rx_first: Mapping[str, Mapping[str, int]],
                  rx_last: Mapping[str, Mapping[str, int]],
                  tracks: Mapping[str, EgressTrack]) -> dict[str, int]:
    """Per switch: packets received on its ports between the first and last sample, less
    what its egress qdiscs sent, dropped or still held more at the end than at the start.
    A switch forwards all it receives, so what remains was lost inside the switch, not in
    an emulated queue (a few packets either way are its own: ARP)."""
    out: dict[str, int] = {}
    for switch, last in rx_last.items():
        first = rx_first.get(switch, {})
        received = sum(last[i] - first.get(i, last[i]) for i in last)
        left = 0
        for key, track in tracks.items():
            node, _, _ = key.partition(":")
            if node == switch and track.first is not None and track.last is not None:
                a, b = track.first, track.last
                left += (b.packets - a.packets) + (b.drops - a.drops) + (b.qlen - a.qlen)
        out[switch] = received - left
    return out


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


def read_proc(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


@dataclass
class Monitor:
    """Samples one lab between `start()` and `stop()` (a context manager too).

    nodes: node name -> pid of a process in its namespace; rates: 'node:intf' -> the
    configured egress rate in bit/s (None: unshaped); hosts: nodes whose RTOs and
    retransmissions count; switches: nodes whose processes' CPU and internal losses count;
    interval_s: seconds between samples (the config's `fidelity.sample_interval_s`, whose
    default only the schema holds); host_cpu: the network's per-host CPU accounting
    (`fabric.cpuacct.HostCgroups`, its `usage_ns()`), or None. On the virtual clock
    `pace` (given by the runner: traffic/clockgrid.py's `sleep_to_next` from the run's
    grid point) sleeps to the next multiple of interval_s from that point, so the
    samples fall at the same distances from the traffic in every run.
    """

    nodes: dict[str, int]
    rates: dict[str, float | None]
    hosts: list[str]
    interval_s: float
    host_cpu: Any = None
    switches: list[str] = field(default_factory=list)
    tracks: dict[str, EgressTrack] = field(default_factory=dict)
    method: str = "netlink"
    samples: int = 0
    cpu_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    pace: Callable[[int], object] | None = None  # sleeps to the next sample (ns step)

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
        self._reorder0: dict[str, dict[str, int]] = {}
        self._reorder1: dict[str, dict[str, int]] = {}
        self._hostcpu: tuple[dict[str, int] | None, dict[str, int] | None] = (None, None)
        self._softnet = (0, 0)
        self._psi: tuple[int | None, int | None] = (None, None)
        self._retrans0: dict[str, int] = {}
        self._retrans1: dict[str, int] = {}
        self._switch_ns: dict[str, str] = {}  # switch -> its network namespace
        self._cpu_of: dict[str, ProcessCpu] = {}  # switch (or CAPTURES) -> its processes
        self._scanned = 0.0
        self._rx: list[dict[str, dict[str, int]]] = []

    def _rtos(self) -> dict[str, int]:
        return {h: parse_netstat(read_proc(f"/proc/{self.nodes[h]}/net/netstat"))
                .get("TCPTimeouts", 0) for h in self.hosts}

    def _host_cpu(self) -> dict[str, int] | None:
        return None if self.host_cpu is None else self.host_cpu.usage_ns()

    def _closed(self) -> dict[str, int]:
        """Per host, MPTcpExt MptcpDClosed where the kernel counts it."""
        out = {}
        for h in self.hosts:
            mptcp = parse_netstat(read_proc(f"/proc/{self.nodes[h]}/net/netstat"), "MPTcpExt")
            if "MptcpDClosed" in mptcp:
                out[h] = mptcp["MptcpDClosed"]
        return out

    def _reordering(self) -> dict[str, dict[str, int]]:
        """Per host, the REORDER_COUNTERS its kernel has."""
        out = {}
        for h in self.hosts:
            tcp = parse_netstat(read_proc(f"/proc/{self.nodes[h]}/net/netstat"))
            out[h] = {name: tcp[c] for name, c in REORDER_COUNTERS.items() if c in tcp}
        return out

    def _retrans(self) -> dict[str, int]:
        return {h: parse_netstat(read_proc(f"/proc/{self.nodes[h]}/net/snmp"), "Tcp")
                .get("RetransSegs", 0) for h in self.hosts}

    def _sample_switch_cpu(self) -> None:
        """Find the processes of each switch's namespace (the captures apart: tcpdump
        there, linkcap in ours) and add their CPU ticks to each one's ProcessCpu."""
        if not self._switch_ns:
            for s in self.switches:
                if s in self.nodes:
                    with contextlib.suppress(OSError):
                        self._switch_ns[s] = os.readlink(f"/proc/{self.nodes[s]}/ns/net")
        switch_of = {ns: s for s, ns in self._switch_ns.items()}
        home = os.readlink(f"/proc/{os.getpid()}/ns/net")
        found: dict[str, dict[Proc, int]] = {s: {} for s in [*self._switch_ns, CAPTURES]}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                ns = os.readlink(f"/proc/{entry.name}/ns/net")
                if ns not in switch_of and ns != home:
                    continue
                comm = read_proc(f"/proc/{entry.name}/comm").strip()
                if ns not in switch_of and comm != LINKCAP_COMMAND:
                    continue
                stat = read_proc(f"/proc/{entry.name}/stat")
            except OSError:
                continue  # exited meanwhile: its last sample counts
            if not stat:
                continue
            key = CAPTURES if comm in (CAPTURE_COMMAND, LINKCAP_COMMAND) else switch_of[ns]
            found[key][(int(entry.name), parse_pid_start(stat))] = parse_pid_cpu_ticks(stat)
        for key, ticks in found.items():
            self._cpu_of.setdefault(key, ProcessCpu()).add(ticks)
        self._scanned = time.monotonic()

    def _switch_rx(self) -> dict[str, dict[str, int]]:
        return {s: {i: c.rx_packets for i, c in
                    parse_proc_net_dev(read_proc(f"/proc/{self.nodes[s]}/net/dev")).items()
                    if i != "lo"}
                for s in self.switches if s in self.nodes}

    def start(self) -> Monitor:
        self._t0 = time.monotonic()
        self._cpu0 = parse_proc_stat(read_proc("/proc/stat"))
        self._rto0 = self._rtos()
        self._closed0 = self._closed()
        self._reorder0 = self._reordering()
        self._hostcpu = (self._host_cpu(), None)
        self._retrans0 = self._retrans()
        if self.switches:
            try:
                self._sample_switch_cpu()
            except OSError as exc:
                self.errors.append(f"switch processes: {exc}")
        self._softnet = (parse_softnet_drops(read_proc("/proc/net/softnet_stat")), 0)
        self._psi = (parse_pressure(read_proc("/proc/pressure/cpu")), None)
        self._thread = threading.Thread(target=self._loop, name="fidelity-monitor",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> Samples:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._duration = time.monotonic() - self._t0
        self._cpu1 = parse_proc_stat(read_proc("/proc/stat"))
        self._rto1 = self._rtos()
        self._closed1 = self._closed()
        self._reorder1 = self._reordering()
        self._hostcpu = (self._hostcpu[0], self._host_cpu())
        self._retrans1 = self._retrans()
        if self.switches:
            with contextlib.suppress(OSError):
                self._sample_switch_cpu()
        self._softnet = (self._softnet[0],
                         parse_softnet_drops(read_proc("/proc/net/softnet_stat")))
        self._psi = (self._psi[0], parse_pressure(read_proc("/proc/pressure/cpu")))
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
        retrans = {h: self._retrans1.get(h, 0) - self._retrans0.get(h, 0) for h in self.hosts}
        tick = os.sysconf("SC_CLK_TCK")
        switch_cpu = {s: cpu.total() / tick for s, cpu in self._cpu_of.items()
                      if s != CAPTURES and cpu.last}
        captures = self._cpu_of.get(CAPTURES)
        capture_cpu = captures.total() / tick if captures is not None and captures.last \
            else None
        lost = switch_losses(self._rx[0], self._rx[-1], self.tracks) \
            if len(self._rx) >= 2 else {}
        closed = {h: self._closed1[h] - self._closed0.get(h, 0) for h in self._closed1}
        reordering = {h: {k: v - self._reorder0.get(h, {}).get(k, 0) for k, v in counts.items()}
                      for h, counts in self._reorder1.items()}
        return Samples(self._duration, core_shares(self._cpu0, self._cpu1), links,
                       {h: n for h, n in rtos.items() if n > 0},
                       max(0, self._softnet[1] - self._softnet[0]), waited,
                       windows_closed=None if not self._closed1 else
                       {h: n for h, n in closed.items() if n > 0},
                       host_cpu_s=cpu_seconds(*self._hostcpu),
                       retrans={h: n for h, n in retrans.items() if n > 0},
                       switch_cpu_s={s: round(v, 3) for s, v in switch_cpu.items()},
                       switch_lost=lost,
                       capture_cpu_s=None if capture_cpu is None else round(capture_cpu, 3),
                       reordering={h: {k: v for k, v in c.items() if v}
                                   for h, c in reordering.items() if any(c.values())},
                       reorder_counters=sorted({k for c in self._reorder1.values() for k in c}))

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

    def _sample(self, readers: dict[str, Any], edge: bool = False) -> None:
        """One qdisc sample of every node; at the first and last (`edge`) also the packets
        each switch received, so both counts cover the same interval."""
        if edge and self.switches:
            self._rx = [*self._rx[:1], self._switch_rx()]
        for name, reader in readers.items():
            t0 = time.monotonic()
            try:
                stats = reader.read()
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                if len(self.errors) < 20:
                    self.errors.append(f"{name}: {type(exc).__name__}: {exc}")
                continue
            t = (t0 + time.monotonic()) / 2  # this node's instant, not the round's
            for intf, stat in stats.items():
                key = f"{name}:{intf}"
                if key in self.rates:
                    self.tracks.setdefault(key, EgressTrack(self.rates[key])).add(t, stat)
        self.samples += 1

    def _wait(self) -> bool:
        """Until the next sample is due; True once stop() was called."""
        if self.pace is None:
            return self._stop.wait(self.interval_s)
        self.pace(max(1, round(self.interval_s * 1e9)))
        return self._stop.is_set()

    def _loop(self) -> None:
        c0 = time.thread_time()
        readers: dict[str, Any] = {}
        try:
            readers = self._open()
            self._sample(readers, edge=True)
            while not self._wait():
                self._sample(readers)
                if self.switches and time.monotonic() - self._scanned >= SCAN_S:
                    self._sample_switch_cpu()  # processes that start and end meanwhile
            self._sample(readers, edge=True)
        except Exception as exc:  # the monitor never fails a run; the record says why
            self.errors.append(f"sampler stopped: {type(exc).__name__}: {exc}")
        finally:
            for reader in readers.values():
                with contextlib.suppress(OSError):
                    reader.close()
            self.cpu_s = time.thread_time() - c0
