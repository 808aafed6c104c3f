"""The comparisons of interest of a design, each estimated and judged (pure).

The report answers its question first: per test cluster, for each comparison of
interest (`analysis.compare`: pairs [a, b] of levels of one factor; by default each
factor's levels against its first) and metric, how much a differs from b, with the 95 %
CI, the p-value, and what that says. A comparison reads the observations of a and of b
at the other factors' levels both sides have (a level that acts on some levels only,
`applies_to`, is compared where it acts), pooled over those levels. With `applies_to`
a factor's levels are compared where its own test runs (pathdiv.analysis.stats.scope):
the RB design's switching levels on the vanilla hosts only, as its switching MANOVA and
the claims about switching use them. A pair may also hold other factors' levels itself,
`[ps-mptcp, ecmp-mptcp, {host: [vanilla, juggler]}]`: the study design's switching
levels on the study's own host levels, as its reference's claims use them (levels the
data lacks are passed over). The row's `held` says which levels a comparison kept
("host=vanilla"; empty when the other factors keep every level both sides have).

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
from pathdiv.analysis.stats.scope import analysis_tests
from pathdiv.analysis.stats.spec import AnalysisSpec, Held

BETTER, WORSE, NEGLIGIBLE, EQUIVALENT, INCONCLUSIVE = (
    "better", "worse", "negligible", "equivalent", "inconclusive")
COLUMNS = ["cluster", "factor", "a", "b", "held", "metric", "n_a", "n_b", "mean_a", "mean_b",
           "effect_pct", "ci_low_pct", "ci_high_pct", "p", "p_adj", "p_equiv",
           "p_equiv_adj", "detectable_pct", "finding"]


def pairs_of_interest(spec: AnalysisSpec,
                      metrics: pd.DataFrame) -> list[tuple[str, str, str, Held]]:
    """(factor, a, b, held) of every comparison of interest: `spec.compare`, or each IV's
    levels against its first (in the order the data first shows them), none held."""
    out: list[tuple[str, str, str, Held]] = []
    if spec.compare:
        for a, b, held in spec.compare:
            for factor in spec.ivs:
                if factor in metrics.columns:
                    seen = set(metrics[factor].astype(str))
                    if a in seen and b in seen:
                        out.append((factor, a, b, held))
                        break
        return out
    for factor in spec.ivs:
        if factor not in metrics.columns:
            continue
        levels = list(dict.fromkeys(metrics[factor].astype(str)))
        out += [(factor, level, levels[0], ()) for level in levels[1:]]
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


def factor_levels(frame: pd.DataFrame, spec: AnalysisSpec) -> dict[str, dict[str, tuple[str, ...]]]:
    """Per factor, the levels of the other factors its comparisons use: those of the
    factor's own test when levels apply on some levels only (`applies_to`), else none
    restricted (an empty dict)."""
    ivs = [iv for iv in spec.ivs if iv in frame.columns]
    if not spec.scopes or len(ivs) != 2 or len(spec.ivs) != 2:
        return {}
    levels = {iv: list(dict.fromkeys(frame[iv].astype(str))) for iv in ivs}
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for test in analysis_tests(levels, ivs, spec.scopes):
        for factor in ivs:
            if factor in test.effects:
                out[factor] = {f: v for f, v in test.levels.items() if f != factor}
    return out


def held_text(side_a: pd.DataFrame, frame: pd.DataFrame, others: Sequence[str]) -> str:
    """The other factors' levels a comparison keeps, where it keeps fewer than the
    cluster has: 'host=vanilla', 'switching in {ecmp-mptcp, ps-mptcp}'."""
    parts = []
    for other in others:
        kept = list(dict.fromkeys(side_a[other].astype(str)))
        if len(kept) < frame[other].astype(str).nunique():
            parts.append(f"{other}={kept[0]}" if len(kept) == 1
                         else f"{other} in {{{', '.join(kept)}}}")
    return "; ".join(parts)


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
        where = factor_levels(frame, spec)
        for factor, a, b, held_levels in pairs:
            others = [f for f in spec.ivs if f != factor and f in frame.columns]
            keep = pd.Series(True, index=frame.index)
            for other, used in [*where.get(factor, {}).items(), *held_levels]:
                if other in frame.columns:
                    keep &= frame[other].astype(str).isin(used)
            side_a, side_b = _sides(frame[keep], factor, a, b, others)
            held = held_text(side_a, frame, others)
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
                    "cluster": label, "factor": factor, "a": a, "b": b, "held": held,
                    "metric": metric,
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
