"""The study's statistics: two-way MANOVA per test cluster, then everything around it.

`analyze_metrics(metrics, spec)` is pure (a DataFrame in, a `StudyResults` out, no
files). Per cluster (e.g. noisy x short) it screens for degenerate input, then runs the
MANOVA with interaction, the type III univariate ANOVAs with partial eta squared,
Holm-corrected pairwise comparisons, the assumption checks and the rankings.
`StudyResults.summary()` is for people; the tidy DataFrames and `to_dict()` (the
content of `stats.json`) are for code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from pathdiv.analysis.stats import comparisons
from pathdiv.analysis.stats.anova import ANOVA_COLUMNS, type3_anova
from pathdiv.analysis.stats.assumptions import AssumptionCheck, check_assumptions
from pathdiv.analysis.stats.effects import NEGLIGIBLE, REAL, manova_effect_pct, screen
from pathdiv.analysis.stats.manova import MANOVA_COLUMNS, manova_table
from pathdiv.analysis.stats.posthoc import (
    POSTHOC_COLUMNS,
    configuration_labels,
    pairwise_comparisons,
)
from pathdiv.analysis.stats.rankings import (
    RANKING_COLUMNS,
    excess_traffic_table,
    rank_levels,
    subflow_table,
)
from pathdiv.analysis.stats.scope import analysis_tests, applies
from pathdiv.analysis.stats.screen import screen_cluster
from pathdiv.analysis.stats.spec import AnalysisSpec, check_columns, present

OK = "ok"
PARTIAL = "partial"
SKIPPED = "skipped"


@dataclass
class ClusterResult:
    """Everything computed for one test cluster (one combination of cluster levels)."""

    key: dict[str, str]
    n: int
    ivs: list[str]
    dvs: list[str]
    manova_dvs: list[str]
    status: str
    messages: list[str] = field(default_factory=list)
    manova: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=MANOVA_COLUMNS))
    anova: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=ANOVA_COLUMNS))
    posthoc: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=POSTHOC_COLUMNS))
    rankings: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=RANKING_COLUMNS))
    assumptions: list[AssumptionCheck] = field(default_factory=list)
    # when factor levels act on some levels only (config applies_to): the levels this
    # test used and the effects it is the test of; empty for the full design
    scope: dict[str, list[str]] = field(default_factory=dict)
    effects: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        base = " / ".join(f"{k}={v}" for k, v in self.key.items()) or "all observations"
        return f"{base} [{self.scope_text}]" if self.scope else base

    @property
    def scope_text(self) -> str:
        """'test of host, switching:host on switching in {..}; host in {..}' or ''."""
        if not self.scope:
            return ""
        used = "; ".join(f"{f} in {{{', '.join(v)}}}" for f, v in self.scope.items())
        return f"test of {', '.join(self.effects)} on {used}"

    def manova_p(self, effect: str, statistic: str = "pillai") -> float | None:
        """p-value of one MANOVA effect (e.g. `switching`), None when not computed."""
        rows = self.manova[(self.manova.effect == effect) & (self.manova.statistic == statistic)]
        return None if rows.empty else float(rows.p.iloc[0])

    def significant_effects(self, alpha: float, statistic: str = "pillai") -> list[str]:
        rows = self.manova[(self.manova.statistic == statistic) & (self.manova.p < alpha)]
        return list(rows.effect)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "scope": self.scope,
            "effects": self.effects,
            "n": self.n,
            "status": self.status,
            "ivs": self.ivs,
            "dvs": self.dvs,
            "manova_dvs": self.manova_dvs,
            "messages": self.messages,
            "manova": _records(self.manova),
            "anova": _records(self.anova),
            "posthoc": _records(self.posthoc),
            "rankings": _records(self.rankings),
            "assumptions": [a.to_dict() for a in self.assumptions],
        }


@dataclass
class StudyResults:
    spec: AnalysisSpec
    n_observations: int
    clusters: list[ClusterResult]
    excess_traffic: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    subflow_paths: pd.DataFrame = field(default_factory=pd.DataFrame)
    # per cluster, each comparison of interest x metric (pathdiv.analysis.stats.comparisons)
    comparisons: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=comparisons.COLUMNS))

    def table(self, name: str) -> pd.DataFrame:
        """One tidy table over all clusters (`manova`, `anova`, `posthoc`, `rankings`),
        with the cluster columns prepended."""
        if name not in {"manova", "anova", "posthoc", "rankings"}:
            raise ValueError(
                f"unknown table {name!r}; expected one of manova, anova, posthoc, rankings"
            )
        frames = []
        for cluster in self.clusters:
            frame = getattr(cluster, name).copy()
            for position, (k, v) in enumerate(cluster.key.items()):
                frame.insert(position, k, v)
            frames.append(frame)
        if not frames:
            return pd.DataFrame()
        non_empty = [f for f in frames if not f.empty]
        return pd.concat(non_empty, ignore_index=True) if non_empty else frames[0]

    def summary(self) -> str:
        """A plain-text digest: per cluster, the MANOVA verdicts and any problems."""
        s = self.spec
        lines = [
            f"Two-way MANOVA of {', '.join(s.dvs)} on {' x '.join(s.ivs)}, "
            f"per {' x '.join(s.clusters) or 'whole data set'} (alpha = {s.alpha}); "
            f"{self.n_observations} observations, {len(self.clusters)} clusters.",
        ]
        lines += [f"note: {n}" for n in self.notes]
        for c in self.clusters:
            lines.append(f"[{c.label}] n = {c.n}, {c.status}")
            for effect in dict.fromkeys(c.manova.effect):
                row = c.manova[(c.manova.effect == effect) & (c.manova.statistic == "pillai")]
                if row.empty:
                    continue
                r = row.iloc[0]
                verdict = "significant" if r.p < s.alpha else "not significant"
                lines.append(
                    f"  {effect}: Pillai's trace = {r.value:.4f}, F({r.num_df:g}, "
                    f"{r.den_df:g}) = {r.f:.3f}, p = {_fmt_p(r.p)} ({verdict}; largest "
                    f"effect {r.effect_pct:.2f} % of the mean)"
                )
            split = screen(c.manova, s.alpha, s.min_effect_pct)
            lines.append(f"  significant and >= {s.min_effect_pct:g} %: "
                         f"{', '.join(split[REAL]) or 'none'}")
            lines.append(f"  significant but negligible (< {s.min_effect_pct:g} %): "
                         f"{', '.join(split[NEGLIGIBLE]) or 'none'}")
            lines += [f"  ! {m}" for m in c.messages]
            violated = [a.name for a in c.assumptions if a.status == "violated"]
            if violated:
                lines.append(f"  assumptions violated: {', '.join(violated)}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "spec": {
                "clusters": list(self.spec.clusters),
                "ivs": list(self.spec.ivs),
                "dvs": list(self.spec.dvs),
                "alpha": self.spec.alpha,
                "lower_is_better": list(self.spec.lower_is_better),
                "min_effect_pct": self.spec.min_effect_pct,
                "level_scope": [list(x) for x in self.spec.level_scope],
                "compare": self.spec.compare_as_config(),
            },
            "n_observations": self.n_observations,
            "notes": self.notes,
            "clusters": [c.to_dict() for c in self.clusters],
            "excess_traffic": _records(self.excess_traffic),
            "comparisons": _records(self.comparisons),
        }


def _fmt_p(p: float) -> str:
    return "< .001" if p < 0.001 else f"{p:.3f}"


def _clean(value: Any) -> Any:
    """JSON-safe scalar: numpy types to Python, NaN/inf to None."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: _clean(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def analyze_cluster(
    data: pd.DataFrame, key: dict[str, str], spec: AnalysisSpec, dvs: list[str],
    ivs: tuple[str, ...] | None = None,
) -> ClusterResult:
    screen = screen_cluster(data, ivs or spec.ivs, dvs)
    result = ClusterResult(
        key=key, n=len(screen.data), ivs=screen.ivs, dvs=screen.anova_dvs,
        manova_dvs=screen.manova_dvs, status=OK, messages=list(screen.messages),
    )
    if not screen.fit_models:
        result.status = SKIPPED
        return result
    frame = screen.data
    if screen.fit_manova:
        try:
            result.manova = _finite(manova_table(frame, screen.ivs, screen.manova_dvs), "MANOVA",
                                    result.messages)
        except (np.linalg.LinAlgError, ValueError) as exc:
            result.messages.append(
                f"MANOVA could not be computed ({exc}); the univariate tests below still hold."
            )
    anova_frames = []
    for dv in screen.anova_dvs:
        try:
            anova_frames.append(type3_anova(frame, screen.ivs, dv))
        except (np.linalg.LinAlgError, ValueError) as exc:
            result.messages.append(f"ANOVA of {dv} could not be computed ({exc}).")
    if anova_frames:
        result.anova = pd.concat(anova_frames, ignore_index=True)
        if not result.manova.empty:
            result.manova["effect_pct"] = manova_effect_pct(result.manova, result.anova)
    result.posthoc = pairwise_comparisons(frame, screen.ivs, screen.anova_dvs, spec.alpha)
    result.rankings = rank_levels(frame, screen.ivs, screen.anova_dvs, spec.lower_is_better)
    if screen.manova_dvs:
        result.assumptions = check_assumptions(frame, screen.ivs, screen.manova_dvs, spec.alpha)
    if result.messages:
        result.status = PARTIAL
    return result


def _finite(table: pd.DataFrame, what: str, messages: list[str]) -> pd.DataFrame:
    """Drop rows whose statistics came out NaN/inf and say so, instead of showing NaN."""
    bad = ~np.isfinite(table[["value", "f", "p"]].to_numpy(dtype=float)).all(axis=1)
    if bad.any():
        effects = sorted(set(table.loc[bad, "effect"]))
        messages.append(
            f"{what} statistics for {', '.join(effects)} are undefined (numerically singular "
            "data); those rows are left out."
        )
    return table.loc[~bad].reset_index(drop=True)


def in_plan(metrics: pd.DataFrame, spec: AnalysisSpec) -> tuple[pd.DataFrame, str]:
    """The observations at combinations where every level acts (config applies_to), and
    a note naming the configurations left out (empty when none)."""
    scopes = spec.scopes
    if not scopes or not all(iv in metrics.columns for iv in spec.ivs):
        return metrics, ""
    combos = metrics[list(spec.ivs)].astype(str)
    keep = combos.apply(lambda r: applies(dict(r), scopes), axis=1).astype(bool)
    if keep.all():
        return metrics, ""
    left = sorted(set(configuration_labels(combos[~keep], spec.ivs)))
    return metrics[keep], (
        f"{int((~keep).sum())} observation(s) of {', '.join(left)} are not used: there a "
        "level does not act (applies_to in the config), so they repeat another "
        "configuration under a second name.")


def analyze_scoped(data: pd.DataFrame, key: dict[str, str], spec: AnalysisSpec,
                   dvs: list[str]) -> list[ClusterResult]:
    """One cluster's tests: the full design, or with applies_to one test per factor on
    the levels where it acts (pathdiv.analysis.stats.scope)."""
    if not spec.scopes or len(spec.ivs) != 2:
        return [analyze_cluster(data, key, spec, dvs)]
    levels = {iv: list(dict.fromkeys(data[iv].astype(str))) for iv in spec.ivs}
    tests = analysis_tests(levels, spec.ivs, spec.scopes)
    if len(tests) == 1 and all(tuple(levels[f]) == tests[0].levels[f] for f in spec.ivs):
        return [analyze_cluster(data, key, spec, dvs)]
    out = []
    for test in tests:
        keep = pd.Series(True, index=data.index)
        for factor, used in test.levels.items():
            keep &= data[factor].astype(str).isin(used)
        result = analyze_cluster(data[keep], key, spec, dvs, test.ivs)
        result.scope = {f: list(v) for f, v in test.levels.items()}
        result.effects = list(test.effects)
        out.append(result)
    return out


def analyze_metrics(metrics: pd.DataFrame, spec: AnalysisSpec | None = None) -> StudyResults:
    """Run the per-cluster analysis over a metrics table (one row per observation)."""
    spec = spec or AnalysisSpec()
    check_columns(metrics, spec)
    notes = []
    metrics, dropped = in_plan(metrics, spec)
    if dropped:
        notes.append(dropped)
    dvs = present(spec.dvs, metrics)
    missing = [dv for dv in spec.dvs if dv not in dvs]
    if missing:
        notes.append(f"dependent variable(s) {', '.join(missing)} not in metrics.csv; skipped.")
    clusters: list[ClusterResult] = []
    if spec.clusters:
        grouped = metrics.groupby(list(spec.clusters), sort=True, dropna=False, observed=True)
        for key, frame in grouped:
            values = key if isinstance(key, tuple) else (key,)
            labels = {c: str(v) for c, v in zip(spec.clusters, values, strict=True)}
            clusters += analyze_scoped(frame, labels, spec, dvs)
    else:
        clusters += analyze_scoped(metrics, {}, spec, dvs)
    excess = excess_traffic_table(metrics, spec.clusters, spec.ivs)
    return StudyResults(spec, len(metrics), clusters, excess, notes,
                        subflow_table(metrics, spec.ivs),
                        comparisons.compare(metrics, replace(spec, dvs=tuple(dvs) or spec.dvs)))
