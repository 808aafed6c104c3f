"""How often a run's processes were woken while its traffic flowed, by role.

In the lab kernel (User-Mode Linux) every return of a guest process to user space is a
round trip through the host (the process is a host process the UML kernel stops and
resumes with ptrace): what a process costs the host is how often it blocks and runs
again, not its CPU time, which the virtual clock does not count. This module reads the
kernel's own per-process counters before and after the traffic (context switches:
voluntary ones are the wake-ups, involuntary ones preemptions; minor page faults) and
sums the differences by role: the captures (tcpdump), the servers and clients (the
transfer tool), and the runner itself. The counters are per thread: a process's are
summed over its live threads. Processes that ended during the traffic (the clients) are
counted through the runner's `RUSAGE_CHILDREN`, which the kernel adds them to when they
are reaped; threads that ended in a process still running (a server's thread per
connection) are counted nowhere, so the servers' figures are lower bounds. A voluntary
switch is a wait, in the kernel or for the next system call alike.

`forks` counts the processes the kernel started (/proc/stat), which the runner records
per phase of a run (`processes_started`): in the lab kernel a process start costs tens
of milliseconds of host time, most of a run's fixed cost.

Pure parsing first (`parse_stat`, `parse_status`, `parse_forks`, `role_of`, `delta`);
`snapshot`, `forks` and `children` read /proc. Works on any Linux kernel; the
manifest's `guest_cost` holds the result.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pathdiv.experiments.fabric.linkcap import COMMAND as LINKCAP_COMMAND

ROLES = ("captures", "servers", "clients", "runner", "other")


@dataclass(frozen=True)
class Counters:
    """One process's (or a sum's) counters."""

    wakeups: int = 0  # voluntary context switches
    preempted: int = 0  # involuntary context switches
    faults: int = 0  # minor page faults

    def __add__(self, other: Counters) -> Counters:
        return Counters(self.wakeups + other.wakeups, self.preempted + other.preempted,
                        self.faults + other.faults)

    def __sub__(self, other: Counters) -> Counters:
        return Counters(self.wakeups - other.wakeups, self.preempted - other.preempted,
                        self.faults - other.faults)


def parse_stat(text: str) -> tuple[str, int]:
    """/proc/<pid>/stat -> (comm, minor faults). The comm may hold spaces and ')'."""
    head, _, rest = text.rpartition(")")
    comm = head.partition("(")[2]
    fields = rest.split()
    return comm, int(fields[7]) if len(fields) > 7 else 0


def parse_status(text: str) -> tuple[int, int]:
    """/proc/<pid>/status -> (voluntary, involuntary context switches)."""
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
            values[name] = int(value.split()[0])
    return values.get("voluntary_ctxt_switches", 0), values.get("nonvoluntary_ctxt_switches", 0)


def role_of(comm: str, cmdline: list[str], pid: int, runner: int) -> str:
    """A process's role in a run: captures, servers, clients, runner or other."""
    if pid == runner:
        return "runner"
    if comm in ("tcpdump", LINKCAP_COMMAND):
        return "captures"
    if any(arg.endswith("transfer.py") for arg in cmdline):
        return "servers" if "serve" in cmdline else "clients"
    return "other"


def delta(before: Mapping[int, tuple[str, Counters]], after: Mapping[int, tuple[str, Counters]],
          children_before: Counters, children_after: Counters) -> dict[str, dict[str, int]]:
    """Per role: processes seen and the counters' growth between two snapshots (pid ->
    (role, counters)). A process only in `after` counts from zero; one only in `before`
    ended, and the reaped children's growth (RUSAGE_CHILDREN, clients in a run) is
    added to the clients."""
    sums: dict[str, Counters] = {}
    seen: dict[str, int] = {}
    for pid, (role, now) in after.items():
        was = before.get(pid)
        grown = now - was[1] if was is not None and was[0] == role else now
        sums[role] = sums.get(role, Counters()) + grown
        seen[role] = seen.get(role, 0) + 1
    reaped = children_after - children_before
    sums["clients"] = sums.get("clients", Counters()) + reaped
    return {role: {"processes": seen.get(role, 0), "wakeups": c.wakeups,
                   "preempted": c.preempted, "faults": c.faults}
            for role in ROLES
            if (c := sums.get(role)) is not None and (c.wakeups or seen.get(role))}


# ---- side effects ----------------------------------------------------------------------
def snapshot(proc: Path = Path("/proc")) -> dict[int, tuple[str, Counters]]:
    """pid -> (role, counters) of every process this kernel runs now."""
    me = os.getpid()
    out: dict[int, tuple[str, Counters]] = {}
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        base = proc / entry
        try:
            comm, faults = parse_stat((base / "stat").read_text())
            cmdline = (base / "cmdline").read_bytes().decode(errors="replace").split("\0")
            vol = invol = 0
            for task in os.listdir(base / "task"):  # the counters are per thread
                v, i = parse_status((base / "task" / task / "status").read_text())
                vol, invol = vol + v, invol + i
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile, or a kernel thread's empty files
        out[int(entry)] = (role_of(comm, cmdline, int(entry), me), Counters(vol, invol, faults))
    return out


def parse_forks(text: str) -> int:
    """/proc/stat -> processes started since boot (its `processes` line)."""
    for line in text.splitlines():
        if line.startswith("processes "):
            return int(line.split()[1])
    return 0


def forks() -> int:
    """Processes this kernel started since it booted (0 when unknown)."""
    try:
        return parse_forks(Path("/proc/stat").read_text())
    except OSError:
        return 0


def children() -> Counters:
    """The reaped children's counters (RUSAGE_CHILDREN) of this process."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return Counters(usage.ru_nvcsw, usage.ru_nivcsw, usage.ru_minflt)


class GuestCost:
    """`start()` before the traffic, `stop()` after it: the manifest's `guest_cost`."""

    def __init__(self) -> None:
        self.before: dict[int, tuple[str, Counters]] = {}
        self.children = Counters()

    def start(self) -> None:
        self.before, self.children = snapshot(), children()

    def stop(self) -> dict[str, dict[str, int]]:
        return delta(self.before, snapshot(), self.children, children())
