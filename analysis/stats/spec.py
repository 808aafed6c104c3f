"""What the statistics compare: clusters, independent and dependent variables, alpha.

`AnalysisSpec` mirrors the config's `analysis` section and defaults to the reference
study's design (two-way MANOVA per condition x flow type cluster). It holds names only;
`check_columns` says which of them a metrics table lacks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pathdiv.analysis.stats.compare_pairs import Held, compare_pairs

# Metrics where a smaller value is the better outcome (rankings sort them ascending).
LOWER_IS_BETTER_DEFAULT: tuple[str, ...] = (
    "fct_s",
    "excess_pct",
    "retrans_pct",
    "reorder_pct",
    "burstiness",  # the registered metric (analysis/metrics/registry.py): packets per burst
)


@dataclass(frozen=True)
class AnalysisSpec:
    """Which metrics columns are test clusters, independent and dependent variables."""

    clusters: tuple[str, ...] = ("condition", "flow_type")
    ivs: tuple[str, ...] = ("switching", "host")
    dvs: tuple[str, ...] = ("throughput_mbps", "goodput_mbps", "fct_s", "utilization")
    alpha: float = 0.05
    lower_is_better: tuple[str, ...] = field(default=LOWER_IS_BETTER_DEFAULT)
    reference: str | tuple[str, ...] | None = None  # published studies (analysis/references)
    min_effect_pct: float = 1.0  # smallest effect of interest, percent of the compared mean
    # comparisons of interest the report states first: levels a, b of one factor and the
    # other factors' levels the comparison holds, (a, b, ((factor, (levels, ...)), ...)),
    # none held: every level both sides have (the config: [a, b] or [a, b, {factor:
    # level or [levels]}], parsed by stats/compare_pairs.py; empty: each factor's levels
    # against its first)
    compare: tuple[tuple[str, str, Held], ...] = ()
    # levels that act on some levels of another factor only (the config's applies_to):
    # (factor, level, other factor, (levels of the other where it acts)), ...
    level_scope: tuple[tuple[str, str, str, tuple[str, ...]], ...] = ()

    def __post_init__(self) -> None:
        # Accept lists from YAML/JSON but store tuples so the spec stays hashable.
        for name in ("clusters", "ivs", "dvs", "lower_is_better"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise ValueError(
                    f"analysis.{name} is the string {value!r}; expected a list of column "
                    f"names, e.g. [{value!r}]"
                )
            object.__setattr__(self, name, tuple(value))
        object.__setattr__(self, "compare", compare_pairs(self.compare))
        object.__setattr__(self, "level_scope", tuple(
            (str(f), str(lv), str(o), tuple(str(x) for x in xs))
            for f, lv, o, xs in self.level_scope))
        if isinstance(self.reference, list):
            object.__setattr__(self, "reference", tuple(self.reference))
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(
                f"analysis.alpha is {self.alpha!r}; expected a probability between 0 and 1 "
                "(the study uses 0.05)"
            )
        if not 1 <= len(self.ivs) <= 2:
            raise ValueError(
                f"analysis.ivs is {list(self.ivs)!r}; expected one or two factor columns "
                "(a two-way MANOVA takes two)"
            )
        if not self.min_effect_pct >= 0:
            raise ValueError(
                f"analysis.min_effect_pct is {self.min_effect_pct!r}; expected a percentage "
                ">= 0 (the smallest difference worth reporting, default 1)"
            )
        if not self.dvs:
            raise ValueError("analysis.dvs is empty; expected at least one metric column")
        overlap = set(self.ivs) & set(self.clusters)
        if overlap:
            raise ValueError(
                f"column(s) {sorted(overlap)} are both a cluster and an independent "
                "variable in analysis; use each column in one role only"
            )

    def compare_as_config(self) -> list[list[Any]]:
        """`compare` as the config writes it: [a, b], or [a, b, {factor: [levels]}]."""
        return [[a, b, {f: list(v) for f, v in held}] if held else [a, b]
                for a, b, held in self.compare]

    @property
    def scopes(self) -> dict[str, dict[str, dict[str, tuple[str, ...]]]]:
        """level_scope as {factor: {level: {other factor: levels}}}."""
        out: dict[str, dict[str, dict[str, tuple[str, ...]]]] = {}
        for factor, level, other, levels in self.level_scope:
            out.setdefault(factor, {}).setdefault(level, {})[other] = levels
        return out

    @property
    def factors(self) -> tuple[str, ...]:
        return self.clusters + self.ivs

def check_columns(metrics: pd.DataFrame, spec: AnalysisSpec) -> None:
    """Raise if the metrics table lacks a factor column or every dependent variable."""
    missing = [c for c in spec.factors if c not in metrics.columns]
    if missing:
        raise ValueError(
            f"metrics.csv lacks factor column(s) {missing}; it has {list(metrics.columns)}. "
            "Set analysis.clusters / analysis.ivs in the config to columns that exist"
        )
    if not any(dv in metrics.columns for dv in spec.dvs):
        raise ValueError(
            f"metrics.csv has none of the dependent variables {list(spec.dvs)}; it has "
            f"{list(metrics.columns)}. Set analysis.dvs to metric columns that exist"
        )


def present(columns: Iterable[str], metrics: pd.DataFrame) -> list[str]:
    return [c for c in columns if c in metrics.columns]
