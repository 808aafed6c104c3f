"""`pathdiv clean`: remove what killed runs left behind, and nothing else.

A run's processes (Mininet node shells, servers, tcpdumps, switches) all carry
PATHDIV_LAB=<pid of the pathdiv process that owns them>. Processes whose owner is
gone are killed; once the last process of a namespace exits the kernel removes the
namespace with its veths and nftables tables. Labs whose owner still runs are left
alone and reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from experiments.network import lab_processes, pid_alive, sweep


@dataclass(frozen=True)
class CleanReport:
    killed: list[int]
    live_owners: list[int]

    def summary(self) -> str:
        parts = [f"killed {len(self.killed)} leftover lab process(es)"]
        if self.live_owners:
            owners = ", ".join(map(str, self.live_owners))
            parts.append(f"left the running lab(s) of pid {owners} alone")
        return "; ".join(parts)


def clean() -> CleanReport:
    live = sorted({own for _, own in lab_processes() if pid_alive(own)})
    return CleanReport(killed=sweep(None), live_owners=live)
