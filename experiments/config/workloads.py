"""The workload patterns a config may name: one registry entry per pattern.

A closed pattern is drawn as rounds of designations (`pathdiv.experiments.plan.
designations` holds each one's shape, keyed by the same name); an open-loop pattern
is drawn as arrivals (`pathdiv.experiments.plan.arrivals`). The schema's choices and
help derive from `PATTERNS`.

A closed pattern also says, in closed form, how many rounds and transfers one
iteration's request makes on n hosts, the fan-in of its busiest request and how many
hosts it needs, so `pathdiv check`
bounds what a run will enumerate before anything enumerates it
(tests/unit/test_plan.py holds these counts equal to the drawn designations).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def _at_least_two(n: int) -> str | None:
    return None if n >= 2 else "needs at least 2 hosts"


def _two_halves(n: int) -> str | None:
    return None if n >= 4 and n % 2 == 0 else \
        "splits the hosts into two halves of at least 2 (an even number, at least 4)"


@dataclass(frozen=True)
class Pattern:
    name: str
    summary: str  # the schema's help
    open_loop: bool = False  # arrivals over workload.duration_s instead of rounds
    # per iteration and request, on n hosts (closed patterns); `busiest`: the servers of
    # the largest request of a round (the fan-in its client's link carries)
    rounds: Callable[[int], int] = lambda n: 1
    transfers: Callable[[int], int] = lambda n: 0
    busiest: Callable[[int], int] = lambda n: 1
    hosts_problem: Callable[[int], str | None] = _at_least_two


PATTERNS: dict[str, Pattern] = {p.name: p for p in (
    Pattern("silent", "1-to-1 pairs take turns", rounds=lambda n: n, transfers=lambda n: n),
    Pattern("noisy", "two halves, in each one client fetches from the rest at once "
                     "(partition-aggregate)", transfers=lambda n: n - 2,
            busiest=lambda n: n // 2 - 1, hosts_problem=_two_halves),
    Pattern("incast", "one client fetches from every other host at once",
            transfers=lambda n: n - 1, busiest=lambda n: n - 1),
    Pattern("permutation", "every host fetches from another at once", transfers=lambda n: n),
    Pattern("poisson", "open-loop arrivals at every host with sizes from workload.sizes at "
                       "workload.load", open_loop=True, rounds=lambda n: 0),
)}


def pattern_help() -> str:
    return "; ".join(f"{p.name}: {p.summary}" for p in PATTERNS.values())


def open_loop(pattern: str) -> bool:
    """Whether `pattern` (a registry name) is drawn as arrivals rather than rounds."""
    return PATTERNS[pattern].open_loop
