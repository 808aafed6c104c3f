"""What a two-sample comparison can detect, and what it needs (pure; statsmodels' power).

The analysis compares two groups of observations with Welch's t-test. Two questions
about such a comparison are planned, not hoped for:

- **the smallest detectable effect**: the difference between the two means that a
  two-sided test at `alpha` finds significant in `power` of repeats of the experiment,
  given the two groups' counts and spreads; as a percentage of the reference (b) mean.
  An inconclusive verdict is printed with it: "not significant, and nothing smaller
  than 730 % could have been";
- **the observations needed**: per group, for a difference of a given size.

Both come from `statsmodels.stats.power.TTestIndPower` (the two-sample t-test's power
at Cohen's d = difference / pooled standard deviation). Welch's test has slightly less
power when the spreads or counts differ, so the figures are the best case of the test
actually run. The default power is 80 %.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from statsmodels.stats.power import TTestIndPower

POWER = 0.8
_SOLVER = TTestIndPower()


def pooled_sd(sd_a: float, sd_b: float, n_a: int, n_b: int) -> float:
    """The pooled standard deviation of two groups (NaN without two observations a side)."""
    if n_a < 2 or n_b < 2 or not (np.isfinite(sd_a) and np.isfinite(sd_b)):
        return float("nan")
    return float(math.sqrt(((n_a - 1) * sd_a ** 2 + (n_b - 1) * sd_b ** 2) / (n_a + n_b - 2)))


def detectable_d(n_a: int, n_b: int, alpha: float = 0.05, power: float = POWER) -> float:
    """Cohen's d a two-sided two-sample t-test finds in `power` of repeats."""
    if n_a < 2 or n_b < 2:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = _SOLVER.solve_power(effect_size=None, nobs1=n_a, ratio=n_b / n_a, alpha=alpha,
                                power=power, alternative="two-sided")
    return float(np.asarray(d).item())


def detectable_pct(sd_a: float, sd_b: float, n_a: int, n_b: int, mean_b: float,
                   alpha: float = 0.05, power: float = POWER) -> float:
    """The smallest |mean_a - mean_b| the comparison detects, % of |mean_b| (0 when both
    groups are constant: any difference is then certain; NaN when it cannot be said)."""
    sd = pooled_sd(sd_a, sd_b, n_a, n_b)
    if not np.isfinite(sd) or not np.isfinite(mean_b) or mean_b == 0:
        return float("nan")
    if sd == 0:
        return 0.0
    return detectable_d(n_a, n_b, alpha, power) * sd / abs(mean_b) * 100.0


def needed_n(sd_a: float, sd_b: float, delta: float, alpha: float = 0.05,
             power: float = POWER) -> float:
    """Observations per group for a two-sided test at `alpha` to find a difference of
    `delta` (in the metric's units) in `power` of repeats; 2 at least, NaN when it
    cannot be said (no spreads, no difference)."""
    if not all(np.isfinite(x) for x in (sd_a, sd_b, delta)) or delta == 0:
        return float("nan")
    sd = math.sqrt((sd_a ** 2 + sd_b ** 2) / 2)
    if sd == 0:
        return 2.0
    d = abs(delta) / sd
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # power rises with d; the noncentral t loses precision at large d and df 2, so a
        # smaller d whose power is known stands for it
        for at in [d] + [x for x in (8.0, 6.0, 4.0) if x < d]:
            at_two = _SOLVER.power(effect_size=at, nobs1=2, alpha=alpha, ratio=1.0)
            if np.isfinite(at_two):
                break
        if np.isfinite(at_two) and at_two >= power:
            return 2.0  # the root lies below two observations, which a test needs
        try:
            n = _SOLVER.solve_power(effect_size=d, nobs1=None, ratio=1.0, alpha=alpha,
                                    power=power, alternative="two-sided")
        except (ValueError, RuntimeError):
            return float("nan")
    n = float(np.asarray(n).item())
    return float(max(2, math.ceil(n - 1e-9))) if np.isfinite(n) else float("nan")
