"""Decide what can be fitted in one cluster, and say plainly why not when it cannot.

Degenerate inputs (a factor with one level, an empty or too small cell, a constant
variable, dependent variables that are linear copies of each other, too few residual
degrees of freedom) become messages and a reduced model, never an exception or NaN.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import product

import numpy as np
import pandas as pd

MIN_PER_CELL = 2
RANK_TOLERANCE = 1e-9


@dataclass
class Screen:
    """The outcome of screening one cluster: what to fit, and the messages."""

    data: pd.DataFrame
    ivs: list[str]
    anova_dvs: list[str]
    manova_dvs: list[str]
    messages: list[str] = field(default_factory=list)
    fit_models: bool = True
    fit_manova: bool = True


def screen_cluster(data: pd.DataFrame, ivs: Sequence[str], dvs: Sequence[str]) -> Screen:
    """Screen one cluster's rows for the factorial model of `dvs` on `ivs`."""
    messages: list[str] = []
    used_dvs = list(dvs)
    frame = data.copy()
    for dv in used_dvs:
        frame[dv] = pd.to_numeric(frame[dv], errors="coerce")
    before = len(frame)
    frame = frame.dropna(subset=[*ivs, *used_dvs])
    if len(frame) < before:
        messages.append(
            f"{before - len(frame)} of {before} observations dropped for missing values "
            f"in {', '.join([*ivs, *used_dvs])}."
        )
    screen = Screen(frame, list(ivs), list(used_dvs), list(used_dvs), messages)
    if frame.empty:
        return _stop(screen, "No observation has all factor and metric values; nothing to test.")

    kept_ivs = []
    for iv in ivs:
        levels = frame[iv].astype(str).unique()
        if len(levels) < 2:
            messages.append(
                f"Factor {iv} has a single level ({levels[0]}) in this cluster, so its effect "
                "cannot be tested; the model uses the other factor only."
            )
        else:
            kept_ivs.append(iv)
    screen.ivs = kept_ivs
    if not kept_ivs:
        return _stop(screen, "No factor has two or more levels here; there is nothing to compare.")

    counts = frame.groupby(kept_ivs, observed=True).size()
    observed = {tuple(str(x) for x in (k if isinstance(k, tuple) else (k,))): int(v)
                for k, v in counts.items()}
    all_cells = list(product(*(sorted(frame[iv].astype(str).unique()) for iv in kept_ivs)))
    empty = [c for c in all_cells if c not in observed]
    if empty:
        listed = "; ".join(" / ".join(c) for c in empty[:5])
        return _stop(
            screen,
            f"{len(empty)} cell(s) have no observations ({listed}); the factorial model with "
            "interaction needs every combination of levels. Run the missing configurations.",
        )
    small = {c: n for c, n in observed.items() if n < MIN_PER_CELL}
    if small:
        listed = "; ".join(f"{' / '.join(c)}: {n}" for c, n in list(small.items())[:5])
        return _stop(
            screen,
            f"Too few observations in {len(small)} cell(s) ({listed}); each cell needs at "
            f"least {MIN_PER_CELL} to estimate error. Add repetitions.",
        )

    cell_means = frame.groupby(kept_ivs, observed=True)[used_dvs].transform("mean")
    residuals = frame[used_dvs] - cell_means
    anova_dvs = []
    for dv in used_dvs:
        if np.ptp(frame[dv].to_numpy()) == 0:
            messages.append(
                f"{dv} is constant ({frame[dv].iloc[0]:g}) in this cluster: it cannot differ "
                "between configurations, so it is left out of the tests."
            )
        elif float((residuals[dv] ** 2).sum()) <= RANK_TOLERANCE * float(
            ((frame[dv] - frame[dv].mean()) ** 2).sum()
        ):
            messages.append(
                f"{dv} does not vary within any cell (every repetition gave the same value): "
                "there is no error variance to test against, so it is left out of the tests."
            )
        else:
            anova_dvs.append(dv)
    screen.anova_dvs = anova_dvs
    if not anova_dvs:
        screen.manova_dvs = []
        return _stop(screen, "No dependent variable varies within cells; nothing can be tested.")

    screen.manova_dvs = list(anova_dvs)
    error_df = len(frame) - len(all_cells)
    if error_df < len(anova_dvs):
        screen.fit_manova = False
        messages.append(
            f"MANOVA not computed: {error_df} error degrees of freedom (observations minus "
            f"cells) for {len(anova_dvs)} dependent variables; it needs at least as many. "
            "Add repetitions or use fewer dependent variables. The univariate tests below "
            "are still valid."
        )
        return screen
    manova_dvs = _independent_dvs(residuals[anova_dvs])
    dropped = [dv for dv in anova_dvs if dv not in manova_dvs]
    if dropped:
        messages.append(
            f"The within-cell covariance matrix is singular: {', '.join(dropped)} "
            f"{'is a linear combination' if len(dropped) == 1 else 'are linear combinations'}"
            f" of {', '.join(manova_dvs)}, so the MANOVA uses {', '.join(manova_dvs)} only."
        )
    screen.manova_dvs = manova_dvs
    return screen


def _independent_dvs(residuals: pd.DataFrame) -> list[str]:
    """Keep variables in order while each adds a new direction to the residual space."""
    kept: list[str] = []
    matrix = residuals.to_numpy(dtype=float)
    scale = np.abs(matrix).max(axis=0)
    scale[scale == 0] = 1.0
    matrix = matrix / scale
    for i, name in enumerate(residuals.columns):
        candidate = matrix[:, [residuals.columns.get_loc(k) for k in kept] + [i]]
        singular = np.linalg.svd(candidate, compute_uv=False)
        if singular.min() > RANK_TOLERANCE * max(singular.max(), 1.0) * np.sqrt(len(matrix)):
            kept.append(name)
    return kept


def _stop(screen: Screen, message: str) -> Screen:
    screen.messages.append(message)
    screen.fit_models = False
    screen.fit_manova = False
    return screen
