"""The comparisons of interest of a design, each estimated and judged (pure).

The report answers its question first: per test cluster, for each comparison of
interest (`analysis.compare`: pairs [a, b] of levels of one factor; by default each
factor's levels against its first) and metric, how much a differs from b, with the 95 %
CI, the p-value, and what that says. A comparison reads the observations of a and of b
at the other factors' levels both sides have (a level that acts on some levels only,
`applies_to`, is compared where it acts), pooled over those levels.

Per cluster the comparisons x metrics are one family: Welch's p-values and the TOST
p-values (equivalence within ± `analysis.min_effect_pct`) are Holm-adjusted within it.
What a row says (pathdiv.analysis.stats.verdicts' direction and equivalence tests
without a claim):

- `better` / `worse`: a significantly better (worse) than b, by at least the smallest
  effect of interest ("better" follows the metric: lower FCT is better);
- `negligible`: significant but smaller than that;
- `equivalent`: not significantly different, and equivalence within ± the smallest
  effect of interest shown;
- `inconclusive`: neither, with the smallest effect the comparison could have detected.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pathdiv.analysis.stats import verdicts as v
from pathdiv.analysis.stats.posthoc import holm
from pathdiv.analysis.stats.spec import AnalysisSpec

BETTER, WORSE, NEGLIGIBLE, EQUIVALENT, INCONCLUSIVE = (
    "better", "worse", "negligible", "equivalent", "inconclusive")
COLUMNS = ["cluster", "factor", "a", "b", "metric", "n_a", "n_b", "mean_a", "mean_b",
           "effect_pct", "ci_low_pct", "ci_high_pct", "p", "p_adj", "p_equiv",
           "p_equiv_adj", "detectable_pct", "finding"]


def pairs_of_interest(spec: AnalysisSpec, metrics: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(factor, a, b) of every comparison of interest: `spec.compare`, or each IV's levels
    against its first (in the order the data first shows them)."""
    out = []
    if spec.compare:
        for a, b in spec.compare:
            for factor in spec.ivs:
                if factor in metrics.columns:
                    seen = set(metrics[factor].astype(str))
                    if a in seen and b in seen:
                        out.append((factor, a, b))
                        break
        return out
    for factor in spec.ivs:
        if factor not in metrics.columns:
            continue
        levels = list(dict.fromkeys(metrics[factor].astype(str)))
        out += [(factor, level, levels[0]) for level in levels[1:]]
    return out


def _sides(frame: pd.DataFrame, factor: str, a: str, b: str,
           others: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """a's and b's observations at the other factors' levels both sides have."""
    side_a = frame[frame[factor].astype(str) == a]
    side_b = frame[frame[factor].astype(str) == b]
    for other in others:
        shared = set(side_a[other].astype(str)) & set(side_b[other].astype(str))
        side_a = side_a[side_a[other].astype(str).isin(shared)]
        side_b = side_b[side_b[other].astype(str).isin(shared)]
    return side_a, side_b


def _finding(effect: float, p_adj: float, p_equiv_adj: float, higher_is_better: bool,
             alpha: float, min_effect_pct: float) -> str:
    direction = v.judge_direction(effect, p_adj, higher_is_better, alpha, min_effect_pct)
    if direction == v.AGREE:
        return BETTER
    if direction == v.DISAGREE:
        return WORSE
    if direction == v.NEGLIGIBLE:
        return NEGLIGIBLE
    if np.isfinite(p_equiv_adj) and p_equiv_adj < alpha:
        return EQUIVALENT
    return INCONCLUSIVE


def compare(metrics: pd.DataFrame, spec: AnalysisSpec) -> pd.DataFrame:
    """One row per (cluster, comparison of interest, metric) (module docstring)."""
    pairs = pairs_of_interest(spec, metrics)
    clusters = [c for c in spec.clusters if c in metrics.columns]
    groups: list[tuple[str, pd.DataFrame]] = []
    if clusters:
        for key, frame in metrics.groupby(clusters, sort=False):
            values = key if isinstance(key, tuple) else (key,)
            groups.append((" / ".join(str(x) for x in values), frame))
    else:
        groups.append(("all observations", metrics))
    rows: list[dict[str, Any]] = []
    for label, frame in groups:
        family: list[dict[str, Any]] = []
        for factor, a, b in pairs:
            others = [f for f in spec.ivs if f != factor and f in frame.columns]
            side_a, side_b = _sides(frame, factor, a, b, others)
            for metric in spec.dvs:
                if metric not in frame.columns:
                    continue
                va = pd.to_numeric(side_a[metric], errors="coerce").dropna().to_numpy(float)
                vb = pd.to_numeric(side_b[metric], errors="coerce").dropna().to_numpy(float)
                if not len(va) or not len(vb):
                    continue
                est = v.estimate(va, vb, spec.alpha)
                margin = spec.min_effect_pct / 100.0 * abs(est.mean_b)
                higher = metric not in spec.lower_is_better
                family.append({
                    "cluster": label, "factor": factor, "a": a, "b": b, "metric": metric,
                    "n_a": est.n_a, "n_b": est.n_b, "mean_a": est.mean_a,
                    "mean_b": est.mean_b, "effect_pct": est.effect_pct,
                    "ci_low_pct": est.ci_low_pct, "ci_high_pct": est.ci_high_pct,
                    "p": est.p, "p_equiv": v.margin_p(va, vb, v.EQUIVALENCE, margin, higher),
                    "detectable_pct": est.detectable_pct, "_higher": higher})
        for column in ("p", "p_equiv"):
            finite = [r for r in family if np.isfinite(r[column])]
            for r, adjusted in zip(finite, holm([r[column] for r in finite]) if finite
                                   else [], strict=True):
                r[f"{column}_adj"] = adjusted
        for r in family:
            r.setdefault("p_adj", float("nan"))
            r.setdefault("p_equiv_adj", float("nan"))
            r["finding"] = _finding(r["effect_pct"], r["p_adj"], r["p_equiv_adj"],
                                    r.pop("_higher"), spec.alpha, spec.min_effect_pct)
        rows += family
    return pd.DataFrame(rows, columns=COLUMNS)
