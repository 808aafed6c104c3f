"""Extending pathdiv from user code: a workload pattern or a metric of one's own, without
editing pathdiv.

    import random
    from pathdiv.experiments import api

    def ring(hosts: list[str], rng: random.Random) -> list[api.Shape]:
        # one round: every host fetches from its right-hand neighbour at once
        return [[(h, (hosts[(i + 1) % len(hosts)],)) for i, h in enumerate(hosts)]]

    api.register_pattern("ring", "every host fetches from its neighbour at once", ring)
    cfg = api.load_config("silent", {"workload.pattern": "ring", "hosts.kernel": "host"})

The pattern enters the one registry the schema, the plan and the traffic read
(`pathdiv.experiments.config.workloads.PATTERNS` and the shapes of
`pathdiv.experiments.plan.designations`), in this process only: a lab-kernel run's guest
is another process and knows only the shipped patterns, so `api.run` refuses such a plan.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

from pathdiv.analysis.metrics.columns import DEPENDENT_VARIABLES
from pathdiv.analysis.metrics.registry import METRICS, Metric, register
from pathdiv.experiments.config.schema import SCHEMA, Leaf, Section
from pathdiv.experiments.config.workloads import PATTERNS, Pattern, pattern_help
from pathdiv.experiments.plan.designations import SHAPES, Shape

ShapeFn = Callable[[list[str], random.Random], list[Shape]]

# A fat tree's worth of host names to try a new shape on before accepting it.
_TRY_HOSTS = [f"h{i}" for i in range(1, 17)]


def register_pattern(name: str, summary: str, shape: ShapeFn, replace: bool = False) -> None:
    """Add a closed workload pattern: `shape(hosts, rng)` returns one iteration's rounds,
    each round a list of (client, servers) whose transfers start together. Tried once on
    16 hosts first; a name pathdiv already has is refused unless `replace`."""
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"pattern name {name!r}: expected letters, digits, - or _")
    if name in PATTERNS and not replace:
        raise ValueError(f"workload pattern {name!r} exists ({PATTERNS[name].summary}); "
                         "choose another name or pass replace=True")
    _check_shape(name, shape)
    PATTERNS[name] = Pattern(name, summary)
    SHAPES[name] = shape
    _refresh_schema()


def _refresh_schema() -> None:
    """The schema's `workload.pattern` choices and help, from the registry as it is now."""
    workload = SCHEMA.fields["workload"]
    assert isinstance(workload, Section)
    leaf = workload.fields["pattern"]
    assert isinstance(leaf, Leaf)
    workload.fields["pattern"] = dataclasses.replace(leaf, choices=tuple(PATTERNS),
                                                     doc=pattern_help())


def _check_shape(name: str, shape: ShapeFn) -> None:
    rounds = shape(list(_TRY_HOSTS), random.Random(0))
    if not isinstance(rounds, list) or not rounds:
        raise ValueError(f"pattern {name!r}: shape returned {rounds!r}; expected a non-empty "
                         "list of rounds")
    for rnd in rounds:
        for item in rnd:
            client, servers = item
            bad = [h for h in (client, *servers) if h not in _TRY_HOSTS]
            if bad or client in servers or not servers:
                raise ValueError(f"pattern {name!r}: round entry {item!r} must be (client, "
                                 "servers) of the hosts given, a client never its own server")


def register_metric(name: str, summary: str, compute: Callable[[Any], float],
                    per: str = "transfer", fold: str = "mean", replace: bool = False) -> None:
    """Add a metric: a column of metrics.csv, of `results.open(...).observations`, and a
    dependent variable `analysis.dvs` may name.

    `per="transfer"`: `compute(row)` gets one transfer's row (a dict of transfers.csv's
    columns and the measures: `fct_s`, `size_bytes`, `retrans_bytes`, `paths_used`, ...)
    and its group's value is `fold` (mean, sum, max, min) of its transfers'.
    `per="group"`: `compute(transfers)` gets the group's rows as a DataFrame.
    Computed where the analysis runs, in this process (`api.analyze`, `api.run`)."""
    from pathdiv.analysis.metrics.table import GROUP_COLUMNS
    from pathdiv.analysis.metrics.transfer import MEASURES

    taken = (*DEPENDENT_VARIABLES, *GROUP_COLUMNS, *MEASURES, *_LEAD_COLUMNS)
    register(Metric(name, summary, per, compute, fold), taken, replace=replace)


def unregister_metric(name: str) -> None:
    """Remove a metric registered with `register_metric` (no error when there is none)."""
    METRICS.pop(name, None)


# metrics.csv's first columns (besides the factors) and transfers.csv's
_LEAD_COLUMNS = ("run_id", "repetition", "seed", "condition", "fidelity", "group_id",
                 "transfer_id", "client", "server", "size_bytes", "start_s", "end_s",
                 "received", "error", "measured")
