"""Tests of between-subjects effects: univariate two-way ANOVA per dependent variable.

Type III sums of squares with sum-to-zero coding (what SPSS prints), plus partial eta
squared = SS_effect / (SS_effect + SS_error) and the effect as a percentage of the mean
(pathdiv.analysis.stats.effects).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from statsmodels.formula.api import ols
from statsmodels.stats.anova import anova_lm

from pathdiv.analysis.stats.effects import anova_effect_pct
from pathdiv.analysis.stats.model import model_frame

ANOVA_COLUMNS = ["dv", "effect", "sum_sq", "df", "f", "p", "partial_eta_sq", "effect_pct"]


def type3_anova(data: pd.DataFrame, ivs: Sequence[str], dv: str) -> pd.DataFrame:
    """Type III ANOVA of one dependent variable on the full factorial of `ivs`.

    Rows: Intercept, each main effect, the interaction, Residual. The residual row has
    no F, p or partial eta squared (NaN there is by definition, not a failure).
    """
    frame = model_frame(data, ivs, [dv])
    fitted = ols(f"y0 ~ {frame.rhs()}", data=frame.data).fit()
    table = anova_lm(fitted, typ=3)
    ss_error = float(table.loc["Residual", "sum_sq"])
    rows = []
    for term, line in table.iterrows():
        is_residual = term == "Residual"
        ss = float(line["sum_sq"])
        denominator = ss + ss_error
        rows.append(
            {
                "dv": dv,
                "effect": "Residual" if is_residual else frame.effect_name(str(term)),
                "sum_sq": ss,
                "df": float(line["df"]),
                "f": float("nan") if is_residual else float(line["F"]),
                "p": float("nan") if is_residual else float(line["PR(>F)"]),
                "partial_eta_sq": (
                    float("nan") if is_residual or denominator == 0 else ss / denominator
                ),
            }
        )
    out = pd.DataFrame(rows, columns=ANOVA_COLUMNS)
    out["effect_pct"] = anova_effect_pct(out, data, ivs)
    return out
