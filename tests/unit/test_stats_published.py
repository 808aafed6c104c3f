"""The statistics reproduce values R/SAS/textbooks print for published data sets.

Data and sources: tests/data/stats/README.md.
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pathdiv.analysis.stats.anova import type3_anova
from pathdiv.analysis.stats.assumptions import box_m
from pathdiv.analysis.stats.manova import manova_table

DATA = Path(__file__).resolve().parents[1] / "data" / "stats"


def _row(table: pd.DataFrame, effect: str, statistic: str) -> pd.Series:
    return table[(table.effect == effect) & (table.statistic == statistic)].iloc[0]


def _sig(value: float, expected: float, digits: int = 3) -> bool:
    """Equal to `digits` significant digits."""
    scale = 10 ** (np.floor(np.log10(abs(expected))) - digits + 1)
    return abs(value - expected) <= scale / 2 + 1e-12


def test_iris_one_way_manova_matches_r():
    iris = pd.read_csv(DATA / "iris.csv")
    table = manova_table(iris, ["Species"], ["Sepal.Length", "Petal.Length"])
    pillai = _row(table, "Species", "pillai")
    assert _sig(pillai.value, 0.9885, 4)
    assert _sig(pillai.f, 71.829, 5)
    assert (pillai.num_df, pillai.den_df) == (4, 294)


def test_plastic_two_way_manova_matches_r_and_johnson_wichern():
    plastic = pd.read_csv(DATA / "plastic.csv")
    table = manova_table(plastic, ["rate", "additive"], ["tear", "gloss", "opacity"])
    published = {
        # effect: (Pillai, F, p, Wilks)
        "rate": (0.6181, 7.5543, 0.003034, 0.3819),
        "additive": (0.4770, 4.2556, 0.02475, 0.5230),
        "rate:additive": (0.2229, 1.3385, 0.3018, 0.7771),
    }
    for effect, (pillai, f, p, wilks) in published.items():
        row = _row(table, effect, "pillai")
        assert _sig(row.value, pillai), effect
        assert _sig(row.f, f), effect
        assert _sig(row.p, p), effect
        assert (row.num_df, row.den_df) == (3, 14)
        assert _sig(_row(table, effect, "wilks").value, wilks), effect
    # R's test = "Hotelling-Lawley" and "Roy" (equal for one-df effects).
    for effect, trace in {"rate": 1.6188, "additive": 0.9119, "rate:additive": 0.2868}.items():
        for statistic in ("hotelling_lawley", "roy"):
            row = _row(table, effect, statistic)
            assert _sig(row.value, trace, 4), (effect, statistic)
            assert _sig(row.f, published[effect][1]), (effect, statistic)


def test_kidney_unbalanced_type3_anova_matches_r_car():
    kidney = pd.read_csv(DATA / "kidney.csv").drop([0, 1, 2])
    kidney["log_days"] = np.log(kidney.days + 1)
    table = type3_anova(kidney, ["duration", "weight"], "log_days").set_index("effect")
    expected = {
        "Intercept": (151.4065, 1, 279.7545, 2.379855e-22),
        "duration": (2.904723, 1, 5.367071, 0.02457384),
        "weight": (13.45718, 2, 12.43245, 3.999431e-05),
        "duration:weight": (0.1905093, 2, 0.1760025, 0.8391231),
    }
    for effect, (ss, df, f, p) in expected.items():
        row = table.loc[effect]
        assert row.df == df, effect
        assert _sig(row.sum_sq, ss, 5), effect
        assert _sig(row.f, f, 5), effect
        assert _sig(row.p, p, 4), effect
    assert _sig(table.loc["Residual", "sum_sq"], 27.60181, 5)
    assert table.loc["Residual", "df"] == 51
    # partial eta squared = SS_effect / (SS_effect + SS_error)
    assert table.loc["weight", "partial_eta_sq"] == pytest.approx(13.45718 / (13.45718 + 27.60181),
                                                                  rel=1e-5)


def test_iris_box_m_matches_r_heplots():
    iris = pd.read_csv(DATA / "iris.csv")
    check = box_m(iris, ["Species"], ["Sepal.Length", "Sepal.Width", "Petal.Length",
                                       "Petal.Width"])
    assert check.status == "violated"
    assert _sig(check.details[0]["chi2"], 140.94, 5)
    assert check.details[0]["df"] == 20
