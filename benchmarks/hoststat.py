"""The host's CPU steal and load beside a measured figure (imported by the benchmarks).

On a shared or virtualised machine the hypervisor steals CPU time at random and other
jobs load the cores: wall times (and, on the real clock, rates) depend on both, so every
figure is printed with the steal share (/proc/stat) over its measurement and the
1-minute load average at its end. Virtual-clock results of the lab kernel should not.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field


def cpu_times() -> list[int]:
    """The host's aggregate CPU times (the /proc/stat ``cpu`` line), in ticks."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


def steal_ticks() -> int:
    """The host's stolen CPU time so far, in ticks (the eighth field of /proc/stat's cpu
    line; 0 where the kernel does not count it)."""
    times = cpu_times()
    return times[7] if len(times) > 7 else 0


def median_call_s(fn: Callable[[], object], calls: int) -> float:
    """The median wall time of ``calls`` calls of ``fn``, in seconds."""
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def steal_share(before: list[int], after: list[int]) -> float:
    """Share of CPU time stolen by the hypervisor between two /proc/stat readings."""
    delta = [b - a for a, b in zip(before, after, strict=False)]
    total = sum(delta[:8])  # user nice system idle iowait irq softirq steal
    return delta[7] / total if total else 0.0


@dataclass
class HostLoad:
    """Wall seconds, steal share and load average over a ``with`` block."""

    wall_s: float = 0.0
    steal: float = 0.0
    load: float = 0.0
    cpu_s: float = 0.0  # CPU seconds of the child processes waited for meanwhile
    _start: float = field(default=0.0, repr=False)
    _cpu: list[int] = field(default_factory=list, repr=False)
    _children: float = field(default=0.0, repr=False)

    def __enter__(self) -> HostLoad:
        self._cpu, self._start = cpu_times(), time.monotonic()
        self._children = children_cpu_s()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = time.monotonic() - self._start
        self.steal = steal_share(self._cpu, cpu_times())
        self.load = os.getloadavg()[0]
        self.cpu_s = children_cpu_s() - self._children

    def __str__(self) -> str:
        return (f"wall {self.wall_s:.1f} s, child CPU {self.cpu_s:.1f} s, host steal "
                f"{self.steal:.1%}, load {self.load:.1f} (1-min, at the end)")


def children_cpu_s() -> float:
    """User + system CPU seconds of this process's waited-for descendants (UML and the
    guest's processes are host processes: what a run costs on an idle core)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
