"""Post-hoc pairwise comparisons of factor levels, Holm-corrected per family.

For every dependent variable and every grouping (each independent variable on its own,
and the configuration = the combination of all of them) each pair of levels is compared
with Welch's t-test; the family of comparisons for one (variable, grouping) is corrected
with Holm's method.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

POSTHOC_COLUMNS = [
    "dv", "grouping", "level_a", "level_b", "mean_a", "mean_b", "mean_diff", "effect_pct",
    "t", "p", "p_holm", "significant",
]
CONFIGURATION = "configuration"


def configuration_labels(data: pd.DataFrame, ivs: Sequence[str]) -> pd.Series:
    """`switching/host` style label of each row's combination of factor levels."""
    labels = data[list(ivs)].astype(str)
    joined = labels.iloc[:, 0]
    for column in labels.columns[1:]:
        joined = joined + "/" + labels[column]
    return joined


def groupings(data: pd.DataFrame, ivs: Sequence[str]) -> dict[str, pd.Series]:
    """Each factor's level per row, plus the configuration when there are two factors."""
    result = {iv: data[iv].astype(str) for iv in ivs}
    if len(ivs) > 1:
        result[CONFIGURATION] = configuration_labels(data, ivs)
    return result


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as the input)."""
    m = len(p_values)
    order = np.argsort(p_values, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(p_values[index])))
        adjusted[index] = running
    return [float(x) for x in adjusted]


def welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Welch's unequal-variance t statistic and two-sided p-value."""
    if len(a) < 2 or len(b) < 2:
        return float("nan"), float("nan")
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    diff = float(a.mean() - b.mean())
    if va + vb == 0:
        # Two constant groups: identical means cannot differ, different means do surely.
        return (0.0, 1.0) if np.isclose(diff, 0.0) else (float(np.sign(diff)) * np.inf, 0.0)
    t = diff / np.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return float(t), float(2 * stats.t.sf(abs(t), dof))


def pairwise_comparisons(
    data: pd.DataFrame, ivs: Sequence[str], dvs: Sequence[str], alpha: float
) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for dv in dvs:
        values = data[dv].to_numpy(dtype=float)
        for name, labels in groupings(data, ivs).items():
            codes = labels.to_numpy()
            by_level = {level: values[codes == level] for level in sorted(set(codes))}
            family: list[dict[str, Any]] = []
            for a, b in combinations(by_level, 2):
                va, vb = by_level[a], by_level[b]
                t, p = welch(va, vb)
                family.append({
                    "dv": dv, "grouping": name, "level_a": a, "level_b": b,
                    "mean_a": float(va.mean()), "mean_b": float(vb.mean()),
                    "mean_diff": float(va.mean() - vb.mean()),
                    "effect_pct": (float((va.mean() - vb.mean()) / abs(vb.mean()) * 100)
                                   if vb.mean() != 0 else float("nan")),
                    "t": t, "p": p,
                })
            testable = [r for r in family if np.isfinite(r["p"])]
            if testable:
                adjusted = holm([r["p"] for r in testable])
                for row, p_adj in zip(testable, adjusted, strict=True):
                    row["p_holm"] = float(p_adj)
            for row in family:
                row.setdefault("p_holm", float("nan"))
                row["significant"] = bool(np.isfinite(row["p_holm"]) and row["p_holm"] < alpha)
            rows.extend(family)
    return pd.DataFrame(rows, columns=POSTHOC_COLUMNS)
