"""The study's figures beside ours: agreement marks on a planted dataset, the excess
table against the study's ranges, and reference files that say where numbers come from."""

import pandas as pd
import pytest

from pathdiv.analysis.stats.reference import (
    NOT_MEASURED,
    OPPOSITE,
    SAME_NOT_SIGNIFICANT,
    SAME_SIGNIFICANT,
    ReferenceError,
    available,
    compare_directions,
    compare_excess,
    load_reference,
    mark,
    parse_reference,
)
from pathdiv.analysis.stats.spec import AnalysisSpec
from pathdiv.analysis.stats.study import analyze_metrics
from tests.support.study_data import synthetic_metrics

CLAIMS = {
    "name": "planted", "study": "a planted study", "source": "this test",
    "directions": [
        {"id": "strong", "claim": "ps-mptcp has the better goodput", "where": {},
         "factor": "switching", "pairs": [["ps-mptcp", "ecmp-mptcp"]],
         "metrics": ["goodput_mbps"]},
        {"id": "faint", "claim": "ps-tcp is faster", "where": {"condition": "noisy"},
         "factor": "switching", "pairs": [["ps-tcp", "ecmp-tcp"]], "metrics": ["fct_s"]},
        {"id": "wrong", "claim": "ecmp-mptcp has the better goodput",
         "where": {"flow_type": "long"}, "factor": "switching",
         "pairs": [["ecmp-mptcp", "ps-mptcp"]], "metrics": ["goodput_mbps"]},
        {"id": "absent", "claim": "rb beats nothing", "where": {}, "factor": "host",
         "pairs": [["rb", "bbr"]], "metrics": ["fct_s"]},
    ],
    "excess_traffic": [
        {"condition": "noisy", "flow_type": "long", "configurations": "all",
         "low_pct": 51, "high_pct": 58},
        {"condition": "silent", "flow_type": "long", "configurations": ["ps-tcp/rb"],
         "low_pct": 0, "high_pct": 100},
    ],
}


@pytest.fixture(scope="module")
def planted():
    # ps-mptcp: +4 sd goodput everywhere (significant); ps-tcp: 0.3 sd faster (lower FCT),
    # too small to be significant with 4 repetitions
    metrics = synthetic_metrics(5, repetitions=4, effects={"switching": {
        "ps-mptcp": {"goodput_mbps": 4.0}, "ps-tcp": {"fct_s": -0.3}}})
    results = analyze_metrics(metrics, AnalysisSpec())
    table = compare_directions(parse_reference(CLAIMS), [(c.key, c.posthoc)
                                                         for c in results.clusters],
                               AnalysisSpec().lower_is_better, 0.05)
    return results, table


def test_a_planted_strong_effect_is_same_direction_and_significant(planted):
    _, table = planted
    strong = table[table.claim_id == "strong"]
    assert len(strong) == 6  # every cluster
    assert set(strong["mark"]) == {SAME_SIGNIFICANT}
    assert (strong.mean_better > strong.mean_worse).all()


def test_a_faint_effect_is_same_direction_but_not_significant(planted):
    _, table = planted
    faint = table[table.claim_id == "faint"]
    assert set(faint.cluster) == {"condition=noisy / flow_type=query",
                                  "condition=noisy / flow_type=short",
                                  "condition=noisy / flow_type=long"}
    # FCT is lower-is-better: "faster" means a smaller mean
    same = faint[faint["mark"] != OPPOSITE]
    assert (same.mean_better < same.mean_worse).all()
    assert SAME_NOT_SIGNIFICANT in set(faint["mark"])
    assert SAME_SIGNIFICANT not in set(faint["mark"])


def test_a_claim_against_the_data_is_opposite_and_a_missing_level_not_measured(planted):
    _, table = planted
    wrong = table[table.claim_id == "wrong"]
    assert len(wrong) == 2 and set(wrong["mark"]) == {OPPOSITE}
    assert set(table[table.claim_id == "absent"]["mark"]) == {NOT_MEASURED}


def test_marks_follow_the_metrics_direction():
    assert mark(1.0, 2.0, lower_is_better=True, p_holm=0.01, alpha=0.05) == SAME_SIGNIFICANT
    assert mark(1.0, 2.0, lower_is_better=False, p_holm=0.01, alpha=0.05) == OPPOSITE
    assert mark(2.0, 1.0, lower_is_better=False, p_holm=0.2, alpha=0.05) == SAME_NOT_SIGNIFICANT
    assert mark(2.0, 2.0, lower_is_better=False, p_holm=0.9, alpha=0.05) == OPPOSITE
    assert mark(float("nan"), 1.0, False, 0.01, 0.05) == NOT_MEASURED


def test_excess_traffic_beside_the_studys_ranges():
    ours = pd.DataFrame([
        {"condition": "noisy", "flow_type": "long", "configuration": "ps-tcp/rb", "mean": 9.0},
        {"condition": "noisy", "flow_type": "long", "configuration": "ecmp-tcp/rb",
         "mean": 55.0},
        {"condition": "silent", "flow_type": "long", "configuration": "ecmp-tcp/rb",
         "mean": 5.0},
        {"condition": "silent", "flow_type": "long", "configuration": "ps-tcp/rb",
         "mean": 5.0},
    ])
    table = compare_excess(parse_reference(CLAIMS), ours)
    assert list(table.versus) == ["below", "within", "no figure in the reference", "within"]
    assert list(table.study_pct) == ["51–58", "51–58", "–", "0–100"]
    no_table = parse_reference({**CLAIMS, "excess_traffic": []})
    assert compare_excess(no_table, ours).empty  # a study without Table IV adds none


def test_the_shipped_references_hold_the_studys_figures_with_their_source():
    assert {"seed000", "seed001"} <= set(available())
    study = load_reference("seed001")
    assert "issue 14" in study.source and study.missing
    (table4,) = study.excess
    assert (table4.condition, table4.flow_type, table4.low_pct, table4.high_pct) == (
        "noisy", "long", 51.0, 58.0)
    assert {d.id for d in study.directions} == {
        "spray-beats-ecmp-noisy", "mptcp-penalises-short", "spray-raises-utilisation"}
    (rb,) = load_reference("seed000").directions
    assert (rb.factor, rb.pairs, rb.metrics) == ("host", [("rb", "vanilla")], ["fct_s"])


def test_a_bad_reference_names_what_is_wrong():
    with pytest.raises(ReferenceError, match=r"'seed9' is not a reference; choose one of "
                       r"seed000, seed001"):
        load_reference("seed9")
    with pytest.raises(ReferenceError, match=r"directions\[0\]: key 'pairs' missing"):
        parse_reference({"name": "x", "study": "x", "source": "x",
                         "directions": [{"id": "a", "claim": "b", "factor": "c",
                                         "metrics": []}]})
