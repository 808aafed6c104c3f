"""Power before the runs: what each cell of a plan can detect, from recorded runs (pure).

`pathdiv check` asks, per cell of the plan (flow type x factor levels) and metric of
interest (`analysis.dvs`), two questions before anything runs, from the spread of
recorded observations of the same cell (a committed reproduction of the config, this
machine's last run of it, or a pilot):

- the smallest difference between this cell and another with the same spread that the
  plan's observations find significant in 80 % of repeats (two-sided, `analysis.alpha`),
  as a percentage of the cell's mean (pathdiv.analysis.stats.power);
- the repetitions that would find `analysis.min_effect_pct` so;

and names the cells with more than one mode (a retransmission timeout or none,
pathdiv.analysis.stats.stability), with the repetitions their rarest mode needs to be
expected five times. A cell's repetitions are its observations divided by the
observations one repetition gives it (the plan's).
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pathdiv.analysis.stats import power, stability

COLUMNS = ["cell", "metric", "n", "recorded", "mean", "sd", "detectable_pct",
           "repetitions_for_min_effect", "modes", "repetitions_for_modes"]


def read_csvs(blobs: Sequence[bytes]) -> pd.DataFrame:
    """The observations of several metrics.csv files' contents, together."""
    return pd.concat([pd.read_csv(io.BytesIO(b)) for b in blobs], ignore_index=True)


def _reps(n: float, per_rep: float) -> float:
    if not (np.isfinite(n) and np.isfinite(per_rep)) or per_rep <= 0:
        return float("nan")
    return float(math.ceil(n / per_rep - 1e-9))


def cell_power(recorded: pd.DataFrame, planned: Mapping[tuple[str, ...], int],
               per_repetition: Mapping[tuple[str, ...], float], columns: Sequence[str],
               metrics: Sequence[str], alpha: float = 0.05, min_effect_pct: float = 1.0,
               level: float = power.POWER) -> pd.DataFrame:
    """One row per (planned cell, metric): the module docstring's figures. `planned`
    maps a cell (its values of `columns`, in order) to the observations the plan gives
    it, `per_repetition` to those one repetition gives; `recorded` holds observations
    with those columns (a cell it lacks has NaN figures)."""
    rows: list[dict[str, Any]] = []
    have = all(c in recorded.columns for c in columns)
    groups = {}
    if have and not recorded.empty:
        for key, frame in recorded.groupby(list(columns), sort=False):
            levels = key if isinstance(key, tuple) else (key,)
            groups[tuple(str(x) for x in levels)] = frame
    for cell, n in planned.items():
        frame = groups.get(tuple(cell))
        for metric in metrics:
            values = (pd.to_numeric(frame[metric], errors="coerce").dropna().to_numpy(float)
                      if frame is not None and metric in frame.columns else np.array([]))
            mean = float(values.mean()) if len(values) else float("nan")
            sd = float(values.std(ddof=1)) if len(values) > 1 else float("nan")
            detectable = power.detectable_pct(sd, sd, n, n, mean, alpha, level)
            need = (power.needed_n(sd, sd, min_effect_pct / 100.0 * abs(mean), alpha, level)
                    if np.isfinite(mean) and mean != 0 else float("nan"))
            modes = stability.split_modes(list(values)) if len(values) else []
            rare = stability.needed_for_modes(modes)
            rows.append({"cell": " / ".join(cell), "metric": metric, "n": n,
                         "recorded": len(values), "mean": mean, "sd": sd,
                         "detectable_pct": detectable,
                         "repetitions_for_min_effect": _reps(need, per_repetition[cell]),
                         "modes": stability.modes_text(modes) if len(modes) > 1 else "",
                         "repetitions_for_modes": _reps(float(rare), per_repetition[cell])
                         if rare else float("nan")})
    return pd.DataFrame(rows, columns=COLUMNS)


def _pct(x: float) -> str:
    if not np.isfinite(x):
        return "?"
    return f"{x:.2g}" if x < 10 else f"{x:.0f}"


def _whole(x: float) -> str:
    return f"{int(x)}" if np.isfinite(x) else "?"


def text(table: pd.DataFrame, source: str, alpha: float, min_effect_pct: float,
         repetitions: str) -> list[str]:
    """`pathdiv check`'s lines: per cell the detectable effect of each metric (% of the
    cell's mean) and the repetitions for the smallest effect of interest, then the
    cells with more than one mode."""
    if table.empty:
        return []
    metrics = list(dict.fromkeys(table.metric))
    width = max(len(c) for c in table.cell)
    lines = [f"power ({source}; two-sided alpha {alpha:g}, 80 % power): per cell the "
             f"smallest difference its observations detect, % of its mean, and the "
             f"repetitions that detect {min_effect_pct:g} % (analysis.min_effect_pct; the "
             f"plan has {repetitions}):",
             "  " + "cell".ljust(width) + "    n  " + "  ".join(m.ljust(20) for m in metrics)]
    for cell, rows in table.groupby("cell", sort=False):
        parts = []
        for metric in metrics:
            r = rows[rows.metric == metric].iloc[0]
            parts.append(("no recorded runs" if not r.recorded else
                          f">= {_pct(r.detectable_pct)} % ({_whole(r.repetitions_for_min_effect)}"
                          " reps)").ljust(20))
        lines.append(f"  {str(cell).ljust(width)} {int(rows.n.iloc[0]):>4}  " + "  ".join(parts))
    bimodal = table[table.modes != ""]
    if not bimodal.empty:
        lines.append(f"bimodal cells ({len(bimodal)}; a mean carried by a rare mode, e.g. "
                     "retransmission timeouts: the rarest mode needs 5 expected "
                     "observations):")
        for r in bimodal.itertuples(index=False):
            lines.append(f"  {r.cell} {r.metric}: {r.modes}; needs "
                         f"{_whole(r.repetitions_for_modes)} repetitions")
    return lines
