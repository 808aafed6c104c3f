"""A plan split into N shards, balanced by expected run duration (pure).

`partition` deals the runs greedily, longest first, each to the shard with the least
expected time so far (longest processing time first); ties go by run id and then to the
lowest shard index, so the same plan always gives the same shards, on every machine
that expands it. Greedy dealing keeps the most and the least loaded shard within one
run of each other (the longest). Within a shard the runs keep their plan order.

`--shard I/N` counts from 0, like $SLURM_ARRAY_TASK_ID: shard I of N runs
`partition(plan, N)[I]`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from pathdiv.experiments.plan.estimate import expected_run_s
from pathdiv.experiments.plan.lanes import deal
from pathdiv.experiments.plan.runs import Run

SHARD_SYNTAX = re.compile(r"^\s*(\d{1,12})\s*/\s*(\d{1,12})\s*$")
MAX_SHARDS = 1000  # array tasks of one plan (a plan has at most MAX_RUNS runs)


@dataclass(frozen=True)
class Shard:
    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def name(self) -> str:
        """File-name form: shard-1-of-3."""
        return f"shard-{self.index}-of-{self.count}"


def parse_shard(text: str) -> Shard:
    """'1/3' -> Shard(1, 3); anything else raises ValueError saying what is allowed."""
    match = SHARD_SYNTAX.match(text)
    if not match:
        raise ValueError(f"--shard {text[:40]!r}: expected I/N with integers 0 <= I < N, e.g. "
                         "--shard 0/4 for the first of four shards")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1:
        raise ValueError(f"--shard {text}: N (the number of shards) must be at least 1")
    if count > MAX_SHARDS:
        raise ValueError(f"--shard {text}: N (the number of shards) must be at most "
                         f"{MAX_SHARDS}, and is best at most the number of runs")
    if index >= count:
        raise ValueError(f"--shard {text}: I must be between 0 and N-1 = {count - 1} "
                         "(shards count from 0, like $SLURM_ARRAY_TASK_ID)")
    return Shard(index, count)


def partition(runs: list[Run], count: int,
              cost: Callable[[Run], float] = expected_run_s) -> list[list[Run]]:
    """`count` lists of runs, together every run exactly once, each in plan order
    (`pathdiv.experiments.plan.lanes.deal`, by the default costs: the same on every
    machine)."""
    return deal(runs, count, cost)


def shard_of(runs: list[Run], count: int,
             cost: Callable[[Run], float] = expected_run_s) -> dict[str, int]:
    """run_id -> the index of its shard."""
    return {r.run_id: i for i, shard in enumerate(partition(runs, count, cost)) for r in shard}


def shard_runs(runs: list[Run], shard: Shard,
               cost: Callable[[Run], float] = expected_run_s) -> list[Run]:
    """The runs shard `shard` executes, in plan order."""
    return partition(runs, shard.count, cost)[shard.index]


def describe_shards(runs: list[Run], count: int,
                    cost: Callable[[Run], float] = expected_run_s) -> str:
    """One line per shard: its runs and expected minutes (for `pathdiv check`)."""
    lines = []
    for i, shard in enumerate(partition(runs, count, cost)):
        minutes = sum(cost(r) for r in shard) / 60
        lines.append(f"shard {i}/{count}: {len(shard)} run(s), ~{minutes:.1f} min expected")
    return "\n".join(lines)
