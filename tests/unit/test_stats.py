"""analyze_metrics on synthetic study-shaped metrics: planted effects, null effects,
degenerate input, and the shape of what it returns."""

import json

import numpy as np
import pandas as pd
import pytest

from pathdiv.analysis.stats.posthoc import holm
from pathdiv.analysis.stats.rankings import percent_difference
from pathdiv.analysis.stats.spec import AnalysisSpec
from pathdiv.analysis.stats.study import analyze_metrics
from tests.support.study_data import synthetic_metrics

STUDY_REPETITIONS = 4  # the reference experiment's repetitions per configuration
PLANTED = {"switching": {
    "static-tcp": {"goodput_mbps": -2.0, "throughput_mbps": -2.0},
    "ps-mptcp": {"goodput_mbps": 2.0, "fct_s": -2.0},
}}


def one_cluster(seed: int, **kwargs) -> pd.DataFrame:
    return synthetic_metrics(seed, repetitions=STUDY_REPETITIONS, conditions=["noisy"],
                             flow_types=["short"], **kwargs)


def test_planted_switching_effect_is_found():
    for seed in range(3):
        result = analyze_metrics(one_cluster(seed, effects=PLANTED)).clusters[0]
        assert result.manova_p("switching") < 0.001, seed
        goodput = result.anova[(result.anova.dv == "goodput_mbps")
                               & (result.anova.effect == "switching")]
        assert goodput.p.iloc[0] < 0.001
        assert goodput.partial_eta_sq.iloc[0] > 0.14  # a large effect


def test_null_host_factor_rarely_significant():
    runs = 20
    significant = sum(
        analyze_metrics(one_cluster(100 + seed, effects=PLANTED)).clusters[0].manova_p("host")
        < 0.05
        for seed in range(runs)
    )
    assert significant <= runs * 0.10


def test_planted_effect_ranks_first_with_percent_difference():
    result = analyze_metrics(one_cluster(5, effects=PLANTED)).clusters[0]
    ranks = result.rankings[(result.rankings.dv == "goodput_mbps")
                            & (result.rankings.grouping == "switching")]
    top, second = ranks.iloc[0], ranks.iloc[1]
    assert top.level == "ps-mptcp" and top["rank"] == 1
    assert top.pct_vs_next == pytest.approx((top["mean"] - second["mean"]) / second["mean"] * 100)
    assert top.ci_low < top["mean"] < top.ci_high
    fct = result.rankings[(result.rankings.dv == "fct_s")
                          & (result.rankings.grouping == "switching")]
    assert fct.iloc[0].level == "ps-mptcp"  # lower FCT ranks first
    pairs = result.posthoc[(result.posthoc.dv == "goodput_mbps")
                           & (result.posthoc.grouping == "switching")
                           & result.posthoc.significant]
    assert any("ps-mptcp" in (a, b) for a, b in zip(pairs.level_a, pairs.level_b, strict=True))


def test_every_manova_statistic_and_assumption_reported():
    study = analyze_metrics(synthetic_metrics(9, repetitions=STUDY_REPETITIONS))
    assert len(study.clusters) == 6
    cluster = study.clusters[0]
    assert set(cluster.manova.statistic) == {"pillai", "wilks", "hotelling_lawley", "roy"}
    assert set(cluster.manova.effect) == {"switching", "host", "switching:host"}
    assert not cluster.manova[["value", "f", "num_df", "den_df", "p"]].isna().any().any()
    names = {a.name for a in cluster.assumptions}
    assert names == {
        "observations per cell", "normality per cell (Shapiro-Wilk)",
        "multivariate outliers (Mahalanobis)", "equal covariance matrices (Box's M)",
        "equal variances (Levene)", "correlation among dependent variables",
    }
    assert all(a.status in {"passed", "violated", "not computable"} and a.meaning
               for a in cluster.assumptions)
    # 4 per cell with 4 DVs: too few to estimate each cell's covariance matrix.
    by_name = {a.name: a for a in cluster.assumptions}
    assert by_name["observations per cell"].status == "violated"
    assert by_name["equal covariance matrices (Box's M)"].status == "not computable"
    table = study.table("manova")
    assert list(table.columns[:2]) == ["condition", "flow_type"]
    assert len(table) == 6 * 3 * 4
    assert len(study.excess_traffic) == 6 * 10
    json.dumps(study.to_dict(), allow_nan=False)
    assert "switching: Pillai's trace" in study.summary()


def test_box_m_passes_when_covariances_equal():
    result = analyze_metrics(synthetic_metrics(4, repetitions=12, conditions=["silent"],
                                               flow_types=["long"])).clusters[0]
    box = next(a for a in result.assumptions if a.name.startswith("equal covariance"))
    assert box.status == "passed"


def test_outlier_is_flagged_by_run_id():
    metrics = one_cluster(2)
    metrics.loc[7, "fct_s"] += 50 * 0.2  # 50 standard deviations
    result = analyze_metrics(metrics).clusters[0]
    check = next(a for a in result.assumptions if a.name.startswith("multivariate outliers"))
    assert check.status == "violated"
    assert [d["observation"] for d in check.details] == [metrics.loc[7, "run_id"]]


def _no_nan_tables(cluster) -> None:
    assert not cluster.manova.isna().any().any()
    effects = cluster.anova[cluster.anova.effect != "Residual"]
    assert not effects[["sum_sq", "df", "f", "p", "partial_eta_sq"]].isna().any().any()
    json.dumps(cluster.to_dict(), allow_nan=False)


def test_cell_with_one_observation_is_reported_not_crashed():
    metrics = one_cluster(3)
    cell = metrics[(metrics.switching == "ps-tcp") & (metrics.host == "rb")].index
    metrics = metrics.drop(cell[1:])
    result = analyze_metrics(metrics).clusters[0]
    assert result.status == "skipped"
    assert any("Too few observations" in m and "ps-tcp / rb: 1" in m for m in result.messages)
    _no_nan_tables(result)


def test_missing_configuration_is_reported():
    metrics = one_cluster(3)
    metrics = metrics[~((metrics.switching == "ps-tcp") & (metrics.host == "rb"))]
    result = analyze_metrics(metrics).clusters[0]
    assert result.status == "skipped"
    assert any("no observations (ps-tcp / rb)" in m for m in result.messages)


def test_constant_dv_is_left_out_with_a_message():
    metrics = one_cluster(3, effects=PLANTED)
    metrics["utilization"] = 1.0
    result = analyze_metrics(metrics).clusters[0]
    assert any("utilization is constant" in m for m in result.messages)
    assert "utilization" not in result.manova_dvs
    assert result.manova_p("switching") < 0.001
    _no_nan_tables(result)


def test_dv_constant_within_cells_is_left_out():
    metrics = one_cluster(3)
    metrics["utilization"] = metrics.switching.map(lambda s: 0.25 if "static" in s else 1.0)
    result = analyze_metrics(metrics).clusters[0]
    assert any("utilization does not vary within any cell" in m for m in result.messages)
    _no_nan_tables(result)


def test_linearly_dependent_dvs_give_singular_message():
    metrics = one_cluster(3, effects=PLANTED)
    metrics["goodput_mbps"] = 0.9 * metrics["throughput_mbps"]
    result = analyze_metrics(metrics).clusters[0]
    assert any("singular" in m and "goodput_mbps" in m for m in result.messages)
    assert result.manova_dvs == ["throughput_mbps", "fct_s", "utilization"]
    assert result.manova_p("switching") < 0.001
    _no_nan_tables(result)


def test_single_level_factor_falls_back_to_one_way():
    metrics = one_cluster(3, effects=PLANTED)
    metrics = metrics[metrics.host == "vanilla"]
    result = analyze_metrics(metrics).clusters[0]
    assert any("host has a single level (vanilla)" in m for m in result.messages)
    assert set(result.manova.effect) == {"switching"}
    assert result.manova_p("switching") < 0.05
    _no_nan_tables(result)


def test_too_few_error_df_skips_only_manova():
    metrics = synthetic_metrics(3, repetitions=2, conditions=["noisy"], flow_types=["short"],
                                switching=["ecmp-tcp", "ps-tcp"])
    spec = AnalysisSpec(dvs=("throughput_mbps", "goodput_mbps", "fct_s", "utilization",
                             "excess_pct", "path_0_share"))
    result = analyze_metrics(metrics, spec).clusters[0]
    assert any("4 error degrees of freedom" in m and "6 dependent variables" in m
               for m in result.messages)
    assert result.manova.empty
    assert set(result.anova.dv) == set(spec.dvs)
    _no_nan_tables(result)


def test_missing_rows_and_columns():
    metrics = one_cluster(3)
    metrics.loc[0, "fct_s"] = np.nan
    study = analyze_metrics(metrics.drop(columns="utilization"))
    assert "utilization" in study.notes[0]
    assert any("1 of 40 observations dropped" in m for m in study.clusters[0].messages)
    with pytest.raises(ValueError, match=r"lacks factor column\(s\) \['host'\]"):
        analyze_metrics(metrics.drop(columns="host"))


def test_spec_rejects_bad_values():
    with pytest.raises(ValueError, match="alpha is 5"):
        AnalysisSpec(alpha=5)
    with pytest.raises(ValueError, match="expected a list of column names"):
        AnalysisSpec(dvs="fct_s")
    with pytest.raises(ValueError, match="both a cluster and an independent variable"):
        AnalysisSpec(clusters=("host",))


def test_holm_and_percent_difference():
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert percent_difference(101.65, 100.0) == pytest.approx(1.65)
    assert percent_difference(1.0, 0.0) is None
