"""Every claim of a reference marked against our observations (pure).

`mark_claims(reference, metrics, ...)` takes metrics.csv (one row per observation) and
gives one row per (claim, cluster, compared pair, metric): the paper's figure, ours, the
two means, standard deviations and counts, Welch's t-test p-value (Holm-corrected within
the claim), the effect as a percentage of the compared level's mean, the mark and whether it agrees.

Marks: for comparisons, the direction of our difference and its significance (same
direction and significant / same direction, not significant / opposite, not significant
/ opposite and significant), or `not measured` when our data lack a side. For Table IV
cells, where our mean lies: within the tolerance, below, above.

What agrees depends on the claim's kind (pathdiv.analysis.stats.claims):
better: same direction, and significant when the paper states significance; not_worse:
not opposite and significant; not_better: not same direction and significant;
no_difference: not significant; figure: same sign as the paper's percentage; best: a
has the best mean of the configurations in scope; excess: within the tolerance.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pathdiv.analysis.stats.claims import (
    Claim,
    Reference,
    in_study,
    scoped,
    side_label,
    side_rows,
)
from pathdiv.analysis.stats.effects import NOT_SIGNIFICANT, REAL, verdict
from pathdiv.analysis.stats.posthoc import holm, welch

SAME_SIGNIFICANT = "same direction and significant"
SAME_NOT_SIGNIFICANT = "same direction, not significant"
OPPOSITE = "opposite, not significant"
OPPOSITE_SIGNIFICANT = "opposite and significant"
NOT_MEASURED = "not measured"
WITHIN = "within {tol:g} points"
BELOW = "below"
ABOVE = "above"
YES, NO, UNKNOWN = "yes", "no", "–"
COLUMNS = [
    "reference", "claim_id", "section", "kind", "claim", "scope", "cluster", "metric",
    "a", "b", "paper", "ours", "mean_a", "mean_b", "sd_a", "sd_b", "n_a", "n_b", "p", "p_holm",
    "effect_pct", "practical", "mark", "agrees",
]


def percent_of(a: float, b: float) -> float:
    """(a - b) as a percentage of |b|; NaN when b is 0 or missing."""
    if not np.isfinite(a) or not np.isfinite(b) or b == 0:
        return float("nan")
    return (a - b) / abs(b) * 100.0


def direction_mark(effect_pct: float, better_is_higher: bool, p: float, alpha: float) -> str:
    """Our difference a - b against the claim 'a beats b'."""
    if not np.isfinite(effect_pct):
        return NOT_MEASURED
    same = effect_pct > 0 if better_is_higher else effect_pct < 0
    significant = bool(np.isfinite(p) and p < alpha)
    if same:
        return SAME_SIGNIFICANT if significant else SAME_NOT_SIGNIFICANT
    return OPPOSITE_SIGNIFICANT if significant else OPPOSITE


def agrees(claim: Claim, mark: str, effect_pct: float, best: bool | None = None) -> str:
    """yes / no / – (not measured) for one row of a claim (see the module docstring)."""
    if mark == NOT_MEASURED:
        return UNKNOWN
    kind = claim.kind
    if kind == "better":
        ok = mark == SAME_SIGNIFICANT or (claim.significance != "stated"
                                          and mark == SAME_NOT_SIGNIFICANT)
    elif kind == "not_worse":
        ok = mark != OPPOSITE_SIGNIFICANT
    elif kind == "not_better":
        ok = mark != SAME_SIGNIFICANT
    elif kind == "no_difference":
        ok = mark in (SAME_NOT_SIGNIFICANT, OPPOSITE)
    elif kind == "figure":
        ok = np.sign(effect_pct) == np.sign(claim.paper_pct or 0.0)
    elif kind == "best":
        ok = bool(best)
    else:  # excess
        ok = mark.startswith("within")
    return YES if ok else NO


def practical(p: float, effect_pct: float, alpha: float, min_effect_pct: float) -> str:
    """Whether a significant difference is large enough to matter (analysis.min_effect_pct):
    the screen of pathdiv.analysis.stats.effects, worded for the claim table."""
    kind = verdict(p, effect_pct, alpha, min_effect_pct)
    if kind == NOT_SIGNIFICANT:
        return "not significant" if np.isfinite(p) else ""
    if kind == REAL:
        return f"significant, >= {min_effect_pct:g} %"
    return f"significant but negligible (< {min_effect_pct:g} %)"


PAPER_TEXT = {"better": "a better", "not_worse": "b never significantly better",
              "not_better": "a not better", "no_difference": "no significant difference"}


def _paper_text(claim: Claim) -> str:
    """What the paper says about one comparison, in a few words."""
    if claim.kind == "figure":
        return f"{claim.paper_pct:+g} %"
    text = PAPER_TEXT.get(claim.kind, claim.kind)
    if claim.kind == "better":
        text += {"stated": ", significant", "means only": " (means only)"}.get(
            claim.significance, " (significance not stated)")
    return text


def _label(key: dict[str, str]) -> str:
    return " / ".join(f"{k}={v}" for k, v in key.items()) or "all observations"


def _sd(values: np.ndarray) -> float:
    """The sample standard deviation (NaN below two observations)."""
    return float(values.std(ddof=1)) if len(values) > 1 else float("nan")


def _values(frame: pd.DataFrame, metric: str) -> np.ndarray:
    if metric not in frame.columns:
        return np.array([])
    return pd.to_numeric(frame[metric], errors="coerce").dropna().to_numpy(dtype=float)


def _row(reference: Reference, claim: Claim, key: dict[str, str], metric: str,
         a: str, b: str, **values: Any) -> dict[str, Any]:
    return {"reference": reference.name, "claim_id": claim.id, "section": claim.section,
            "kind": claim.kind, "claim": claim.claim, "scope": claim.scope_text(),
            "cluster": _label(key), "metric": metric, "a": a, "b": b, **values}


def _pair_rows(reference: Reference, claim: Claim, key: dict[str, str], data: pd.DataFrame,
               lower_is_better: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for a_side, b_side in claim.compare:
        for metric in claim.metrics:
            va = _values(side_rows(data, a_side), metric)
            if claim.kind == "excess":
                mean = float(va.mean()) if len(va) else float("nan")
                rows.append(_row(reference, claim, key, metric, side_label(a_side), "",
                                 paper=f"{claim.paper_pct:g} %",
                                 ours="" if not len(va) else f"{mean:.2f} %",
                                 mean_a=mean, mean_b=claim.paper_pct, sd_a=_sd(va),
                                 sd_b=float("nan"), n_a=len(va), n_b=0,
                                 p=float("nan"), effect_pct=mean - (claim.paper_pct or 0.0)))
                continue
            if claim.kind == "best":
                rows.append(_best_row(reference, claim, key, data, a_side, metric,
                                      lower_is_better))
                continue
            vb = _values(side_rows(data, b_side or {}), metric)
            measured = len(va) > 0 and len(vb) > 0
            ma = float(va.mean()) if len(va) else float("nan")
            mb = float(vb.mean()) if len(vb) else float("nan")
            _, p = welch(va, vb) if measured else (float("nan"), float("nan"))
            effect = percent_of(ma, mb)
            paper = _paper_text(claim)
            rows.append(_row(reference, claim, key, metric, side_label(a_side),
                             side_label(b_side), paper=paper,
                             ours="" if not measured else f"{effect:+.2f} %",
                             mean_a=ma, mean_b=mb, sd_a=_sd(va), sd_b=_sd(vb),
                             n_a=len(va), n_b=len(vb), p=p,
                             effect_pct=effect))
    return rows


def _best_row(reference: Reference, claim: Claim, key: dict[str, str], data: pd.DataFrame,
              a_side: dict[str, str], metric: str,
              lower_is_better: Sequence[str]) -> dict[str, Any]:
    factors = list(a_side)
    means: dict[str, float] = {}
    counts: dict[str, int] = {}
    if all(f in data.columns for f in factors) and metric in data.columns:
        for levels, frame in data.groupby(factors, sort=True):
            combo = levels if isinstance(levels, tuple) else (levels,)
            label = "/".join(str(v) for v in combo)
            v = _values(frame, metric)
            if len(v):
                means[label], counts[label] = float(v.mean()), len(v)
    a = side_label(a_side)
    if a not in means or len(means) < 2:
        return _row(reference, claim, key, metric, a, "", paper=claim.significance, ours="",
                    mean_a=means.get(a, float("nan")), mean_b=float("nan"),
                    n_a=counts.get(a, 0), n_b=0, p=float("nan"), effect_pct=float("nan"))
    lower = metric in lower_is_better
    ranked = sorted(means, key=lambda k: means[k] if lower else -means[k])
    runner = ranked[1] if ranked[0] == a else ranked[0]
    va = _values(side_rows(data, a_side), metric)
    vb = _values(side_rows(data, dict(zip(factors, runner.split("/"), strict=True))),
                 metric)
    _, p = welch(va, vb)
    return _row(reference, claim, key, metric, a, runner,
                paper="best mean (" + claim.significance + ")",
                ours=f"rank {ranked.index(a) + 1} of {len(ranked)}", mean_a=means[a],
                mean_b=means[runner], sd_a=_sd(va), sd_b=_sd(vb), n_a=counts[a],
                n_b=counts[runner], p=p,
                effect_pct=percent_of(means[a], means[runner]), best=ranked[0] == a)


def mark_claims(reference: Reference, metrics: pd.DataFrame,
                clusters: Sequence[str] = ("condition", "flow_type"), alpha: float = 0.05,
                lower_is_better: Sequence[str] = ("fct_s", "excess_pct"),
                min_effect_pct: float = 1.0) -> pd.DataFrame:
    """One row per (claim, cluster, pair, metric) with the mark (module docstring)."""
    data = in_study(reference, metrics)
    groups: list[tuple[dict[str, str], pd.DataFrame]] = []
    if clusters and all(c in data.columns for c in clusters):
        for key, frame in data.groupby(list(clusters), sort=True):
            values = key if isinstance(key, tuple) else (key,)
            groups.append(({c: str(v) for c, v in zip(clusters, values, strict=True)}, frame))
    else:
        groups.append(({}, data))
    rows: list[dict[str, Any]] = []
    for claim in reference.claims:
        mine = []
        for key, frame in groups:
            if claim.applies_to(key):
                mine += _pair_rows(reference, claim, key, scoped(claim, frame),
                                   lower_is_better)
        if not mine:  # the claim's clusters are not in our data: say so, once
            mine = [_row(reference, claim, {}, m, side_label(a), side_label(b),
                         paper=_paper_text(claim), ours="", mean_a=float("nan"),
                         mean_b=float("nan"), n_a=0, n_b=0, p=float("nan"),
                         effect_pct=float("nan"))
                    for (a, b), m in itertools.product(claim.compare, claim.metrics)]
        testable = [r for r in mine if np.isfinite(r["p"])]
        for r, p_adj in zip(testable, holm([r["p"] for r in testable]) if testable else [],
                            strict=True):
            r["p_holm"] = p_adj
        for r in mine:
            r.setdefault("p_holm", float("nan"))
            best = r.pop("best", None)
            if claim.kind == "excess":
                tol = claim.tolerance or 0.0
                r["mark"] = (NOT_MEASURED if not np.isfinite(r["mean_a"]) else
                             WITHIN.format(tol=tol) if abs(r["effect_pct"]) <= tol else
                             BELOW if r["effect_pct"] < 0 else ABOVE)
                r["practical"] = ""
            else:
                higher = r["metric"] not in lower_is_better
                if claim.kind == "figure":
                    higher = (claim.paper_pct or 0.0) > 0
                r["mark"] = direction_mark(r["effect_pct"], higher, r["p_holm"], alpha)
                if claim.kind == "best" and r["mark"] != NOT_MEASURED and not best:
                    r["mark"] = OPPOSITE_SIGNIFICANT if (
                        np.isfinite(r["p_holm"]) and r["p_holm"] < alpha) else OPPOSITE
                r["practical"] = practical(r["p_holm"], r["effect_pct"], alpha,
                                           min_effect_pct)
            r["agrees"] = agrees(claim, r["mark"], r["effect_pct"], best)
        rows += mine
    return pd.DataFrame(rows, columns=COLUMNS)


def tally(table: pd.DataFrame) -> dict[str, int]:
    """How many rows agree, disagree, or were not measured."""
    return {"agree": int((table["agrees"] == YES).sum()),
            "disagree": int((table["agrees"] == NO).sum()),
            "not measured": int((table["agrees"] == UNKNOWN).sum())}
