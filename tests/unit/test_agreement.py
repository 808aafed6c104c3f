"""Seed 001's claims judged on a planted dataset: an effect planted in the claimed
direction agrees, one planted against the study disagrees, a no-difference claim agrees
only where equivalence is shown, Table IV cells agree within the tolerance and disagree
below it, the Juggler claims are judged at the juggler level (the reorder hold is outside
the study), and a level we only stand in for makes its claims not comparable."""

import numpy as np
import pandas as pd
import pytest

from pathdiv.analysis.stats.agreement import mark_claims, tally
from pathdiv.analysis.stats.claims import load_reference, parse_reference
from pathdiv.analysis.stats.verdicts import (
    AGREE,
    DISAGREE,
    INCONCLUSIVE,
    NEGLIGIBLE,
    NOT_COMPARABLE,
    NOT_MEASURED,
)
from tests.support.study_data import synthetic_metrics

SWITCHING = ("static-tcp", "ps-tcp", "ecmp-mptcp", "ps-mptcp")
HOSTS = ("vanilla", "juggler")


@pytest.fixture(scope="module")
def planted():
    metrics = synthetic_metrics(3, repetitions=10, switching=SWITCHING, hosts=HOSTS, effects={
        "switching": {"ps-mptcp": {"utilization": 5.0}},
        "host": {"juggler": {"fct_s": 4.0, "utilization": 3.0}},  # slower, spreads more
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
    assert set(rows.verdict) == {AGREE} and rows.counted.all()
    assert (rows.effect_pct > 10).all() and (rows.ci_low_pct > 0).all()


def test_a_planted_effect_against_the_claim_disagrees(planted):
    rows = _rows(planted, "spray-never-significantly-worse", metric="goodput_mbps")
    silent = rows[rows.cluster.str.contains("silent")]
    assert set(silent.verdict) == {DISAGREE}
    # counted under the no-difference claim that reads the same silent comparisons first
    assert set(silent.counted_under) == {"silent-switching-inconclusive"}
    noisy = rows[rows.cluster.str.contains("noisy")]
    # no planted difference, but 20 observations a side cannot show non-inferiority
    # within 1 %: inconclusive, never agreement
    assert set(noisy.verdict) == {INCONCLUSIVE}


def test_juggler_claims_are_judged_at_the_juggler_level(planted):
    rows = _rows(planted, "juggler-slower-silent", metric="fct_s")
    # planted: Juggler 4 sd slower; within ecmp-mptcp and ps-mptcp, 2 x 10 a side
    assert set(rows.verdict) == {AGREE} and rows.counted.all()
    assert set(rows.n_a) == {20} and set(rows.n_b) == {20}
    rows = _rows(planted, "fct-better-without-juggler")
    assert set(rows.verdict) == {AGREE}
    silent = rows[rows.cluster.str.contains("silent")]
    assert not silent.counted.any()  # the same comparisons counted under the first claim
    assert set(silent.counted_under) == {"juggler-slower-silent"}


def test_the_reorder_hold_is_outside_seed001():
    metrics = synthetic_metrics(1, repetitions=5, switching=("ecmp-mptcp", "ps-mptcp"),
                                hosts=("vanilla", "reorder-resilient", "juggler"))
    rows = _rows(mark_claims(load_reference("seed001"), metrics), "juggler-slower-silent")
    assert set(rows.n_a) == {10} and set(rows.n_b) == {10}  # vanilla vs juggler only
    assert set(rows.b) == {"juggler"}


def test_a_level_we_only_stand_in_for_is_not_comparable_and_never_counted():
    metrics = synthetic_metrics(1, repetitions=5, switching=("ecmp-mptcp", "ps-mptcp"),
                                hosts=("vanilla", "reorder-resilient"))
    claim = {"id": "j", "section": "x", "kind": "better", "claim": "x", "where": {},
             "compare": [[{"host": "vanilla"}, {"host": "juggler"}]], "metrics": ["fct_s"]}
    ref = parse_reference({"name": "s", "study": "s", "source": "s", "claims": [claim],
                           "levels": {"host": {"vanilla": "vanilla", "juggler": {
                               "ours": "reorder-resilient",
                               "stands_in": "the reorder hold stands in for Juggler"}}}})
    rows = _rows(mark_claims(ref, metrics), "j")
    assert len(rows) == 6 and set(rows.verdict) == {NOT_COMPARABLE}
    assert not rows.counted.any() and rows.why.str.contains("stands in for Juggler").all()
    assert set(rows.n_a) == {10}  # still measured, for a reader


def test_no_difference_claims_agree_only_where_equivalence_is_shown(planted):
    rows = _rows(planted, "silent-switching-inconclusive")
    goodput = rows[rows.metric == "goodput_mbps"]
    assert set(goodput.verdict) == {DISAGREE}  # the planted silent goodput gap
    fct = rows[rows.metric == "fct_s"]
    assert set(fct.verdict) <= {AGREE, INCONCLUSIVE}
    assert (fct.p_margin_adj >= fct.p_margin).all()


def test_table_iv_cells_agree_within_the_tolerance_and_disagree_below_it(planted):
    query = planted[planted.claim_id.str.startswith("table-iv-noisy-query")]
    assert len(query) == 4 and set(query.verdict) == {AGREE}
    assert query.why.str.startswith("our CI within ± 3 points").all()
    long = planted[planted.claim_id.str.startswith("table-iv-noisy-long")]
    assert set(long.verdict) == {DISAGREE}
    assert (long.effect_pct < -30).all()  # ours minus the paper's, in points


def test_ve_figures_compare_configurations_and_carry_the_paper_percentage(planted):
    (row,) = _rows(planted, "ve-goodput-silent-query").itertuples()
    assert (row.a, row.b) == ("ps-mptcp/vanilla", "ecmp-mptcp/vanilla")
    assert row.paper == "+1.65 %"
    assert row.verdict == DISAGREE  # planted: spraying has 5 sd less goodput on silent
    assert row.ci_high_pct < 0


def test_best_claims_rank_the_configurations():
    metrics = synthetic_metrics(3, repetitions=10, switching=SWITCHING, hosts=("vanilla",),
                                effects={"switching": {"ps-mptcp": {"utilization": 5.0}}})
    best = {"id": "spray-best", "section": "x", "kind": "best", "claim": "x",
            "where": {"condition": "noisy"}, "within": {"switching": ["ecmp-mptcp",
                                                                         "ps-mptcp"]},
            "compare": [[{"switching": "ps-mptcp"}]], "metrics": ["utilization", "fct_s"]}
    planted = parse_reference({"name": "b", "study": "b", "source": "b",
                               "levels": {"switching": {s: s for s in SWITCHING}},
                               "claims": [best]})
    table = mark_claims(planted, metrics)
    util = table[table.metric == "utilization"]
    assert set(util.verdict) == {AGREE} and util.ours.str.startswith("rank 1 of 2").all()


def test_claims_on_levels_we_did_not_run_are_not_measured():
    metrics = synthetic_metrics(1, repetitions=3, switching=SWITCHING, hosts=("vanilla",))
    table = mark_claims(load_reference("seed001"), metrics)
    rows = _rows(table, "tcp-spray-juggler-gains")
    assert set(rows.verdict) == {NOT_MEASURED}  # no juggler level in these observations
    rows = _rows(table, "mptcp-raises-throughput")
    assert set(rows.verdict) <= {AGREE, NEGLIGIBLE, INCONCLUSIVE, DISAGREE}
    assert tally(table)[NOT_MEASURED] == int((table.verdict == NOT_MEASURED).sum())


def test_rb_observations_are_outside_seed001_but_inside_seed000():
    metrics = synthetic_metrics(2, repetitions=6, switching=("ecmp-mptcp", "ps-mptcp"),
                                hosts=("vanilla", "rb"),
                                effects={"host": {"rb": {"fct_s": -3.0}}})
    marked = mark_claims(load_reference("seed000"), metrics)
    rb = marked[marked["claim_id"] == "rb-lowers-fct-under-concurrency"]
    assert len(rb) == 3 and set(rb.verdict) == {AGREE}
    # seed 000's burstiness and retransmission claims, one row per cluster each too
    assert len(marked) == 9
    seed001 = mark_claims(load_reference("seed001"), metrics)
    mptcp = _rows(seed001, "spray-raises-utilisation")
    assert set(mptcp.n_a) == {6}  # the rb observations are left out


def test_mptcp_throughput_is_judged_beside_goodput(planted):
    rows = _rows(planted, "mptcp-raises-throughput")
    assert set(rows.metric) == {"throughput_mbps", "goodput_mbps"}
    assert rows.caveat.str.contains("overhead included").all()


def test_every_verdict_is_one_of_the_kinds(planted):
    assert set(planted.verdict) <= {AGREE, NEGLIGIBLE, INCONCLUSIVE, DISAGREE,
                                    NOT_COMPARABLE, NOT_MEASURED}
    assert isinstance(planted, pd.DataFrame)
