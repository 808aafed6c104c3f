"""Agreement marks on a planted dataset: effects that are there are marked as such, one
planted against the study is marked opposite and significant, Table IV cells are placed
within / below / above, and negligible effects are told apart from real ones."""

import numpy as np
import pandas as pd
import pytest

from pathdiv.analysis.stats.agreement import (
    NO,
    NOT_MEASURED,
    OPPOSITE_SIGNIFICANT,
    SAME_NOT_SIGNIFICANT,
    SAME_SIGNIFICANT,
    UNKNOWN,
    YES,
    mark_claims,
    practical,
    tally,
)
from pathdiv.analysis.stats.claims import load_reference
from tests.support.study_data import synthetic_metrics

SWITCHING = ("static-tcp", "ps-tcp", "ecmp-mptcp", "ps-mptcp")
HOSTS = ("vanilla", "reorder-resilient")


@pytest.fixture(scope="module")
def planted():
    metrics = synthetic_metrics(3, repetitions=10, switching=SWITCHING, hosts=HOSTS, effects={
        "switching": {"ps-mptcp": {"utilization": 5.0}},
        "host": {"reorder-resilient": {"fct_s": 4.0, "utilization": 3.0}},  # slower, spreads more
    })
    # silent network: ECMP clearly better goodput than spraying (against V.D)
    silent_ps = (metrics.condition == "silent") & (metrics.switching == "ps-mptcp")
    metrics.loc[silent_ps, "goodput_mbps"] -= 5.0
    # Table IV: noisy query planted at the paper's figures; noisy long at a third of them
    table = {"static-tcp": (16.29, 51.16), "ps-tcp": (23.61, 54.37),
             "ecmp-mptcp": (31.25, 57.80), "ps-mptcp": (31.65, 58.10)}
    rng = np.random.default_rng(0)
    for sw, (query, long) in table.items():
        for flow, value in (("query", query), ("long", long / 3)):
            rows = ((metrics.condition == "noisy") & (metrics.flow_type == flow)
                    & (metrics.switching == sw))
            metrics.loc[rows, "excess_pct"] = value + 0.1 * rng.standard_normal(rows.sum())
    return mark_claims(load_reference("seed001"), metrics)


def _rows(table, claim_id, **where):
    rows = table[table.claim_id == claim_id]
    for k, v in where.items():
        rows = rows[rows[k] == v]
    return rows


def test_a_planted_effect_in_the_claimed_direction_agrees(planted):
    rows = _rows(planted, "spray-raises-utilisation")
    assert len(rows) == 6  # every cluster: both conditions x three flow types
    assert set(rows["mark"]) == {SAME_SIGNIFICANT} and set(rows.agrees) == {YES}
    assert (rows.effect_pct > 10).all()


def test_a_planted_effect_against_the_claim_is_opposite_and_significant(planted):
    rows = _rows(planted, "spray-never-significantly-worse", metric="goodput_mbps")
    silent = rows[rows.cluster.str.contains("silent")]
    noisy = rows[rows.cluster.str.contains("noisy")]
    assert set(silent["mark"]) == {OPPOSITE_SIGNIFICANT} and set(silent.agrees) == {NO}
    assert set(noisy.agrees) == {YES}  # no planted difference: never significantly worse


def test_juggler_claims_use_the_mptcp_levels_of_the_named_clusters(planted):
    rows = _rows(planted, "juggler-slower-silent", metric="fct_s")
    assert sorted(rows.cluster) == ["condition=silent / flow_type=query",
                                    "condition=silent / flow_type=short"]
    assert set(rows["mark"]) == {SAME_SIGNIFICANT}
    # within: ecmp-mptcp and ps-mptcp, both host levels: 2 x 10 observations a side
    assert set(rows.n_a) == {20} and set(rows.n_b) == {20}


def test_no_difference_claims_agree_only_without_significance(planted):
    rows = _rows(planted, "silent-switching-inconclusive")
    goodput = rows[rows.metric == "goodput_mbps"]
    assert set(goodput.agrees) == {NO}  # the planted silent goodput gap is significant
    fct = rows[rows.metric == "fct_s"]
    assert set(fct.agrees) <= {YES, NO} and YES in set(fct.agrees)


def test_table_iv_cells_are_within_the_tolerance_or_below(planted):
    query = planted[planted.claim_id.str.startswith("table-iv-noisy-query")]
    assert len(query) == 4 and set(query.agrees) == {YES}
    assert query["mark"].str.startswith("within 3").all()
    long = planted[planted.claim_id.str.startswith("table-iv-noisy-long")]
    assert set(long["mark"]) == {"below"} and set(long.agrees) == {NO}
    assert (long.effect_pct < -30).all()  # ours minus the paper's, in points


def test_ve_figures_compare_configurations_and_carry_the_paper_percentage(planted):
    (row,) = _rows(planted, "ve-goodput-silent-query").itertuples()
    assert (row.a, row.b) == ("ps-mptcp/vanilla", "ecmp-mptcp/vanilla")
    assert row.paper == "+1.65 %"
    assert row.agrees == NO  # planted: spraying has 5 sd less goodput on the silent network
    assert row.effect_pct < 0


def test_best_claims_rank_the_configurations(planted):
    rows = _rows(planted, "noisy-spray-juggler-best", metric="utilization")
    assert set(rows.agrees) == {YES}  # ps-mptcp has the planted utilisation
    fct = _rows(planted, "noisy-spray-juggler-best", metric="fct_s")
    assert set(fct.agrees) == {NO}  # Juggler was planted slower


def test_claims_on_levels_we_did_not_run_are_not_measured():
    metrics = synthetic_metrics(1, repetitions=3, switching=SWITCHING, hosts=("vanilla",))
    table = mark_claims(load_reference("seed001"), metrics)
    juggler = _rows(table, "juggler-slower-noisy-short")
    assert set(juggler["mark"]) == {NOT_MEASURED} and set(juggler.agrees) == {UNKNOWN}
    assert tally(table)["not measured"] >= len(juggler)


def test_rb_observations_are_outside_seed001_but_inside_seed000():
    metrics = synthetic_metrics(2, repetitions=6, switching=("ecmp-mptcp", "ps-mptcp"),
                                hosts=("vanilla", "rb"),
                                effects={"host": {"rb": {"fct_s": -3.0}}})
    marked = mark_claims(load_reference("seed000"), metrics)
    rb = marked[marked["claim_id"] == "rb-lowers-fct-under-concurrency"]
    assert len(rb) == 3 and set(rb["mark"]) == {SAME_SIGNIFICANT}
    # seed 000's burstiness and retransmission claims, one row per cluster each too
    assert len(marked) == 9
    seed001 = mark_claims(load_reference("seed001"), metrics)
    mptcp = _rows(seed001, "spray-raises-utilisation")
    assert set(mptcp.n_a) == {6}  # the rb observations are left out


def test_the_effect_screen_separates_negligible_from_real_effects():
    assert practical(1e-20, 0.1, 0.05, 1.0).startswith("significant but negligible")
    assert practical(1e-20, -2.5, 0.05, 1.0) == "significant, >= 1 %"
    assert practical(0.2, 30.0, 0.05, 1.0) == "not significant"
    assert practical(1e-3, 0.5, 0.05, 0.25) == "significant, >= 0.25 %"


def test_marks_are_direction_and_significance(planted):
    marks = set(planted["mark"])
    assert {SAME_SIGNIFICANT, OPPOSITE_SIGNIFICANT} <= marks
    assert marks <= {SAME_SIGNIFICANT, SAME_NOT_SIGNIFICANT, OPPOSITE_SIGNIFICANT,
                     "opposite, not significant", NOT_MEASURED, "within 3 points", "below",
                     "above"}
    assert isinstance(planted, pd.DataFrame)
