"""`pathdiv clean`: remove what killed runs left behind, and nothing else.

A run's processes (Mininet node shells, servers, tcpdumps, switches) all carry
PATHDIV_OWNER=<pid of the pathdiv process that owns them>. Processes whose owner is
gone are killed; once the last process of a namespace exits the kernel removes the
namespace with its veths and nftables tables. Labs whose owner still runs are left
alone and reported.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field

from pathdiv.kernels.processes import owned_processes, pid_alive, sweep

# Named namespaces made outside Mininet by pathdiv's one-switch P4 harness and
# benchmarks (pd4*, pd6*, pd7*) and the lab kernel's two-namespace tool (pdlab-*).
NAMED_NS = re.compile(r"^pd(lab-|[0-9])")


def leftover_namespaces(listing: str) -> list[str]:
    """Names from `ip netns list` output that pathdiv's tools create."""
    names = [line.split()[0] for line in listing.splitlines() if line.strip()]
    return [n for n in names if NAMED_NS.match(n)]


@dataclass(frozen=True)
class CleanReport:
    killed: list[int]
    live_owners: list[int]
    namespaces: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"killed {len(self.killed)} leftover lab process(es)"]
        if self.namespaces:
            parts.append(f"deleted namespace(s) {', '.join(self.namespaces)}")
        if self.live_owners:
            owners = ", ".join(map(str, self.live_owners))
            parts.append(f"left the running lab(s) of pid {owners} alone")
        return "; ".join(parts)


def clean() -> CleanReport:
    live = sorted({own for _, own in owned_processes() if pid_alive(own)})
    killed = sweep(None)
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    deleted = [ns for ns in leftover_namespaces(listing)
               if subprocess.run(["ip", "netns", "delete", ns],
                                 capture_output=True).returncode == 0]
    return CleanReport(killed=killed, live_owners=live, namespaces=deleted)
