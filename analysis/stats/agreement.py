"""Every claim of a reference judged against our observations (pure).

`mark_claims(reference, metrics, ...)` takes metrics.csv (one row per observation) and
gives one row per (claim, cluster, compared pair, metric): the paper's figure, ours,
both means, spreads and counts, the effect as a percentage of b's mean with its 95 %
confidence interval, Welch's p raw and adjusted for the claim's family, for the
equivalence kinds the margin and the p-value of its test (raw and adjusted), the
smallest effect the comparison could have detected, and the verdict
(pathdiv.analysis.stats.verdicts: agree, negligible, inconclusive, disagree; not
comparable, not measured) with the reason in words.

**Families.** A claim's rows in one results folder are one family: the p-values that
decide its verdicts (Welch's for a direction, the margin test's and Welch's for the
equivalence kinds) are Holm-adjusted within it, and the row names the family and its
size. A figure is judged by its own 95 % interval (a family of one).

**Counted once.** Two claims may read the same comparison (same cluster, the same two
sides, metric and scope): the first claim of the reference's file counts it, the later
rows say which claim counted it (`counted_under`) and stay out of the tally. Rows not
comparable or not measured are never counted. `tally` counts the verdicts of the
counted rows, utilisation apart from the other metrics.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pathdiv.analysis.stats import verdicts as v
from pathdiv.analysis.stats.claims import (
    Claim,
    Reference,
    in_study,
    scoped,
    side_label,
    side_rows,
)
from pathdiv.analysis.stats.posthoc import holm

UTILISATION = "utilization"
COLUMNS = [
    "reference", "claim_id", "section", "kind", "test", "claim", "scope", "cluster",
    "metric", "a", "b", "paper", "ours", "mean_a", "mean_b", "sd_a", "sd_b", "n_a", "n_b",
    "effect_pct", "ci_low_pct", "ci_high_pct", "p", "p_adj", "family", "family_size",
    "margin_pct", "p_margin", "p_margin_adj", "detectable_pct", "verdict", "why",
    "counted", "counted_under", "caveat",
]
COUNTED_VERDICTS = (v.AGREE, v.NEGLIGIBLE, v.INCONCLUSIVE, v.DISAGREE)
NAN = float("nan")


def percent_of(a: float, b: float) -> float:
    """(a - b) as a percentage of |b|; NaN when b is 0 or missing."""
    if not np.isfinite(a) or not np.isfinite(b) or b == 0:
        return NAN
    return (a - b) / abs(b) * 100.0


PAPER_TEXT = {"better": "a better", "not_worse": "a not worse",
              "not_better": "a not better", "no_difference": "no difference"}


def _paper_text(claim: Claim, margin_pct: float) -> str:
    """What the paper says about one comparison, in a few words."""
    if claim.kind == "figure":
        tolerance = f" ± {claim.tolerance:g}" if claim.tolerance is not None else ""
        return f"{claim.paper_pct:+g} %{tolerance}"
    if claim.kind == "excess":
        return f"{claim.paper_pct:g} %"
    if claim.kind == "best":
        return f"best mean ({claim.significance})"
    text = PAPER_TEXT[claim.kind]
    if claim.test != v.DIRECTION:
        text += f" (margin ± {margin_pct:g} %)"
    else:
        text += {"stated": ", significant", "means only": " (means only)"}.get(
            claim.significance, " (significance not stated)")
    return text


def _label(key: dict[str, str]) -> str:
    return " / ".join(f"{k}={v}" for k, v in key.items()) or "all observations"


def _values(frame: pd.DataFrame, metric: str) -> np.ndarray:
    if metric not in frame.columns:
        return np.array([])
    return pd.to_numeric(frame[metric], errors="coerce").dropna().to_numpy(dtype=float)


def _num(x: float, digits: int = 1) -> str:
    return f"{x:+.{digits}f}" if np.isfinite(x) else "?"


def _interval(low: float, high: float, digits: int = 1, signed: bool = True) -> str:
    if not (np.isfinite(low) and np.isfinite(high)):
        return ""
    if signed:
        return f" [{_num(low, digits)}, {_num(high, digits)}]"
    return f" [{low:.{digits}f}, {high:.{digits}f}]"


def _row(reference: Reference, claim: Claim, key: dict[str, str], metric: str,
         a: str, b: str, margin_pct: float, **values: Any) -> dict[str, Any]:
    row = {"reference": reference.name, "claim_id": claim.id, "section": claim.section,
           "kind": claim.kind, "test": claim.test, "claim": claim.claim,
           "scope": claim.scope_text(), "cluster": _label(key), "metric": metric, "a": a,
           "b": b, "paper": _paper_text(claim, margin_pct), "ours": "",
           "mean_a": NAN, "mean_b": NAN, "sd_a": NAN, "sd_b": NAN, "n_a": 0, "n_b": 0,
           "effect_pct": NAN, "ci_low_pct": NAN, "ci_high_pct": NAN, "p": NAN,
           "margin_pct": margin_pct if claim.test in (v.EQUIVALENCE, v.NON_INFERIORITY,
                                                      v.NON_SUPERIORITY) else NAN,
           "p_margin": NAN, "detectable_pct": NAN, "caveat": claim.caveat}
    row.update(values)
    return row


def _from_estimate(est: v.Estimate) -> dict[str, Any]:
    return {"mean_a": est.mean_a, "mean_b": est.mean_b, "sd_a": est.sd_a, "sd_b": est.sd_b,
            "n_a": est.n_a, "n_b": est.n_b, "effect_pct": est.effect_pct,
            "ci_low_pct": est.ci_low_pct, "ci_high_pct": est.ci_high_pct, "p": est.p,
            "detectable_pct": est.detectable_pct,
            "ours": "" if not np.isfinite(est.effect_pct) else
            f"{_num(est.effect_pct)} %{_interval(est.ci_low_pct, est.ci_high_pct)}"}


def _pair_rows(reference: Reference, claim: Claim, key: dict[str, str], data: pd.DataFrame,
               lower_is_better: Sequence[str], alpha: float,
               margin_pct: float) -> list[dict[str, Any]]:
    rows = []
    for a_side, b_side in claim.compare:
        for metric in claim.metrics:
            va = _values(side_rows(data, a_side), metric)
            if claim.kind == "excess":
                rows.append(_excess_row(reference, claim, key, metric, a_side, va, alpha))
                continue
            if claim.kind == "best":
                rows.append(_best_row(reference, claim, key, data, a_side, metric,
                                      lower_is_better, alpha))
                continue
            vb = _values(side_rows(data, b_side or {}), metric)
            est = v.estimate(va, vb, alpha)
            values = _from_estimate(est) if len(va) and len(vb) else {}
            higher = metric not in lower_is_better
            if claim.test in (v.EQUIVALENCE, v.NON_INFERIORITY, v.NON_SUPERIORITY) \
                    and len(va) and len(vb):
                values["p_margin"] = v.margin_p(va, vb, claim.test,
                                                margin_pct / 100.0 * abs(est.mean_b), higher)
            rows.append(_row(reference, claim, key, metric, side_label(a_side),
                             side_label(b_side), margin_pct, **values))
    return rows


def _excess_row(reference: Reference, claim: Claim, key: dict[str, str], metric: str,
                a_side: dict[str, str], va: np.ndarray, alpha: float) -> dict[str, Any]:
    """A Table IV cell: our mean with its interval beside the paper's figure, in points."""
    paper = claim.paper_pct or 0.0
    if not len(va):
        return _row(reference, claim, key, metric, side_label(a_side), "", NAN)
    est = v.estimate_mean(va, alpha)
    return _row(reference, claim, key, metric, side_label(a_side), "", NAN,
                ours=f"{est.mean_a:.2f} %{_interval(est.ci_low, est.ci_high, 2, False)}",
                mean_a=est.mean_a, mean_b=paper, sd_a=est.sd_a, n_a=est.n_a,
                effect_pct=est.mean_a - paper, ci_low_pct=est.ci_low - paper,
                ci_high_pct=est.ci_high - paper)


def _best_row(reference: Reference, claim: Claim, key: dict[str, str], data: pd.DataFrame,
              a_side: dict[str, str], metric: str, lower_is_better: Sequence[str],
              alpha: float) -> dict[str, Any]:
    """a against the runner-up when a has the best mean, else against the best."""
    factors = list(a_side)
    means: dict[str, float] = {}
    if all(f in data.columns for f in factors) and metric in data.columns:
        for levels, frame in data.groupby(factors, sort=True):
            combo = levels if isinstance(levels, tuple) else (levels,)
            observed = _values(frame, metric)
            if len(observed):
                means["/".join(str(x) for x in combo)] = float(observed.mean())
    a = side_label(a_side)
    if a not in means or len(means) < 2:
        return _row(reference, claim, key, metric, a, "", NAN,
                    mean_a=means.get(a, NAN), n_a=0)
    lower = metric in lower_is_better
    ranked = sorted(means, key=lambda k: means[k] if lower else -means[k])
    other = ranked[1] if ranked[0] == a else ranked[0]
    va = _values(side_rows(data, a_side), metric)
    vb = _values(side_rows(data, dict(zip(factors, other.split("/"), strict=True))), metric)
    found = _from_estimate(v.estimate(va, vb, alpha))
    found["ours"] = f"rank {ranked.index(a) + 1} of {len(ranked)}; " + found["ours"]
    return _row(reference, claim, key, metric, a, other, NAN, **found)


def _adjust(rows: list[dict[str, Any]], column: str) -> list[float]:
    """Holm over the rows' finite `column`, NaN elsewhere (same order)."""
    finite = [i for i, r in enumerate(rows) if np.isfinite(r[column])]
    out = [NAN] * len(rows)
    for i, p in zip(finite, holm([rows[i][column] for i in finite]) if finite else [],
                    strict=True):
        out[i] = p
    return out


def _p_words(p: float) -> str:
    if not np.isfinite(p):
        return "p –"
    return "p < .001" if p < 0.001 else f"p = {p:.3f}".replace("0.", ".", 1)


def _judge(claim: Claim, r: dict[str, Any], lower_is_better: Sequence[str], alpha: float,
           min_effect_pct: float) -> tuple[str, str]:
    """(verdict, why) of one row whose p-values are adjusted."""
    measured = r["n_a"] > 0 and (r["n_b"] > 0 or claim.kind == "excess")
    if claim.not_comparable:
        return v.NOT_COMPARABLE, claim.not_comparable
    if not measured:
        return v.NOT_MEASURED, "a side has no observations here"
    higher = r["metric"] not in lower_is_better
    effect, p_adj = r["effect_pct"], r["p_adj"]
    if claim.kind in ("excess", "figure"):
        # excess: our mean against the paper's, the interval as differences from it
        paper = 0.0 if claim.kind == "excess" else claim.paper_pct or 0.0
        shown = claim.paper_pct or 0.0
        tol = claim.tolerance if claim.tolerance is not None else min_effect_pct
        unit = " points" if claim.kind == "excess" else " %"
        verdict = v.judge_figure(paper, r["ci_low_pct"], r["ci_high_pct"], tol)
        if verdict == v.AGREE:
            why = f"our CI within ± {tol:g}{unit} of the paper's {shown:g} %"
        elif verdict == v.DISAGREE:
            why = f"the paper's {shown:g} % outside our CI"
        elif np.isfinite(r["ci_low_pct"]):
            why = (f"the paper's {shown:g} % in our CI, which is wider than ± {tol:g}"
                   f"{unit}")
        else:
            why = "no CI (fewer than 2 observations)"
        return verdict, why
    if claim.test == v.DIRECTION:
        # a best claim's row compares a with the runner-up, or with the best when a is
        # not: then a is the worse of the two, and the verdict cannot be agreement
        verdict = v.judge_direction(effect, p_adj, higher, alpha, min_effect_pct)
        if verdict == v.INCONCLUSIVE:
            why = (f"not significant ({_p_words(p_adj)}); detectable >= "
                   f"{r['detectable_pct']:.3g} %" if np.isfinite(r["detectable_pct"])
                   else f"not significant ({_p_words(p_adj)})")
        elif verdict == v.NEGLIGIBLE:
            why = f"significant ({_p_words(p_adj)}) but |{effect:.2g} %| < {min_effect_pct:g} %"
        else:
            why = f"significant ({_p_words(p_adj)}), |effect| >= {min_effect_pct:g} %"
        return verdict, why
    verdict = v.judge_margin(claim.test, effect, p_adj, r["p_margin_adj"], higher, alpha,
                             r["margin_pct"])
    if verdict == v.AGREE:
        why = f"{claim.test} within ± {r['margin_pct']:g} % shown ({_p_words(r['p_margin_adj'])})"
    elif verdict == v.DISAGREE:
        why = (f"significant difference ({_p_words(p_adj)}) beyond ± {r['margin_pct']:g} %")
    else:
        why = (f"{claim.test} within ± {r['margin_pct']:g} % not shown "
               f"({_p_words(r['p_margin_adj'])})")
    return verdict, why


def _comparison_key(claim: Claim, r: dict[str, Any]) -> tuple[Any, ...]:
    """What a row compares: cluster, the two sides (either order), metric and the
    observations the claim's `within` keeps."""
    sides = frozenset((r["a"], r["b"])) if claim.kind != "best" else (r["a"], "best")
    within = tuple(sorted((f, tuple(sorted(levels))) for f, levels in claim.within.items()))
    return (r["reference"], r["cluster"], sides, r["metric"], within)


def mark_claims(reference: Reference, metrics: pd.DataFrame,
                clusters: Sequence[str] = ("condition", "flow_type"), alpha: float = 0.05,
                lower_is_better: Sequence[str] = ("fct_s", "excess_pct"),
                min_effect_pct: float = 1.0) -> pd.DataFrame:
    """One row per (claim, cluster, pair, metric) with its verdict (module docstring)."""
    data = in_study(reference, metrics)
    groups: list[tuple[dict[str, str], pd.DataFrame]] = []
    if clusters and all(c in data.columns for c in clusters):
        for key, frame in data.groupby(list(clusters), sort=True):
            values = key if isinstance(key, tuple) else (key,)
            groups.append(({c: str(x) for c, x in zip(clusters, values, strict=True)}, frame))
    else:
        groups.append(({}, data))
    rows: list[dict[str, Any]] = []
    counted_by: dict[tuple[Any, ...], str] = {}
    for claim in reference.claims:
        margin = claim.margin_pct if claim.margin_pct is not None else min_effect_pct
        mine = []
        for key, frame in groups:
            if claim.applies_to(key):
                mine += _pair_rows(reference, claim, key, scoped(claim, frame),
                                   lower_is_better, alpha, margin)
        if not mine:  # the claim's clusters are not in our data: say so, once
            mine = [_row(reference, claim, {}, m, side_label(a), side_label(b), margin)
                    for (a, b), m in itertools.product(claim.compare, claim.metrics)]
        for r, p_adj, p_margin_adj in zip(mine, _adjust(mine, "p"), _adjust(mine, "p_margin"),
                                          strict=True):
            r["p_adj"], r["p_margin_adj"] = p_adj, p_margin_adj
        family = sum(1 for r in mine if np.isfinite(r["p"]) or np.isfinite(r["p_margin"]))
        for r in mine:
            r["family_size"] = family if claim.kind not in ("figure", "excess") else 1
            r["family"] = (f"{claim.id}: {family} tests in this folder, Holm"
                           if claim.kind not in ("figure", "excess") else
                           "its own 95 % CI")
            r["verdict"], r["why"] = _judge(claim, r, lower_is_better, alpha, min_effect_pct)
            r["counted"], r["counted_under"] = False, ""
            if r["verdict"] in COUNTED_VERDICTS:
                key = _comparison_key(claim, r)
                if key in counted_by:
                    r["counted_under"] = counted_by[key]
                else:
                    counted_by[key] = claim.id
                    r["counted"] = True
        rows += mine
    return pd.DataFrame(rows, columns=COLUMNS)


def tally(table: pd.DataFrame) -> dict[str, int]:
    """Counted rows per verdict, with utilisation apart; rows not comparable, not
    measured, or counted under another claim."""
    counted = table[table["counted"].astype(bool)]
    out: dict[str, int] = {}
    for verdict in COUNTED_VERDICTS:
        rows = counted[counted.verdict == verdict]
        out[verdict] = int((rows.metric != UTILISATION).sum())
    for verdict in COUNTED_VERDICTS:
        rows = counted[counted.verdict == verdict]
        out[f"{verdict} (utilisation)"] = int((rows.metric == UTILISATION).sum())
    out[v.NOT_COMPARABLE] = int((table.verdict == v.NOT_COMPARABLE).sum())
    out[v.NOT_MEASURED] = int((table.verdict == v.NOT_MEASURED).sum())
    out["counted under another claim"] = int((table.counted_under.astype(str) != "").sum())
    return out
