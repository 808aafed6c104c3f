"""`pathdiv clean`: remove what killed runs left behind, and nothing else.

A run's processes (Mininet node shells, servers, captures, switches, the lab kernel's
UML) all carry PATHDIV_OWNER=<pid>:<start time> of the pathdiv process that owns them.
Processes whose owner is gone (a pid reused by another process counts as gone) are
killed; once the last process of a namespace exits the kernel removes the namespace
with its veths and nftables tables. Named namespaces (`ip netns`) are deleted only when
they carry pathdiv's owner mark (environment.NS_ALIAS on their loopback) and that owner
is gone; host settings a killed run changed are put back; scratch folders
(`/tmp/pathdiv-*`, shared with a lab kernel or holding a live network's files) whose
owner is gone are removed. Labs whose owner still runs are left alone and reported.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field

from pathdiv.experiments.fabric.cpuacct import remove_orphans
from pathdiv.experiments.fabric.environment import (
    namespace_owner,
    restore_orphaned_settings,
)
from pathdiv.kernels.processes import (
    orphaned_scratch,
    owner_alive,
    owner_marks,
    parse_owner,
    remove_scratch,
    sweep,
)


def namespace_names(listing: str) -> list[str]:
    """Names from `ip netns list` output."""
    return [line.split()[0] for line in listing.splitlines() if line.strip()]


@dataclass(frozen=True)
class CleanReport:
    killed: list[int]
    live_owners: list[int]
    namespaces: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    unmarked: list[str] = field(default_factory=list)
    scratch: list[str] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"killed {len(self.killed)} leftover lab process(es)"
                 + (f" (pid {', '.join(map(str, self.killed))})" if self.killed else "")]
        if self.namespaces:
            parts.append(f"deleted namespace(s) {', '.join(self.namespaces)}")
        if self.scratch:
            parts.append(f"removed {len(self.scratch)} scratch folder(s) "
                         f"({', '.join(self.scratch)})")
        if self.restored:
            parts.append(f"restored {'; '.join(self.restored)}")
        if self.cgroups:
            parts.append(f"removed the per-host CPU cgroups {', '.join(self.cgroups)}")
        if self.unmarked:
            parts.append(f"left {len(self.unmarked)} namespace(s) pathdiv did not make "
                         f"alone ({', '.join(self.unmarked)})")
        if self.live_owners:
            owners = ", ".join(map(str, self.live_owners))
            parts.append(f"left the running lab(s) of pid {owners} alone")
        return "; ".join(parts)


def clean() -> CleanReport:
    live = sorted({parsed[0] for _, mark in owner_marks()
                   if owner_alive(mark) and (parsed := parse_owner(mark))})
    killed = sweep(None)
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    deleted, unmarked = [], []
    for ns in namespace_names(listing):
        owner = namespace_owner(ns)
        if owner is None:
            unmarked.append(ns)
        elif owner_alive(owner):
            parsed = parse_owner(owner)
            if parsed and parsed[0] not in live:
                live.append(parsed[0])
        elif subprocess.run(["ip", "netns", "delete", ns], capture_output=True).returncode == 0:
            deleted.append(ns)
    scratch = orphaned_scratch()
    for folder in scratch:
        remove_scratch(folder)
    return CleanReport(killed=killed, live_owners=sorted(live), namespaces=deleted,
                       restored=restore_orphaned_settings(), unmarked=unmarked,
                       scratch=[str(folder) for folder in scratch],
                       cgroups=remove_orphans())
