"""MANOVA assumption checks, each with a verdict and what it means for the reading.

Checks: observations per cell, univariate normality per cell (Shapiro-Wilk), multivariate
outliers (Mahalanobis distance against chi-square), homogeneity of covariance matrices
(Box's M), homogeneity of variances (Levene), correlation among the dependent variables.
Every check returns an `AssumptionCheck` whose status is `passed`, `violated` or
`not computable` (with the reason), never a NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from pathdiv.analysis.stats.posthoc import holm

PASSED = "passed"
VIOLATED = "violated"
NOT_COMPUTABLE = "not computable"

# Conventional cut-offs (Tabachnick & Fidell, Using Multivariate Statistics): Box's M and
# Mahalanobis outliers are judged at p < .001 because both tests are very sensitive.
STRICT_ALPHA = 0.001
MULTICOLLINEARITY_R = 0.9


@dataclass(frozen=True)
class AssumptionCheck:
    name: str
    status: str
    summary: str
    meaning: str
    details: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "summary": self.summary,
            "meaning": self.meaning,
            "details": self.details,
        }


def _cells(data: pd.DataFrame, ivs: Sequence[str]) -> list[tuple[str, pd.DataFrame]]:
    groups = data.groupby(list(ivs), sort=True, observed=True)
    return [(" / ".join(str(k) for k in _as_tuple(key)), frame) for key, frame in groups]


def _as_tuple(key: Any) -> tuple[Any, ...]:
    return key if isinstance(key, tuple) else (key,)


def cell_counts(data: pd.DataFrame, ivs: Sequence[str], dvs: Sequence[str]) -> AssumptionCheck:
    cells = _cells(data, ivs)
    counts = {label: len(frame) for label, frame in cells}
    smallest = min(counts.values()) if counts else 0
    needed = len(dvs) + 1
    details = [{"cell": label, "n": n} for label, n in counts.items()]
    balanced = len(set(counts.values())) <= 1
    low, high = min(counts.values(), default=0), max(counts.values(), default=0)
    summary = (
        f"{len(counts)} cells, {low} observations each (balanced)" if balanced
        else f"{len(counts)} cells, {low} to {high} observations each (unbalanced)"
    )
    if smallest < needed:
        return AssumptionCheck(
            "observations per cell",
            VIOLATED,
            summary,
            f"Some cell has fewer observations ({smallest}) than dependent variables + 1 "
            f"({needed}): the cell's covariance matrix cannot be estimated, Box's M cannot "
            "be computed and the MANOVA has little power. Add repetitions.",
            details,
        )
    meaning = "Every cell has more observations than dependent variables."
    if not balanced:
        meaning += (
            " Cells are unequal; type III sums of squares handle this, and Pillai's trace "
            "is the statistic most robust to it."
        )
    return AssumptionCheck("observations per cell", PASSED, summary, meaning, details)


def normality(
    data: pd.DataFrame, ivs: Sequence[str], dvs: Sequence[str], alpha: float
) -> AssumptionCheck:
    rows: list[dict[str, Any]] = []
    for label, frame in _cells(data, ivs):
        for dv in dvs:
            values = frame[dv].to_numpy(dtype=float)
            if len(values) < 3 or np.ptp(values) == 0:
                continue
            w, p = stats.shapiro(values)
            rows.append({"cell": label, "dv": dv, "n": len(values), "w": float(w), "p": float(p)})
    name = "normality per cell (Shapiro-Wilk)"
    if not rows:
        return AssumptionCheck(
            name,
            NOT_COMPUTABLE,
            "no cell has 3 or more non-constant values",
            "Shapiro-Wilk needs at least 3 varying observations per cell; add repetitions.",
        )
    adjusted = holm([r["p"] for r in rows])
    for row, p_adj in zip(rows, adjusted, strict=True):
        row["p_holm"] = float(p_adj)
    raw_fail = sum(r["p"] < alpha for r in rows)
    fails = [r for r in rows if r["p_holm"] < alpha]
    summary = (
        f"{raw_fail} of {len(rows)} cell x variable tests have p < {alpha}; "
        f"{len(fails)} remain after Holm correction"
    )
    if fails:
        worst = ", ".join(f"{r['dv']} in {r['cell']}" for r in fails[:4])
        return AssumptionCheck(
            name,
            VIOLATED,
            summary,
            f"Values are not normally distributed within some cells ({worst}). MANOVA is "
            "fairly robust to this with equal, not-too-small cells; otherwise read p-values "
            "near alpha with caution or transform the variable (e.g. log of FCT).",
            rows,
        )
    return AssumptionCheck(
        name,
        PASSED,
        summary,
        "No cell departs detectably from normality.",
        rows,
    )


def _pooled_within(
    data: pd.DataFrame, ivs: Sequence[str], dvs: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, int]:
    """Residuals from cell means, the pooled within-cell covariance and its df."""
    values = data[list(dvs)].to_numpy(dtype=float)
    means = data.groupby(list(ivs), observed=True)[list(dvs)].transform("mean").to_numpy()
    residuals = values - means
    n_cells = data.groupby(list(ivs), observed=True).ngroups
    dof = len(data) - n_cells
    pooled = residuals.T @ residuals / max(dof, 1)
    return residuals, pooled, dof


def outliers(
    data: pd.DataFrame, ivs: Sequence[str], dvs: Sequence[str], id_column: str | None
) -> AssumptionCheck:
    name = "multivariate outliers (Mahalanobis)"
    residuals, pooled, dof = _pooled_within(data, ivs, dvs)
    if dof < len(dvs) or np.linalg.matrix_rank(pooled) < len(dvs):
        return AssumptionCheck(
            name,
            NOT_COMPUTABLE,
            "the pooled within-cell covariance matrix is singular",
            "Distances need an invertible covariance matrix: add observations or drop "
            "a dependent variable that is a copy of another.",
        )
    d2 = np.einsum("ij,jk,ik->i", residuals, np.linalg.inv(pooled), residuals)
    critical = float(stats.chi2.ppf(1 - STRICT_ALPHA, len(dvs)))
    flagged = np.flatnonzero(d2 > critical)
    ids = data[id_column].to_numpy() if id_column and id_column in data else data.index.to_numpy()
    details = [
        {"observation": str(ids[i]), "d2": float(d2[i]), "p": float(stats.chi2.sf(d2[i], len(dvs)))}
        for i in flagged
    ]
    summary = (
        f"{len(flagged)} of {len(d2)} observations beyond chi2({len(dvs)}) critical value "
        f"{critical:.2f} (p < {STRICT_ALPHA})"
    )
    if len(flagged):
        return AssumptionCheck(
            name,
            VIOLATED,
            summary,
            "Some runs are far from their cell's centre on the combined variables. MANOVA is "
            "sensitive to such outliers: look at those runs' logs (a stalled transfer, a "
            "failed capture) before trusting the effects.",
            details,
        )
    return AssumptionCheck(name, PASSED, summary, "No observation is a multivariate outlier.")


def box_m(data: pd.DataFrame, ivs: Sequence[str], dvs: Sequence[str]) -> AssumptionCheck:
    name = "equal covariance matrices (Box's M)"
    p = len(dvs)
    cells = _cells(data, ivs)
    g = len(cells)
    sizes = np.array([len(frame) for _, frame in cells], dtype=float)
    covs = [np.atleast_2d(np.cov(frame[list(dvs)].to_numpy(dtype=float), rowvar=False))
            for _, frame in cells]
    if g < 2:
        return AssumptionCheck(name, NOT_COMPUTABLE, "only one cell",
                               "Box's M compares cells; there is only one.")
    dets = [np.linalg.det(c) if n > p else 0.0 for c, n in zip(covs, sizes, strict=True)]
    if min(sizes) <= p or min(dets) <= 0:
        return AssumptionCheck(
            name,
            NOT_COMPUTABLE,
            "some cell's covariance matrix is singular (fewer observations than variables "
            "+ 1, or a variable constant within the cell)",
            "Box's M needs every cell's covariance matrix to be invertible; add repetitions. "
            "Rely on Pillai's trace, which tolerates unequal covariances best.",
        )
    total = sizes.sum()
    pooled = sum((n - 1) * c for n, c in zip(sizes, covs, strict=True)) / (total - g)
    m_stat = (total - g) * math.log(np.linalg.det(pooled)) - sum(
        (n - 1) * math.log(d) for n, d in zip(sizes, dets, strict=True)
    )
    correction = (np.sum(1 / (sizes - 1)) - 1 / (total - g)) * (
        (2 * p * p + 3 * p - 1) / (6 * (p + 1) * (g - 1))
    )
    chi2_value = m_stat * (1 - correction)
    dof = p * (p + 1) * (g - 1) / 2
    p_value = float(stats.chi2.sf(chi2_value, dof))
    summary = f"M = {m_stat:.3f}, chi2({dof:g}) = {chi2_value:.3f}, p = {p_value:.3g}"
    details = [{"m": float(m_stat), "chi2": float(chi2_value), "df": float(dof), "p": p_value}]
    if p_value < STRICT_ALPHA:
        return AssumptionCheck(
            name,
            VIOLATED,
            summary,
            f"Cells differ in how the variables vary and co-vary (p < {STRICT_ALPHA}). Report "
            "Pillai's trace rather than Wilks' lambda; with unequal cell sizes the MANOVA "
            "p-values may be off.",
            details,
        )
    return AssumptionCheck(
        name,
        PASSED,
        summary,
        f"No evidence (at p < {STRICT_ALPHA}) that the cells' covariance matrices differ.",
        details,
    )


def levene(
    data: pd.DataFrame, ivs: Sequence[str], dvs: Sequence[str], alpha: float
) -> AssumptionCheck:
    name = "equal variances (Levene)"
    cells = _cells(data, ivs)
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    for dv in dvs:
        groups = [frame[dv].to_numpy(dtype=float) for _, frame in cells]
        spreads = [np.abs(g - g.mean()) for g in groups]
        if len(groups) < 2 or min(len(g) for g in groups) < 2 or all(
            np.ptp(s) == 0 for s in spreads
        ):
            skipped.append(dv)
            continue
        statistic, p_value = stats.levene(*groups, center="mean")
        if not np.isfinite(p_value):
            skipped.append(dv)
            continue
        rows.append({"dv": dv, "f": float(statistic), "p": float(p_value)})
    if not rows:
        return AssumptionCheck(
            name,
            NOT_COMPUTABLE,
            f"no testable variable (skipped: {', '.join(skipped) or 'none'})",
            "Levene's test needs at least two observations per cell and some spread.",
        )
    failing = [r["dv"] for r in rows if r["p"] < alpha]
    summary = "; ".join(f"{r['dv']}: F = {r['f']:.3f}, p = {r['p']:.3g}" for r in rows)
    if skipped:
        summary += f"; not testable: {', '.join(skipped)}"
    if failing:
        return AssumptionCheck(
            name,
            VIOLATED,
            summary,
            f"Spread differs between cells for {', '.join(failing)}. The univariate F tests "
            "for these variables are less trustworthy, especially with unequal cells; "
            "consider a log transform or Welch-type comparisons.",
            rows,
        )
    return AssumptionCheck(name, PASSED, summary, "Spread is similar in every cell.", rows)


def dv_correlations(data: pd.DataFrame, dvs: Sequence[str]) -> AssumptionCheck:
    name = "correlation among dependent variables"
    if len(dvs) < 2:
        return AssumptionCheck(name, NOT_COMPUTABLE, "one dependent variable",
                               "Correlations need two or more dependent variables.")
    matrix = data[list(dvs)].astype(float).corr()
    pairs: list[dict[str, Any]] = []
    for i, a in enumerate(dvs):
        for b in dvs[i + 1:]:
            r = matrix.loc[a, b]
            pairs.append({"a": a, "b": b, "r": None if pd.isna(r) else float(r)})
    high = [p for p in pairs if p["r"] is not None and abs(p["r"]) > MULTICOLLINEARITY_R]
    summary = ", ".join(
        f"{p['a']}~{p['b']}: r = {p['r']:.2f}" if p["r"] is not None else f"{p['a']}~{p['b']}: -"
        for p in pairs
    )
    if high:
        listed = ", ".join(f"{p['a']} and {p['b']} (r = {p['r']:.2f})" for p in high)
        return AssumptionCheck(
            name,
            VIOLATED,
            summary,
            f"{listed} move almost together (|r| > {MULTICOLLINEARITY_R}): they carry "
            "nearly the same information, which makes the MANOVA unstable; consider keeping "
            "only one of each such pair.",
            pairs,
        )
    return AssumptionCheck(
        name,
        PASSED,
        summary,
        f"No pair of dependent variables is redundant (all |r| <= {MULTICOLLINEARITY_R}).",
        pairs,
    )


def check_assumptions(
    data: pd.DataFrame,
    ivs: Sequence[str],
    dvs: Sequence[str],
    alpha: float,
    id_column: str | None = "run_id",
) -> list[AssumptionCheck]:
    """All checks for one cluster's data (factors `ivs`, variables `dvs`)."""
    return [
        cell_counts(data, ivs, dvs),
        normality(data, ivs, dvs, alpha),
        outliers(data, ivs, dvs, id_column),
        box_m(data, ivs, dvs),
        levene(data, ivs, dvs, alpha),
        dv_correlations(data, dvs),
    ]
