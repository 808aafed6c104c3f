"""Metrics of one's own: the registry `api.register_metric` fills, read by metrics.csv's
table (analysis/metrics/table.py) and by the config's check of `analysis.dvs`.

A metric is measured per transfer (`per="transfer"`: `compute(row)` gets one row of
transfer_metrics.csv as a mapping: transfers.csv's columns and the measures, e.g.
`fct_s`, `size_bytes`, `retrans_bytes`) and folded into its group's row by `fold`, or per
group (`per="group"`: `compute(transfers)` gets the group's rows as a DataFrame and
returns its value). Either way it becomes a column of metrics.csv (and, per transfer, of
transfer_metrics.csv), a column of `results.open(...).observations`, and a dependent
variable `analysis.dvs` may name. The registry lives in this process: the metrics are
computed where the analysis runs (`api.analyze`, `api.run`), never in a lab kernel.
No numpy or pandas here (config checking imports this module).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

LEVELS = ("transfer", "group")
FOLDS: dict[str, Callable[[list[float]], float]] = {
    "mean": lambda v: math.fsum(v) / len(v),
    "sum": math.fsum,
    "max": max,
    "min": min,
}


@dataclass(frozen=True)
class Metric:
    name: str
    summary: str
    per: str  # "transfer" or "group"
    compute: Callable[[Any], float]
    fold: str = "mean"  # per-transfer values into the group's (mean, sum, max, min)

    def group_value(self, values: list[float]) -> float:
        """The group's value from its transfers' (NaN when any is NaN, as the study's)."""
        if not values or any(math.isnan(v) for v in values):
            return float("nan")
        return float(FOLDS[self.fold](values))


METRICS: dict[str, Metric] = {}

# pathdiv's own metrics that go through this registry, as a user's would (their raw
# measures are computed from the captures in transfer.py)
BUILTIN = (
    Metric("burstiness", "packet-weighted mean burst of the server's data at its access "
           "link, in packets (frames re-timed as the link sends them, back to back within "
           "1.5 frame times; lower is less bursty; analysis/metrics/transfer.py: burst_pkts)",
           "transfer", lambda row: row["burst_pkts"], "mean"),
)
METRICS.update((m.name, m) for m in BUILTIN)


def register(metric: Metric, taken: tuple[str, ...], replace: bool = False) -> None:
    """Add `metric`; `taken` are the columns metrics.csv has without it."""
    name = metric.name
    if not name.isidentifier():
        raise ValueError(f"metric name {name!r}: expected a column name of letters, digits "
                         "and _ (not starting with a digit)")
    if name in taken:
        raise ValueError(f"metric {name!r} is a column pathdiv computes already; choose "
                         "another name")
    if name in METRICS and not replace:
        raise ValueError(f"metric {name!r} is registered ({METRICS[name].summary}); choose "
                         "another name or pass replace=True")
    if metric.per not in LEVELS:
        raise ValueError(f"metric {name!r}: per={metric.per!r}; expected one of "
                         f"{', '.join(LEVELS)}")
    if metric.fold not in FOLDS:
        raise ValueError(f"metric {name!r}: fold={metric.fold!r}; expected one of "
                         f"{', '.join(FOLDS)}")
    if not callable(metric.compute):
        raise ValueError(f"metric {name!r}: compute must be a function")
    METRICS[name] = metric


def as_number(name: str, value: Any) -> float:
    """A metric's value as a float, or the error naming the metric and what it returned."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"metric {name!r} returned {value!r}; expected a number") from None
