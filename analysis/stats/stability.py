"""Whether a reproduction's verdicts survive a rerun, and what a cell needs (pure).

Three questions about two results folders of one config run with two seeds:

- **Did each verdict hold?** `compare_verdicts(first, second)` pairs the claim rows of
  two `agreement.mark_claims` tables (same claim, cluster, metric and compared sides)
  and says per row: `held` (both seeds give the same verdict: agree, negligible,
  inconclusive or disagree), `unstable` (two different verdicts: such a row counts as
  none of them), `measured once` (one seed lacks a side: a verdict of one seed is not
  replicated), `not comparable`, `not measured`. A verdict counts only where both seeds
  give it (`result`: "agree" and so on only when held).
- **Which cells have two modes?** `split_modes(values)` splits a cell's observations at
  gaps that dwarf the spread inside the groups they separate: sorted values, their gaps
  between neighbours sorted from the largest; the cell has k + 1 modes for the largest
  k such that the k-th largest gap is at least `min_gap_pct` % of the larger of its two
  ends (a difference a reader would notice: a retransmission timeout takes 0.2 s where a
  10 KB query takes 0.035 s) and at least `separation` times the (k+1)-th gap (every gap
  left inside a mode is much smaller). At least one gap stays inside a mode, and cells
  with fewer than `MIN_OBSERVATIONS` are not split. `bimodal_cells(metrics, ...)` names
  every such cell with the share of observations in each mode.
- **How many repetitions does a verdict need?** Two bounds, the larger wins:
  *the rare mode*: Welch's t-test (and the MANOVA) take a cell's mean as normally
  distributed; the mean of a two-mode cell is the count of rare-mode observations (a
  binomial) times the gap, and the usual condition for the binomial's normal
  approximation is n q >= 5 (`RARE_MODE_COUNT`), so a cell whose rarest mode holds the
  share q needs n >= 5 / q observations. With 8 observations and q = 1/8 a rerun sees
  no such observation with probability (7/8)^8 = 34 % and two or more with 26 %, each
  moving the mean by an eighth of the gap: how the first reruns' verdicts flipped.
  *Power*: n per side for a two-sided t-test at alpha to find delta in `power` of reruns
  (pathdiv.analysis.stats.power, statsmodels' TTestIndPower), with the two runs'
  variances pooled and delta the larger of the two runs' mean difference and the
  smallest effect of interest (`analysis.min_effect_pct` of b's mean): enough
  observations that a difference of that size is found significant in `power` of reruns,
  so the verdict does not hang on the draw. Where the mean difference is below the
  smallest effect of interest the row says so (`negligible`): a verdict flipping on such
  a difference is about nothing a reader should care for, and more observations would
  not make it meaningful. Observations become repetitions by the run's observations per
  repetition.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pathdiv.analysis.stats import power as power_of
from pathdiv.analysis.stats.verdicts import NOT_COMPARABLE, NOT_MEASURED

MIN_GAP_PCT = 20.0
SEPARATION = 3.0
MIN_OBSERVATIONS = 4
RARE_MODE_COUNT = 5
POWER = 0.8
KEY = ["reference", "claim_id", "cluster", "metric", "a", "b"]
HELD, UNSTABLE, ONCE, UNMEASURED = "held", "unstable", "measured once", NOT_MEASURED
APART = NOT_COMPARABLE


@dataclass(frozen=True)
class Mode:
    """One group of a cell's observations."""

    n: int
    low: float
    high: float
    mean: float


def split_modes(values: Sequence[float], min_gap_pct: float = MIN_GAP_PCT,
                separation: float = SEPARATION) -> list[Mode]:
    """The modes of `values`, lowest first (one mode: not bimodal); module docstring."""
    v = np.sort(np.asarray([x for x in values if np.isfinite(x)], dtype=float))
    if len(v) == 0:
        return []
    if len(v) < MIN_OBSERVATIONS:
        return [Mode(len(v), float(v[0]), float(v[-1]), float(v.mean()))]
    gaps = np.diff(v)
    order = np.argsort(-gaps, kind="stable")
    breaks = 0
    for k in range(1, len(gaps)):  # k breaks leave at least one gap inside a mode
        i = order[k - 1]
        scale = max(abs(v[i]), abs(v[i + 1]))
        big = scale > 0 and gaps[i] >= min_gap_pct / 100.0 * scale
        if not big:
            break
        if gaps[i] >= separation * gaps[order[k]]:
            breaks = k
    cuts = sorted(int(i) + 1 for i in order[:breaks])
    return [Mode(len(part), float(part[0]), float(part[-1]), float(part.mean()))
            for part in np.split(v, cuts)]


def needed_for_modes(modes: Sequence[Mode]) -> int:
    """Observations a cell needs so that its rarest mode is expected RARE_MODE_COUNT
    times (0 for a cell with one mode)."""
    if len(modes) < 2:
        return 0
    n = sum(m.n for m in modes)
    rare = min(m.n for m in modes) / n
    return math.ceil(RARE_MODE_COUNT / rare - 1e-9)


def needed_for_power(sd_a: float, sd_b: float, delta: float, alpha: float = 0.05,
                     power: float = POWER) -> float:
    """Observations per side for Welch's test to find `delta` in `power` of reruns
    (pathdiv.analysis.stats.power; NaN without the spreads, 2 at least)."""
    return power_of.needed_n(sd_a, sd_b, delta, alpha, power)


def bimodal_cells(metrics: pd.DataFrame, cells: Sequence[str], metric_columns: Sequence[str],
                  min_gap_pct: float = MIN_GAP_PCT,
                  separation: float = SEPARATION) -> pd.DataFrame:
    """Every (cell, metric) of `metrics` with more than one mode: its modes as text, the
    rarest mode's share, the observations it has and needs, and the repetitions those
    take (its observations per repetition, from the `repetition` column)."""
    rows: list[dict[str, Any]] = []
    cells = [c for c in cells if c in metrics.columns]
    if not cells:
        return pd.DataFrame(columns=_BIMODAL_COLUMNS)
    for key, frame in metrics.groupby(cells, sort=True):
        values = key if isinstance(key, tuple) else (key,)
        label = " / ".join(str(v) for v in values)
        reps = frame["repetition"].nunique() if "repetition" in frame.columns else 0
        for metric in metric_columns:
            if metric not in frame.columns:
                continue
            data = pd.to_numeric(frame[metric], errors="coerce").dropna().to_numpy(float)
            modes = split_modes(data, min_gap_pct, separation)
            if len(modes) < 2:
                continue
            need = needed_for_modes(modes)
            per_rep = len(data) / reps if reps else float("nan")
            rows.append({"cell": label, "metric": metric, "n": len(data),
                         "modes": modes_text(modes),
                         "rare_share": min(m.n for m in modes) / len(data),
                         "repetitions": reps, "needed_n": need,
                         "needed_repetitions": math.ceil(need / per_rep - 1e-9)
                         if np.isfinite(per_rep) and per_rep > 0 else float("nan")})
    return pd.DataFrame(rows, columns=_BIMODAL_COLUMNS)


_BIMODAL_COLUMNS = ["cell", "metric", "n", "modes", "rare_share", "repetitions",
                    "needed_n", "needed_repetitions"]


def _num(x: float) -> str:
    return f"{x:.3g}"


def modes_text(modes: Sequence[Mode]) -> str:
    """'12 of 16 at 0.033–0.037; 4 of 16 at 0.24–1.09' style, one part per mode."""
    n = sum(m.n for m in modes)
    parts = []
    for m in modes:
        span = _num(m.low) if m.low == m.high else f"{_num(m.low)}–{_num(m.high)}"
        parts.append(f"{m.n} of {n} at {span}")
    return "; ".join(parts)


def _verdict(first: str, second: str) -> str:
    if first == UNMEASURED and second == UNMEASURED:
        return UNMEASURED
    if APART in (first, second):
        return APART
    if UNMEASURED in (first, second):
        return ONCE
    return HELD if first == second else UNSTABLE


def stable_result(verdict: str, first: str) -> str:
    """What the docs report for a row: a verdict only when both seeds gave it."""
    return first if verdict == HELD else verdict


RUNNER_UP = "the runner-up"


def keyed(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with the columns that pair rows across runs made comparable: no missing
    sides, and a `best` claim's b (the runner-up, which may differ between runs) named
    by its role."""
    frame = table.copy()
    frame["a"] = frame["a"].fillna("")
    frame["b"] = frame["b"].fillna("")
    if "kind" in frame.columns:
        frame.loc[frame["kind"] == "best", "b"] = RUNNER_UP
    return frame


def _prefixed(table: pd.DataFrame, suffix: str) -> pd.DataFrame:
    keep = ["section", "kind", "verdict", "counted", "ours", "p_adj", "effect_pct", "mean_a",
            "mean_b", "sd_a", "sd_b", "n_a", "n_b"]
    frame = keyed(table.reindex(columns=KEY + keep))  # older tables lack sd_a, sd_b
    return frame.rename(columns={c: f"{c}_{suffix}" for c in keep})


def compare_verdicts(first: pd.DataFrame, second: pd.DataFrame, alpha: float = 0.05,
                     min_effect_pct: float = 1.0,
                     repetitions: int | Mapping[str, int] | None = None) -> pd.DataFrame:
    """One row per claim row of either table: both runs' marks, the verdict, what the
    docs may call it, and the observations per side its comparison needs for `POWER`
    (and the repetitions those take, given the runs' `repetitions`: one number, or per
    cluster label as the rows name it)."""
    one, two = _prefixed(first, "1"), _prefixed(second, "2")
    both = one.merge(two, on=KEY, how="outer", sort=False)
    # the reference's order (the first run's, then rows only the second has)
    keys = pd.concat([one[KEY], two[KEY]]).drop_duplicates().reset_index(drop=True)
    keys["_order"] = range(len(keys))
    both = both.merge(keys, on=KEY, how="left").sort_values("_order", kind="stable")
    both = both.drop(columns="_order").reset_index(drop=True)
    for s in ("1", "2"):
        both[f"verdict_{s}"] = both[f"verdict_{s}"].fillna(UNMEASURED)
        both[f"counted_{s}"] = both[f"counted_{s}"].astype("boolean").fillna(False)
    both["section"] = both["section_1"].fillna(both["section_2"])
    both["kind"] = both["kind_1"].fillna(both["kind_2"])
    both["counted"] = (both.counted_1 | both.counted_2).astype(bool)
    both["pair"] = [_verdict(x, y) for x, y in zip(both.verdict_1, both.verdict_2,
                                                    strict=True)]
    both["result"] = [stable_result(v, a) for v, a in zip(both.pair, both.verdict_1,
                                                           strict=True)]
    needed, negligible = [], []
    for r in both.itertuples(index=False):
        if r.kind == "excess" or r.pair in (UNMEASURED, APART):
            needed.append(float("nan"))
            negligible.append(False)
            continue
        sd_a = _pool(r.sd_a_1, r.sd_a_2)
        sd_b = _pool(r.sd_b_1, r.sd_b_2)
        diff = np.nanmean([r.mean_a_1 - r.mean_b_1, r.mean_a_2 - r.mean_b_2])
        base = np.nanmean([abs(r.mean_b_1), abs(r.mean_b_2)])
        smallest = min_effect_pct / 100.0 * base if np.isfinite(base) else float("nan")
        delta = np.nanmax([abs(diff), smallest]) if np.isfinite(diff) else float("nan")
        needed.append(needed_for_power(sd_a, sd_b, delta, alpha))
        negligible.append(bool(np.isfinite(diff) and abs(diff) < smallest))
    both["needed_n"] = needed
    both["below_min_effect"] = negligible  # the runs' mean difference is below the smallest
    # effect of interest: `needed_n` resolves that effect, not this difference
    def reps_of(cluster: str) -> float:
        if isinstance(repetitions, Mapping):
            return float(repetitions.get(cluster) or float("nan"))
        return float(repetitions) if repetitions else float("nan")

    per_rep = [min(x, y) / reps_of(c)
               for x, y, c in zip(both.n_a_1.fillna(both.n_a_2), both.n_b_1.fillna(both.n_b_2),
                                  both.cluster, strict=True)]
    both["needed_repetitions"] = [
        math.ceil(n / k - 1e-9) if np.isfinite(n) and np.isfinite(k) and k > 0
        else float("nan") for n, k in zip(both.needed_n, per_rep, strict=True)]
    return both.reset_index(drop=True)


def _pool(x: float, y: float) -> float:
    """The root of the mean variance of two runs' spreads (either alone if one lacks)."""
    vals = [v for v in (x, y) if v is not None and np.isfinite(v)]
    return float(np.sqrt(np.mean(np.square(vals)))) if vals else float("nan")


RESULTS = ("agree", "negligible", "inconclusive", "disagree", UNSTABLE, ONCE, APART,
           UNMEASURED)


def tally(table: pd.DataFrame) -> dict[str, int]:
    """Counted rows per result (a verdict held in both seeds, unstable, measured once),
    then the rows not comparable and not measured."""
    counted = table[table["counted"].astype(bool)]
    out = {k: int((counted.result == k).sum()) for k in RESULTS[:6]}
    out[APART] = int((table.result == APART).sum())
    out[UNMEASURED] = int((table.result == UNMEASURED).sum())
    return out
