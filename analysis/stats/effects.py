"""Effect sizes in the metric's own terms, and the screen for negligible effects (pure).

On the virtual clock a 0.1 % difference can be "significant" (p < 1e-20): a p-value alone
cannot tell a reader whether an effect matters. Beside every p-value the analysis puts the
effect as a percentage of the mean:

- a pair of levels (post-hoc): (mean_a - mean_b) / |mean_b| x 100;
- a main effect (ANOVA): the spread of the factor's level means, (largest - smallest) /
  |grand mean| x 100;
- an interaction: the largest departure of a cell mean from what the two main effects
  predict (cell - row - column + grand), over |grand mean| x 100;
- a MANOVA effect: the largest of its metrics' ANOVA effect percentages.

`screen` sorts significant effects into "significant and at least min_effect_pct" and
"significant but negligible" (the config's `analysis.min_effect_pct`, default 1 %).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

REAL = "significant, at least the smallest effect of interest"
NEGLIGIBLE = "significant but negligible"
NOT_SIGNIFICANT = "not significant"


def _pct(value: float, reference: float) -> float:
    if not np.isfinite(value) or not np.isfinite(reference) or reference == 0:
        return float("nan")
    return value / abs(reference) * 100.0


def main_effect_pct(data: pd.DataFrame, factor: str, dv: str) -> float:
    """Spread of the level means of `factor` as a percentage of the grand mean."""
    values = pd.to_numeric(data[dv], errors="coerce")
    means = values.groupby(data[factor].astype(str)).mean().dropna()
    if len(means) < 2:
        return float("nan")
    return _pct(float(means.max() - means.min()), float(values.mean()))


def interaction_pct(data: pd.DataFrame, ivs: Sequence[str], dv: str) -> float:
    """Largest departure of a cell mean from the additive prediction, % of the grand mean."""
    a, b = ivs
    values = pd.to_numeric(data[dv], errors="coerce")
    frame = pd.DataFrame({"a": data[a].astype(str), "b": data[b].astype(str), "y": values})
    grand = float(frame.y.mean())
    cells = frame.groupby(["a", "b"]).y.mean()
    rows = frame.groupby("a").y.mean()
    cols = frame.groupby("b").y.mean()
    departures = [abs(m - rows[i] - cols[j] + grand) for (i, j), m in cells.items()]
    return _pct(max(departures), grand) if departures else float("nan")


def anova_effect_pct(anova: pd.DataFrame, data: pd.DataFrame,
                     ivs: Sequence[str]) -> pd.Series:
    """effect_pct for each row of an ANOVA table (NaN for the intercept and residual)."""
    out = []
    for r in anova.itertuples(index=False):
        if r.effect in ivs:
            out.append(main_effect_pct(data, str(r.effect), str(r.dv)))
        elif len(ivs) == 2 and r.effect == ":".join(ivs):
            out.append(interaction_pct(data, ivs, str(r.dv)))
        else:
            out.append(float("nan"))
    return pd.Series(out, index=anova.index, dtype=float)


def manova_effect_pct(manova: pd.DataFrame, anova: pd.DataFrame) -> pd.Series:
    """Per MANOVA row: the largest effect percentage of that effect over the metrics."""
    if anova.empty or "effect_pct" not in anova.columns:
        return pd.Series(float("nan"), index=manova.index, dtype=float)
    largest = anova.groupby("effect").effect_pct.apply(
        lambda s: float(s.abs().max()) if s.notna().any() else float("nan"))
    return manova.effect.map(largest).astype(float)


def verdict(p: float, effect_pct: float, alpha: float, min_effect_pct: float) -> str:
    """REAL / NEGLIGIBLE / NOT_SIGNIFICANT for one test."""
    if not (np.isfinite(p) and p < alpha):
        return NOT_SIGNIFICANT
    if np.isfinite(effect_pct) and abs(effect_pct) >= min_effect_pct:
        return REAL
    return NEGLIGIBLE


def _p(p: float) -> str:
    return "< .001" if p < 0.001 else f"= {p:.3f}"


def screen(manova: pd.DataFrame, alpha: float, min_effect_pct: float,
           statistic: str = "pillai") -> dict[str, list[str]]:
    """The significant MANOVA effects split into REAL and NEGLIGIBLE, as
    'effect (p, largest effect %)' strings."""
    out: dict[str, list[str]] = {REAL: [], NEGLIGIBLE: []}
    if manova.empty:
        return out
    rows = manova[manova.statistic == statistic]
    for r in rows.itertuples(index=False):
        pct = float(getattr(r, "effect_pct", float("nan")))
        kind = verdict(float(r.p), pct, alpha, min_effect_pct)
        if kind != NOT_SIGNIFICANT:
            out[kind].append(f"{r.effect} (p {_p(r.p)}, largest effect {pct:.2f} %)")
    return out


def screen_anova(anova: pd.DataFrame, alpha: float,
                 min_effect_pct: float) -> dict[str, list[str]]:
    """The significant between-subjects effects (one per metric) split into REAL and
    NEGLIGIBLE, as 'effect on metric (p, effect %)' strings."""
    out: dict[str, list[str]] = {REAL: [], NEGLIGIBLE: []}
    if anova.empty:
        return out
    rows = anova[~anova.effect.isin(["Intercept", "Residual"])]
    for r in rows.itertuples(index=False):
        kind = verdict(float(r.p), float(r.effect_pct), alpha, min_effect_pct)
        if kind != NOT_SIGNIFICANT:
            out[kind].append(f"{r.effect} on {r.dv} (p {_p(r.p)}, {r.effect_pct:.2f} %)")
    return out
