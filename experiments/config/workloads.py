"""The workload patterns a config may name: one registry entry per pattern.

A closed pattern is drawn as rounds of designations (`pathdiv.experiments.plan.
designations` holds each one's shape, keyed by the same name); an open-loop pattern
is drawn as arrivals (`pathdiv.experiments.plan.arrivals`). The schema's choices and
help derive from `PATTERNS`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pattern:
    name: str
    summary: str  # the schema's help
    open_loop: bool = False  # arrivals over workload.duration_s instead of rounds


PATTERNS: dict[str, Pattern] = {p.name: p for p in (
    Pattern("silent", "1-to-1 pairs take turns"),
    Pattern("noisy", "two halves, in each one client fetches from the rest at once "
                     "(partition-aggregate)"),
    Pattern("incast", "one client fetches from every other host at once"),
    Pattern("permutation", "every host fetches from another at once"),
    Pattern("poisson", "open-loop arrivals at every host with sizes from workload.sizes at "
                       "workload.load", open_loop=True),
)}


def pattern_help() -> str:
    return "; ".join(f"{p.name}: {p.summary}" for p in PATTERNS.values())


def open_loop(pattern: str) -> bool:
    """Whether `pattern` (a registry name) is drawn as arrivals rather than rounds."""
    return PATTERNS[pattern].open_loop
