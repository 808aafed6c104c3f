"""Verdicts by what a claim says, on planted data whose truth is known: a "no difference"
claim with a true 10 % difference at n = 8 is inconclusive, never agreement; a true
equivalence with a tight interval agrees; a figure inside a tight interval agrees,
outside it disagrees, inside a wide one is inconclusive; a significant direction under
the smallest effect of interest is negligible; a stand-in level is not comparable and
never counted; a comparison two claims read is counted once."""

import numpy as np
import pandas as pd
import pytest

from pathdiv.analysis.stats import verdicts as v
from pathdiv.analysis.stats.agreement import mark_claims, tally
from pathdiv.analysis.stats.claims import ReferenceError, parse_reference

# eight values with mean 0 and standard deviation 1 (sample), in two orders
Z8 = np.array([-1.5, -1.0, -0.5, -0.1, 0.1, 0.5, 1.0, 1.5])
Z8 = (Z8 - Z8.mean()) / Z8.std(ddof=1)
Z8B = Z8[[3, 6, 0, 5, 2, 7, 1, 4]]


def _metrics(a_values, b_values, metric="goodput_mbps"):
    rows = [{"condition": "noisy", "flow_type": "short", "switching": "a", metric: x}
            for x in a_values]
    rows += [{"condition": "noisy", "flow_type": "short", "switching": "b", metric: x}
             for x in b_values]
    return pd.DataFrame(rows)


def _reference(*claims, levels=None):
    return parse_reference({"name": "planted", "study": "planted", "source": "tests",
                            "levels": levels or {}, "claims": list(claims)})


def _claim(kind, metric="goodput_mbps", **extra):
    return {"id": f"c-{kind}", "section": "1", "kind": kind, "claim": kind, "where": {},
            "compare": [[{"switching": "a"}, {"switching": "b"}]], "metrics": [metric],
            **extra}


def _judge(kind, a_values, b_values, metric="goodput_mbps", **extra):
    table = mark_claims(_reference(_claim(kind, metric, **extra)),
                        _metrics(a_values, b_values, metric))
    (row,) = table.itertuples(index=False)
    return row


def test_no_difference_with_a_true_10_pct_difference_at_n_8_is_inconclusive():
    row = _judge("no_difference", 110 + 15 * Z8, 100 + 15 * Z8B)
    assert row.n_a == row.n_b == 8
    assert row.effect_pct == pytest.approx(10.0)
    assert row.p > 0.05  # the difference is real but this sample cannot show it
    assert row.verdict == v.INCONCLUSIVE and "not shown" in row.why
    assert row.ci_low_pct < -1 and row.ci_high_pct > 10  # the CI beside the p
    assert row.detectable_pct > 10  # what the cell could have detected


def test_no_difference_with_a_true_equivalence_and_a_tight_ci_agrees():
    row = _judge("no_difference", 100 + 0.2 * np.tile(Z8, 2), 100 + 0.2 * np.tile(Z8B, 2))
    assert -1 < row.ci_low_pct < row.ci_high_pct < 1
    assert row.p_margin < 0.05 and row.verdict == v.AGREE
    assert row.margin_pct == 1.0  # analysis.min_effect_pct, the default margin


def test_a_significant_difference_beyond_the_margin_disagrees_with_no_difference():
    row = _judge("no_difference", 110 + 1.0 * Z8, 100 + 1.0 * Z8B)
    assert row.p < 0.001 and row.verdict == v.DISAGREE


def test_a_stated_margin_replaces_the_smallest_effect_of_interest():
    row = _judge("no_difference", 103 + 0.5 * np.tile(Z8, 2), 100 + 0.5 * np.tile(Z8B, 2),
                 margin_pct=5)
    assert row.margin_pct == 5 and row.verdict == v.AGREE


def test_a_figure_inside_a_tight_ci_agrees_and_outside_it_disagrees():
    a, b = 110 + 0.5 * np.tile(Z8, 2), 100 + 0.5 * np.tile(Z8B, 2)
    inside = _judge("figure", a, b, paper_pct=10.0)
    assert inside.ci_low_pct < 10 < inside.ci_high_pct and inside.verdict == v.AGREE
    outside = _judge("figure", a, b, paper_pct=20.0)
    assert outside.verdict == v.DISAGREE and "outside our CI" in outside.why


def test_a_figure_inside_a_wide_ci_is_inconclusive():
    row = _judge("figure", 110 + 15 * Z8, 100 + 15 * Z8B, paper_pct=1.65)
    assert row.ci_low_pct < 1.65 < row.ci_high_pct
    assert row.verdict == v.INCONCLUSIVE and "wider than" in row.why


def test_a_direction_significant_but_under_the_margin_is_negligible():
    row = _judge("better", 100.5 + 0.1 * np.tile(Z8, 2), 100 + 0.1 * np.tile(Z8B, 2))
    assert row.p < 1e-6 and 0 < row.effect_pct < 1
    assert row.verdict == v.NEGLIGIBLE


def test_a_direction_agrees_only_when_significant_and_large_enough():
    assert _judge("better", 110 + Z8, 100 + Z8B).verdict == v.AGREE
    assert _judge("better", 90 + Z8, 100 + Z8B).verdict == v.DISAGREE
    weak = _judge("better", 110 + 15 * Z8, 100 + 15 * Z8B)
    assert weak.verdict == v.INCONCLUSIVE and "detectable >=" in weak.why
    # lower is better for FCT: a shorter FCT is the better one
    assert _judge("better", 0.9 + 0.01 * Z8, 1.0 + 0.01 * Z8B, "fct_s").verdict == v.AGREE


def test_non_inferiority_and_non_superiority_need_the_one_sided_test():
    same = (100 + 0.2 * np.tile(Z8, 2), 100 + 0.2 * np.tile(Z8B, 2))
    assert _judge("not_worse", *same).verdict == v.AGREE
    assert _judge("not_better", *same).verdict == v.AGREE
    # a clearly better: not worse holds, not better fails
    better = (120 + np.tile(Z8, 2), 100 + np.tile(Z8B, 2))
    assert _judge("not_worse", *better).verdict == v.AGREE
    assert _judge("not_better", *better).verdict == v.DISAGREE
    # a noisy 20 % shortfall at n = 8 shows nothing either way
    assert _judge("not_worse", 80 + 30 * Z8, 100 + 30 * Z8B).verdict == v.INCONCLUSIVE


def test_each_row_carries_raw_and_family_adjusted_p_and_names_its_family():
    claim = _claim("better")
    claim["metrics"] = ["goodput_mbps", "throughput_mbps"]
    metrics = _metrics(110 + 5 * Z8, 100 + 5 * Z8B)
    metrics["throughput_mbps"] = metrics["goodput_mbps"] * 1.01
    table = mark_claims(_reference(claim), metrics)
    assert (table.p_adj >= table.p).all() and (table.p_adj > table.p).any()
    assert set(table.family) == {"c-better: 2 tests in this folder, Holm"}


def test_a_stand_in_level_is_not_comparable_and_never_counted():
    levels = {"switching": {"a": {"ours": "a", "stands_in": "a only stands in for A"},
                            "b": "b"}}
    reference = _reference(_claim("better"), levels=levels)
    table = mark_claims(reference, _metrics(110 + Z8, 100 + Z8B))
    (row,) = table.itertuples(index=False)
    assert row.verdict == v.NOT_COMPARABLE and row.why == "a only stands in for A"
    assert not row.counted and tally(table)["agree"] == 0
    assert tally(table)[v.NOT_COMPARABLE] == 1
    assert reference.stand_ins == {"switching": {"a": "a only stands in for A"}}


def test_a_comparison_two_claims_read_is_counted_once():
    first = _claim("better")
    second = {**_claim("not_worse"), "id": "later"}
    table = mark_claims(_reference(first, second), _metrics(110 + Z8, 100 + Z8B))
    assert list(table.counted) == [True, False]
    assert list(table.counted_under) == ["", "c-better"]
    assert tally(table)["agree"] == 1


def test_utilisation_is_tallied_apart():
    table = mark_claims(_reference(_claim("better", "utilization")),
                        _metrics(0.9 + 0.01 * Z8, 0.5 + 0.01 * Z8B, "utilization"))
    counts = tally(table)
    assert counts["agree"] == 0 and counts["agree (utilisation)"] == 1


def test_constant_groups_need_no_test():
    est = v.estimate(np.full(4, 2.0), np.full(4, 2.0))
    assert est.p == 1.0 and est.ci_low == est.ci_high == 0.0
    est = v.estimate(np.full(4, 3.0), np.full(4, 2.0))
    assert est.p == 0.0 and est.effect_pct == 50.0


def test_margins_and_tolerances_belong_to_their_kinds():
    with pytest.raises(ReferenceError, match=r"margin_pct: 5.0; a margin > 0 belongs to"):
        _reference(_claim("better", margin_pct=5))
    with pytest.raises(ReferenceError, match=r"tolerance_pct: 2.0; a tolerance >= 0 belongs"):
        _reference(_claim("better", tolerance_pct=2))
    with pytest.raises(ReferenceError, match=r"expected our level name or \{ours:"):
        _reference(_claim("better"), levels={"switching": {"a": {"ours": "a"}}})
