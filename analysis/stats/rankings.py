"""Rankings of levels by mean with 95% confidence intervals and percent differences,
and the excess-traffic table (condition x flow type x configuration).

Percent differences follow the study's wording ("ps-mptcp's goodput is 1.65% greater
than ecmp-mptcp's"): each ranked level is compared with the next one down the ranking,
relative to that next level's mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from pathdiv.analysis.stats.posthoc import CONFIGURATION, configuration_labels, groupings

RANKING_COLUMNS = [
    "dv", "grouping", "rank", "level", "n", "mean", "sd", "ci_low", "ci_high",
    "better", "pct_vs_next",
]
CONFIDENCE = 0.95


def mean_ci(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Student-t confidence interval of the mean; a single value gives a zero-width one."""
    mean = float(values.mean())
    if len(values) < 2:
        return mean, mean
    half = float(stats.sem(values)) * float(stats.t.ppf((1 + confidence) / 2, len(values) - 1))
    return mean - half, mean + half


def percent_difference(value: float, reference: float) -> float | None:
    """(value - reference) / |reference| in percent; None when the reference is zero."""
    if reference == 0 or not np.isfinite(reference):
        return None
    return (value - reference) / abs(reference) * 100.0


def rank_levels(
    data: pd.DataFrame, ivs: Sequence[str], dvs: Sequence[str], lower_is_better: Sequence[str]
) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for dv in dvs:
        ascending = dv in lower_is_better
        values = data[dv].to_numpy(dtype=float)
        for name, labels in groupings(data, ivs).items():
            summary: list[dict[str, Any]] = []
            codes = labels.to_numpy()
            for level in dict.fromkeys(codes):
                v = values[codes == level]
                low, high = mean_ci(v)
                summary.append({
                    "dv": dv, "grouping": name, "level": str(level), "n": len(v),
                    "mean": float(v.mean()), "sd": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
                    "ci_low": low, "ci_high": high,
                    "better": "lower" if ascending else "higher",
                })
            summary.sort(key=lambda r: (r["mean"] if ascending else -r["mean"], r["level"]))
            for i, row in enumerate(summary):
                row["rank"] = i + 1
                nxt = summary[i + 1]["mean"] if i + 1 < len(summary) else None
                row["pct_vs_next"] = None if nxt is None else percent_difference(row["mean"], nxt)
            rows.extend(summary)
    return pd.DataFrame(rows, columns=RANKING_COLUMNS)


def excess_traffic_table(
    metrics: pd.DataFrame,
    clusters: Sequence[str],
    ivs: Sequence[str],
    column: str = "excess_pct",
) -> pd.DataFrame:
    """Mean excess traffic (percent beyond the payload) per cluster and configuration.

    Tidy: one row per (cluster levels..., configuration) with mean, sd and n. Empty when
    the metrics have no `column`.
    """
    keys = [*clusters, CONFIGURATION]
    out_columns = [*keys, "mean", "sd", "n"]
    if column not in metrics.columns or not all(c in metrics for c in [*clusters, *ivs]):
        return pd.DataFrame(columns=out_columns)
    frame = metrics[[*clusters, *ivs]].astype(str).copy()
    frame[CONFIGURATION] = configuration_labels(frame, ivs)
    frame["value"] = pd.to_numeric(metrics[column], errors="coerce")
    frame = frame.dropna(subset=["value"])
    if frame.empty:
        return pd.DataFrame(columns=out_columns)
    grouped = frame.groupby(keys, sort=True)["value"]
    table = grouped.agg(["mean", "std", "count"]).reset_index()
    table = table.rename(columns={"std": "sd", "count": "n"})
    table["sd"] = table["sd"].fillna(0.0)
    return table[out_columns]


SUBFLOW_COLUMNS = ("subflows", "shared_subflows", "distinct_paths", "cpu_ms_per_mb")


def subflow_table(metrics: pd.DataFrame, ivs: Sequence[str]) -> pd.DataFrame:
    """Per configuration, the means of the subflow columns metrics.csv has (subflows that
    carried data, subflows sharing a fabric link, distinct paths, CPU ms per MB)."""
    frames = []
    for column in SUBFLOW_COLUMNS:
        t = excess_traffic_table(metrics, [], ivs, column=column)
        if not t.empty:
            frames.append(t.set_index(CONFIGURATION)["mean"].rename(column))
    return pd.concat(frames, axis=1).reset_index() if frames else pd.DataFrame()
