"""What a comparison of two groups shows, and the verdict on a claim about it (pure).

`estimate(a, b)` measures one comparison: both means, spreads and counts, the
difference with its 95 % confidence interval (Welch; `statsmodels.stats.weightstats.
CompareMeans`), the two-sided p-value, everything also as a percentage of |mean b| (the
reference mean), and the smallest difference the comparison could have detected
(pathdiv.analysis.stats.power).

A claim is judged by what it says (docs/reproduction.md, "How a claim is judged"):

- **direction** (a better than b): *agree* when significant in that direction and at
  least the smallest effect of interest; significant but smaller: *negligible*;
  significant the other way and at least that large: *disagree*; not significant:
  *inconclusive*, with the smallest effect the comparison could have detected;
- **equivalence** (no difference): *agree* when two one-sided tests (TOST) show the
  difference inside ± the margin; a significant difference beyond the margin:
  *disagree*; else *inconclusive*, never agreement;
- **non-inferiority** (a not worse than b) and **non-superiority** (a not better):
  *agree* when one one-sided test shows a's shortfall (advantage) under the margin; a
  significantly worse (better) beyond the margin: *disagree*; else *inconclusive*;
- **figure** (the paper's value): *agree* when our 95 % CI lies within ± the tolerance
  of it; the value outside our CI: *disagree*; inside a CI wider than the tolerance:
  *inconclusive*. A figure is a claim of equality with a number, judged as "no
  difference" is: a wide interval holds the paper's value and much else.

The margin is the claim's own (`margin_pct`) or the smallest effect of interest
(`analysis.min_effect_pct`), as a percentage of |mean b|; a figure's tolerance is the
claim's (`tolerance_pct`, Table IV's `tolerance_points`) or the same smallest effect, in
the figure's own units (points of a percentage). "Better" follows the metric: lower is
better for FCT and excess traffic. The p-values that decide are adjusted for the
claim's family (pathdiv.analysis.stats.agreement); the estimate's are raw.

Two constant groups (the virtual clock makes some cells exact) need no test: equal
means do not differ, different ones surely do; the interval is the difference itself.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from statsmodels.stats.weightstats import CompareMeans, DescrStatsW, ttest_ind, ttost_ind

from pathdiv.analysis.stats import power

AGREE = "agree"
NEGLIGIBLE = "negligible"
INCONCLUSIVE = "inconclusive"
DISAGREE = "disagree"
NOT_COMPARABLE = "not comparable"
NOT_MEASURED = "not measured"
VERDICTS = (AGREE, NEGLIGIBLE, INCONCLUSIVE, DISAGREE, NOT_COMPARABLE, NOT_MEASURED)

DIRECTION = "direction"
EQUIVALENCE = "equivalence"
NON_INFERIORITY = "non-inferiority"
NON_SUPERIORITY = "non-superiority"
FIGURE = "figure"
TESTS = (DIRECTION, EQUIVALENCE, NON_INFERIORITY, NON_SUPERIORITY, FIGURE)

NAN = float("nan")


@dataclass(frozen=True)
class Estimate:
    """One comparison a - b (a one-sample estimate of a's mean when b is absent)."""

    mean_a: float
    mean_b: float
    sd_a: float
    sd_b: float
    n_a: int
    n_b: int
    diff: float
    ci_low: float
    ci_high: float
    p: float
    detectable_pct: float = NAN
    confidence: float = 0.95

    @property
    def measured(self) -> bool:
        return self.n_a > 0 and (self.n_b > 0 or math.isnan(self.mean_b))

    def pct(self, value: float) -> float:
        """`value` (a difference) as a percentage of |mean b|."""
        if not (np.isfinite(value) and np.isfinite(self.mean_b)) or self.mean_b == 0:
            return NAN
        return value / abs(self.mean_b) * 100.0

    @property
    def effect_pct(self) -> float:
        return self.pct(self.diff)

    @property
    def ci_low_pct(self) -> float:
        return self.pct(self.ci_low)

    @property
    def ci_high_pct(self) -> float:
        return self.pct(self.ci_high)


def _sd(values: np.ndarray) -> float:
    return float(values.std(ddof=1)) if len(values) > 1 else NAN


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else NAN


def estimate(a: np.ndarray, b: np.ndarray, alpha: float = 0.05) -> Estimate:
    """The difference of the means of `a` and `b`, its CI at 1 - alpha, Welch's p and the
    smallest effect the two groups could have detected (module docstring)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    ma, mb, sa, sb = _mean(a), _mean(b), _sd(a), _sd(b)
    diff = ma - mb if len(a) and len(b) else NAN
    low = high = p = NAN
    if len(a) >= 2 and len(b) >= 2:
        if sa == 0 and sb == 0:
            low = high = diff
            p = 1.0 if math.isclose(diff, 0.0, abs_tol=1e-12) else 0.0
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compare = CompareMeans(DescrStatsW(a), DescrStatsW(b))
                p = float(compare.ttest_ind(usevar="unequal")[1])
                low, high = (float(x) for x in compare.tconfint_diff(alpha=alpha,
                                                                      usevar="unequal"))
    detectable = power.detectable_pct(sa, sb, len(a), len(b), mb, alpha)
    return Estimate(ma, mb, sa, sb, len(a), len(b), diff, low, high, p, detectable,
                    1 - alpha)


def estimate_mean(a: np.ndarray, alpha: float = 0.05) -> Estimate:
    """a's mean with its t interval (a figure of the paper's is compared with it)."""
    a = np.asarray(a, dtype=float)
    ma, sa = _mean(a), _sd(a)
    low = high = NAN
    if len(a) >= 2:
        if sa == 0:
            low = high = ma
        else:
            low, high = (float(x) for x in DescrStatsW(a).tconfint_mean(alpha=alpha))
    return Estimate(ma, NAN, sa, NAN, len(a), 0, ma, low, high, NAN, NAN, 1 - alpha)


def margin_p(a: np.ndarray, b: np.ndarray, test: str, margin: float,
             higher_is_better: bool) -> float:
    """The p-value of the equivalence-type `test` at ± `margin` (metric units):
    equivalence by TOST (statsmodels' ttost_ind), non-inferiority and non-superiority by
    one one-sided Welch test against the margin. Small p: the claim is shown."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if len(a) < 2 or len(b) < 2 or not np.isfinite(margin):
        return NAN
    sign = 1.0 if higher_is_better else -1.0
    x, y = sign * a, sign * b  # in these, higher is better
    diff = float(x.mean() - y.mean())
    if _sd(x) == 0 and _sd(y) == 0:
        shown = {EQUIVALENCE: abs(diff) < margin, NON_INFERIORITY: diff > -margin,
                 NON_SUPERIORITY: diff < margin}[test]
        return 0.0 if shown else 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if test == EQUIVALENCE:
            return float(ttost_ind(x, y, -margin, margin, usevar="unequal")[0])
        if test == NON_INFERIORITY:
            return float(ttest_ind(x, y, alternative="larger", usevar="unequal",
                                   value=-margin)[1])
        if test == NON_SUPERIORITY:
            return float(ttest_ind(x, y, alternative="smaller", usevar="unequal",
                                   value=margin)[1])
    raise ValueError(f"test {test!r} has no margin; expected one of {EQUIVALENCE}, "
                     f"{NON_INFERIORITY}, {NON_SUPERIORITY}")


def _significant(p: float, alpha: float) -> bool:
    return bool(np.isfinite(p) and p < alpha)


def judge_direction(effect_pct: float, p_adj: float, higher_is_better: bool, alpha: float,
                    min_effect_pct: float) -> str:
    """The verdict on 'a is better than b' (module docstring)."""
    if not np.isfinite(effect_pct) or not np.isfinite(p_adj):
        return NOT_MEASURED if not np.isfinite(effect_pct) else INCONCLUSIVE
    if not _significant(p_adj, alpha):
        return INCONCLUSIVE
    if abs(effect_pct) < min_effect_pct:
        return NEGLIGIBLE
    better = effect_pct > 0 if higher_is_better else effect_pct < 0
    return AGREE if better else DISAGREE


def judge_margin(test: str, effect_pct: float, p_adj: float, p_margin_adj: float,
                 higher_is_better: bool, alpha: float, margin_pct: float) -> str:
    """The verdict on 'no difference', 'a not worse' or 'a not better' (module
    docstring): agreement only where the margin test shows it."""
    if not np.isfinite(effect_pct):
        return NOT_MEASURED
    if _significant(p_margin_adj, alpha):
        return AGREE
    gain = effect_pct if higher_is_better else -effect_pct  # a's advantage, in %
    beyond = {EQUIVALENCE: abs(gain) > margin_pct, NON_INFERIORITY: gain < -margin_pct,
              NON_SUPERIORITY: gain > margin_pct}[test]
    if _significant(p_adj, alpha) and beyond:
        return DISAGREE
    return INCONCLUSIVE


def judge_figure(paper: float, low: float, high: float, tolerance: float) -> str:
    """The verdict on a figure of the paper's against our interval [low, high] (module
    docstring): agree when the interval lies within ± `tolerance` of the paper's value,
    disagree when the value lies outside the interval, inconclusive when it lies inside
    an interval too wide to tell it from values beyond the tolerance."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return INCONCLUSIVE if np.isfinite(paper) else NOT_MEASURED
    if paper - tolerance <= low and high <= paper + tolerance:
        return AGREE
    if not low <= paper <= high:
        return DISAGREE
    return INCONCLUSIVE
