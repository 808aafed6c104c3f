"""CPU time per emulated host, from one cgroup per host.

Every process pathdiv starts in a host (`Network.popen`: the transfer tool, the traffic
agents) and the host's own shell are moved into `<root>/pathdiv-<pid>/<host>` right after
they start; what they start later inherits it. The cgroup's CPU usage (cgroup v1:
`cpuacct.usage`, where a cpuacct hierarchy is mounted, as on this machine; cgroup v2:
`cpu.stat`'s usage_usec, as the lab kernel mounts it) then counts all CPU time
of the host's processes, with the softirq work the kernel ran while one of them was on
the CPU (this machine's kernel has no CONFIG_IRQ_TIME_ACCOUNTING, so that time is charged
to the interrupted task); softirq work run elsewhere (ksoftirqd, an idle CPU, another
host's or a switch's process) is not a host's. Unlike /proc/stat, the counts are the
run's own on a machine shared with other work.

Where neither hierarchy is writable `HostCgroups.create` returns False and every reading
is None: per-host CPU is then unknown, not zero.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

log = logging.getLogger("pathdiv")

V1_ROOT = Path("/sys/fs/cgroup/cpuacct")
V2_ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))
V1_USAGE, V2_USAGE = "cpuacct.usage", "cpu.stat"


def find_root() -> Path | None:
    """The cgroup hierarchy to account in: v1 cpuacct if mounted, else a v2 root."""
    if (V1_ROOT / V1_USAGE).is_file():
        return V1_ROOT
    return next((r for r in V2_ROOTS if (r / "cgroup.controllers").is_file()), None)


def parse_usage_ns(name: str, text: str) -> int:
    """CPU nanoseconds from a cgroup's usage file: `cpuacct.usage` (ns) or `cpu.stat`
    (its usage_usec line)."""
    if name == V1_USAGE:
        return int(text.strip())
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) * 1000
    raise ValueError("no usage_usec in cpu.stat")


class HostCgroups:
    """One cgroup per host under `root`/pathdiv-<owner pid> (root: `find_root()`)."""

    def __init__(self, hosts: list[str], root: Path | None = None,
                 owner: int | None = None) -> None:
        self.hosts = list(hosts)
        root = root or find_root() or V1_ROOT
        self.base = root / f"pathdiv-{owner if owner is not None else os.getpid()}"
        self.usage_file = V1_USAGE if (root / V1_USAGE).is_file() else V2_USAGE
        self.ready = False

    def create(self) -> bool:
        """Make the cgroups; False (and none kept) when cpuacct is not available."""
        try:
            for host in self.hosts:
                (self.base / host).mkdir(parents=True, exist_ok=True)
            self.ready = all((self.base / h / self.usage_file).is_file() for h in self.hosts)
        except OSError as exc:
            log.debug("no per-host CPU accounting: %s", exc)
            self.ready = False
        if not self.ready:
            self.remove()
        return self.ready

    def attach(self, host: str, pid: int) -> None:
        """Move process `pid` (all its threads) into `host`'s cgroup; a process that
        already ended is skipped."""
        if not self.ready or host not in self.hosts:
            return
        with contextlib.suppress(OSError):
            (self.base / host / "cgroup.procs").write_text(f"{pid}\n")

    def usage_ns(self) -> dict[str, int] | None:
        """host -> CPU nanoseconds its processes used so far; None when not accounted."""
        if not self.ready:
            return None
        out = {}
        for host in self.hosts:
            try:
                out[host] = parse_usage_ns(self.usage_file,
                                           (self.base / host / self.usage_file).read_text())
            except (OSError, ValueError):
                return None
        return out

    def remove(self) -> None:
        """Remove the cgroups, moving any process still in one to the root first."""
        root_procs = self.base.parent / "cgroup.procs"
        for host in self.hosts:
            group = self.base / host
            with contextlib.suppress(OSError):
                for pid in (group / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        root_procs.write_text(f"{pid}\n")
            with contextlib.suppress(OSError):
                group.rmdir()
        with contextlib.suppress(OSError):
            self.base.rmdir()
        self.ready = False


def cpu_seconds(before: dict[str, int] | None,
                after: dict[str, int] | None) -> dict[str, float] | None:
    """host -> CPU seconds between two `usage_ns` readings (None if either is missing)."""
    if before is None or after is None:
        return None
    return {h: max(0, after[h] - before.get(h, 0)) / 1e9 for h in after}


def remove_orphans(root: Path | None = None) -> list[str]:
    """Remove the per-host cgroups of pathdiv processes that are gone (a killed run's);
    a cgroup that still holds a process stays. Returns the folders removed."""
    root = root or find_root()
    removed: list[str] = []
    if root is None:
        return removed
    for base in sorted(root.glob("pathdiv-*")):
        pid = base.name.removeprefix("pathdiv-")
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        for group in [p for p in base.iterdir() if p.is_dir()]:
            with contextlib.suppress(OSError):
                group.rmdir()
        with contextlib.suppress(OSError):
            base.rmdir()
            removed.append(str(base))
    return removed
