"""Multivariate tests: MANOVA with interaction, the four classical statistics per effect.

Each effect is tested in the full factorial model with sum-to-zero coding, so the
hypotheses are the type III ones SPSS's GLM reports. The result is a tidy table, one
row per (effect, statistic).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from statsmodels.multivariate.manova import MANOVA

from pathdiv.analysis.stats.model import model_frame

STATISTICS = {
    "Pillai's trace": "pillai",
    "Wilks' lambda": "wilks",
    "Hotelling-Lawley trace": "hotelling_lawley",
    "Roy's greatest root": "roy",
}

MANOVA_COLUMNS = ["effect", "statistic", "value", "f", "num_df", "den_df", "p", "effect_pct"]


def manova_table(data: pd.DataFrame, ivs: Sequence[str], dvs: Sequence[str]) -> pd.DataFrame:
    """MANOVA of `dvs` on the full factorial of `ivs` (one or two factors).

    Returns columns effect, statistic (pillai | wilks | hotelling_lawley | roy), value,
    f, num_df, den_df, p. The intercept is not reported.
    """
    if len(dvs) < 1:
        raise ValueError("MANOVA needs at least one dependent variable; got none")
    frame = model_frame(data, ivs, dvs)
    formula = " + ".join(frame.dvs) + " ~ " + frame.rhs()
    fitted = MANOVA.from_formula(formula, data=frame.data)
    tests = fitted.mv_test(skip_intercept_test=True)
    rows = []
    for term, result in tests.results.items():
        stat = result["stat"]
        for label, key in STATISTICS.items():
            rows.append(
                {
                    "effect": frame.effect_name(term),
                    "statistic": key,
                    "value": float(stat.loc[label, "Value"]),
                    "f": float(stat.loc[label, "F Value"]),
                    "num_df": float(stat.loc[label, "Num DF"]),
                    "den_df": float(stat.loc[label, "Den DF"]),
                    "p": float(stat.loc[label, "Pr > F"]),
                    "effect_pct": float("nan"),  # filled from the ANOVAs (stats.effects)
                }
            )
    return pd.DataFrame(rows, columns=MANOVA_COLUMNS)
