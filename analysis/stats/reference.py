"""A published study's figures beside ours, each with an agreement mark (pure).

A reference is a YAML file in analysis/references/ (`analysis.reference` names it):

    name, study, source, missing      what it is, where its numbers come from, what is not
                                      stored (never estimated)
    excess_traffic: [{condition, flow_type, configurations, low_pct, high_pct, source}]
                                      the study's excess-traffic table (Table IV), a range
                                      per cell; configurations: `all` or a list
    directions: [{id, claim, where, factor, pairs: [[better, worse], ...], metrics,
                  source}]            each effect the study reports: in the clusters
                                      matching `where`, level `better` of `factor` beats
                                      `worse` on each metric (in that metric's better
                                      direction: lower FCT, higher goodput, ...)

`compare_directions` marks every (claim, cluster, pair, metric) with our Holm-corrected
post-hoc comparison: SAME_SIGNIFICANT, SAME_NOT_SIGNIFICANT or OPPOSITE (NOT_MEASURED
when our data lack the levels or the metric). `compare_excess` puts our excess-traffic
means next to the study's ranges.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from pathdiv.analysis.stats.posthoc import CONFIGURATION

REFERENCE_DIR = Path(__file__).resolve().parents[1] / "references"
SAME_SIGNIFICANT = "same direction and significant"
SAME_NOT_SIGNIFICANT = "same direction, not significant"
OPPOSITE = "opposite"
NOT_MEASURED = "not measured"
DIRECTION_COLUMNS = [
    "claim_id", "claim", "cluster", "metric", "better", "worse", "mean_better",
    "mean_worse", "p_holm", "mark",
]
EXCESS_COLUMNS = ["condition", "flow_type", "configuration", "ours_pct", "study_pct", "versus"]


class ReferenceError(ValueError):
    """A reference file that is missing or malformed."""


@dataclass(frozen=True)
class Direction:
    id: str
    claim: str
    where: dict[str, str]
    factor: str
    pairs: list[tuple[str, str]]
    metrics: list[str]
    source: str = ""


@dataclass(frozen=True)
class ExcessRange:
    condition: str
    flow_type: str
    configurations: str | list[str]
    low_pct: float
    high_pct: float
    source: str = ""

    def covers(self, configuration: str) -> bool:
        return self.configurations == "all" or configuration in self.configurations


@dataclass(frozen=True)
class Reference:
    name: str
    study: str
    source: str
    missing: str = ""
    excess: list[ExcessRange] = field(default_factory=list)
    directions: list[Direction] = field(default_factory=list)


def available() -> list[str]:
    """Names of the references shipped in analysis/references/."""
    return sorted(p.stem for p in REFERENCE_DIR.glob("*.yaml"))


def _need(data: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in data:
        raise ReferenceError(f"{where}: key {key!r} missing; expected {key}: ...")
    return data[key]


def parse_reference(data: Any, where: str = "reference") -> Reference:
    if not isinstance(data, Mapping):
        raise ReferenceError(f"{where}: expected a mapping, got {data!r}")
    directions = []
    for i, d in enumerate(data.get("directions") or []):
        at = f"{where}: directions[{i}]"
        pairs = _need(d, "pairs", at)
        if not all(isinstance(p, list | tuple) and len(p) == 2 for p in pairs):
            raise ReferenceError(f"{at}.pairs: {pairs!r}; expected [[better, worse], ...]")
        directions.append(Direction(
            str(_need(d, "id", at)), str(_need(d, "claim", at)),
            {str(k): str(v) for k, v in (d.get("where") or {}).items()},
            str(_need(d, "factor", at)), [(str(a), str(b)) for a, b in pairs],
            [str(m) for m in _need(d, "metrics", at)], str(d.get("source", ""))))
    excess = []
    for i, e in enumerate(data.get("excess_traffic") or []):
        at = f"{where}: excess_traffic[{i}]"
        configs = e.get("configurations", "all")
        excess.append(ExcessRange(
            str(_need(e, "condition", at)), str(_need(e, "flow_type", at)),
            configs if configs == "all" else [str(c) for c in configs],
            float(_need(e, "low_pct", at)), float(_need(e, "high_pct", at)),
            str(e.get("source", ""))))
    return Reference(str(_need(data, "name", where)), str(_need(data, "study", where)),
                     str(_need(data, "source", where)), str(data.get("missing", "")),
                     excess, directions)


def load_reference(name: str) -> Reference:
    """A shipped reference by name (`seed001`) or a YAML file by path."""
    path = Path(name) if name.endswith(".yaml") else REFERENCE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ReferenceError(f"analysis.reference: {name!r} is not a reference; choose one "
                             f"of {', '.join(available())} or give a .yaml path")
    return parse_reference(yaml.safe_load(path.read_text()), str(path))


def _matches(key: Mapping[str, str], where: Mapping[str, str]) -> bool:
    return all(key.get(k) == v for k, v in where.items())


def _label(key: Mapping[str, str]) -> str:
    return " / ".join(f"{k}={v}" for k, v in key.items()) or "all observations"


def mark(better_mean: float, worse_mean: float, lower_is_better: bool, p_holm: float,
         alpha: float) -> str:
    """The agreement of our means (and Holm p) with 'better beats worse'."""
    if pd.isna(better_mean) or pd.isna(worse_mean):
        return NOT_MEASURED
    diff = worse_mean - better_mean if lower_is_better else better_mean - worse_mean
    if diff <= 0:
        return OPPOSITE
    return SAME_SIGNIFICANT if pd.notna(p_holm) and p_holm < alpha else SAME_NOT_SIGNIFICANT


def compare_directions(
    reference: Reference,
    clusters: Sequence[tuple[dict[str, str], pd.DataFrame]],
    lower_is_better: Sequence[str],
    alpha: float,
) -> pd.DataFrame:
    """One row per (claim, matching cluster, pair, metric) with our figures and the mark.

    `clusters` holds each test cluster's key and its post-hoc table (the columns of
    pathdiv.analysis.stats.posthoc.POSTHOC_COLUMNS)."""
    rows = []
    for d in reference.directions:
        for key, posthoc in clusters:
            if not _matches(key, d.where):
                continue
            for better, worse in d.pairs:
                for metric in d.metrics:
                    hit = posthoc[(posthoc.dv == metric) & (posthoc.grouping == d.factor)
                                  & (((posthoc.level_a == better) & (posthoc.level_b == worse))
                                     | ((posthoc.level_a == worse)
                                        & (posthoc.level_b == better)))]
                    nan = float("nan")
                    mb = mw = p = nan
                    if not hit.empty:
                        r = hit.iloc[0]
                        flip = r.level_a != better
                        mb, mw = (r.mean_b, r.mean_a) if flip else (r.mean_a, r.mean_b)
                        p = r.p_holm
                    rows.append({
                        "claim_id": d.id, "claim": d.claim, "cluster": _label(key),
                        "metric": metric, "better": better, "worse": worse,
                        "mean_better": mb, "mean_worse": mw, "p_holm": p,
                        "mark": mark(mb, mw, metric in lower_is_better, p, alpha),
                    })
    return pd.DataFrame(rows, columns=DIRECTION_COLUMNS)


def compare_excess(reference: Reference, ours: pd.DataFrame) -> pd.DataFrame:
    """Our excess traffic per (condition, flow type, configuration) beside the study's
    range: `versus` says within / below / above it, or that the study gives no figure.

    `ours` is StudyResults.excess_traffic (columns condition, flow_type, configuration,
    mean)."""
    rows = []
    if (not reference.excess or ours.empty
            or not {"condition", "flow_type"} <= set(ours.columns)):
        return pd.DataFrame(columns=EXCESS_COLUMNS)
    for r in ours.itertuples(index=False):
        row = {"condition": str(r.condition), "flow_type": str(r.flow_type),
               "configuration": str(getattr(r, CONFIGURATION)), "ours_pct": float(r.mean)}
        found = [e for e in reference.excess
                 if e.condition == row["condition"] and e.flow_type == row["flow_type"]
                 and e.covers(row["configuration"])]
        if found:
            e = found[0]
            row["study_pct"] = f"{e.low_pct:g}–{e.high_pct:g}"
            row["versus"] = ("within" if e.low_pct <= row["ours_pct"] <= e.high_pct else
                             "below" if row["ours_pct"] < e.low_pct else "above")
        else:
            row["study_pct"] = "–"
            row["versus"] = "no figure in the reference"
        rows.append(row)
    return pd.DataFrame(rows, columns=EXCESS_COLUMNS)


def summarise_marks(table: pd.DataFrame) -> dict[str, int]:
    """How many comparisons got each mark."""
    return {m: int((table["mark"] == m).sum())
            for m in (SAME_SIGNIFICANT, SAME_NOT_SIGNIFICANT, OPPOSITE, NOT_MEASURED)}
