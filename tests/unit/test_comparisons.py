"""The comparisons of interest the report answers first, on planted data: a planted
effect reads better (or worse, by the metric's direction), a tiny one negligible, none
equivalent where the spread allows it and inconclusive where it does not; a level that
acts on some levels only is compared where it acts; a bad pair is refused at check."""

import pandas as pd
import pytest

from pathdiv.analysis.stats.comparisons import (
    BETTER,
    EQUIVALENT,
    INCONCLUSIVE,
    NEGLIGIBLE,
    WORSE,
    compare,
    pairs_of_interest,
)
from pathdiv.analysis.stats.spec import AnalysisSpec
from pathdiv.experiments.api import ConfigError, load_config
from tests.conftest import REPO
from tests.support.study_data import synthetic_metrics

SPEC = AnalysisSpec(ivs=("switching", "host"), compare=(("ps-mptcp", "ecmp-mptcp"),
                                                        ("rb", "vanilla")))


def _finding(table, cluster, a, metric):
    rows = table[(table.cluster == cluster) & (table.a == a) & (table.metric == metric)]
    assert len(rows) == 1
    return rows.iloc[0]


@pytest.fixture(scope="module")
def planted():
    metrics = synthetic_metrics(4, repetitions=30, switching=("ecmp-tcp", "ecmp-mptcp",
                                                             "ps-mptcp"),
                                effects={"switching": {"ps-mptcp": {"goodput_mbps": 3.0,
                                                                    "fct_s": 3.0}}})
    # rb acts on the MPTCP levels only: its TCP rows do not exist
    metrics = metrics[~((metrics.host == "rb") & (metrics.switching == "ecmp-tcp"))].copy()
    # utilisation: ps-mptcp 0.2 % above ECMP, with a tiny spread (significant, negligible)
    mptcp = metrics.switching.isin(["ecmp-mptcp", "ps-mptcp"])
    metrics.loc[mptcp, "utilization"] = 0.5 + 0.0001 * metrics.loc[mptcp, "utilization"]
    metrics.loc[metrics.switching == "ps-mptcp", "utilization"] += 0.001
    return compare(metrics, SPEC)


def test_a_planted_effect_reads_better_or_worse_by_the_metrics_direction(planted):
    goodput = _finding(planted, "noisy / query", "ps-mptcp", "goodput_mbps")
    assert goodput.finding == BETTER and goodput.ci_low_pct > 1
    fct = _finding(planted, "noisy / query", "ps-mptcp", "fct_s")
    assert fct.finding == WORSE  # a longer FCT is worse
    assert fct.p_adj >= fct.p


def test_a_tiny_significant_effect_is_negligible(planted):
    row = _finding(planted, "silent / long", "ps-mptcp", "utilization")
    assert row.p < 1e-6 and 0 < row.effect_pct < 1 and row.finding == NEGLIGIBLE


def test_no_effect_is_equivalent_only_where_the_spread_allows_it(planted):
    throughput = _finding(planted, "noisy / short", "rb", "throughput_mbps")
    # 60 observations a side with an 8 % spread cannot show +-1 %
    assert throughput.finding == INCONCLUSIVE and throughput.detectable_pct > 1
    spec = AnalysisSpec(ivs=("switching",), compare=(("ps-mptcp", "ecmp-mptcp"),),
                        min_effect_pct=20.0)
    wide = compare(synthetic_metrics(5, repetitions=30, switching=("ecmp-mptcp",
                                                                   "ps-mptcp")), spec)
    assert set(wide[wide.metric == "throughput_mbps"].finding) == {EQUIVALENT}


def test_a_scoped_level_is_compared_where_it_acts(planted):
    row = _finding(planted, "noisy / query", "rb", "goodput_mbps")
    # rb against vanilla on the two MPTCP levels only: 30 repetitions x 2 levels a side
    assert (row.n_a, row.n_b) == (60, 60)
    spray = _finding(planted, "noisy / query", "ps-mptcp", "goodput_mbps")
    assert (spray.n_a, spray.n_b) == (60, 60)  # both host levels on both sides


def test_with_applies_to_a_factor_is_compared_where_its_own_test_runs():
    """The RB design: rb acts on the MPTCP levels only, so switching is tested on the
    vanilla hosts, and its comparisons (and the sentences saying them) use those."""
    metrics = synthetic_metrics(4, repetitions=30, switching=("ecmp-tcp", "ecmp-mptcp",
                                                             "ps-mptcp"))
    metrics = metrics[~((metrics.host == "rb") & (metrics.switching == "ecmp-tcp"))].copy()
    spec = AnalysisSpec(ivs=SPEC.ivs, compare=SPEC.compare, level_scope=(
        ("host", "rb", "switching", ("ecmp-mptcp", "ps-mptcp")),))
    table = compare(metrics, spec)
    spray = _finding(table, "noisy / query", "ps-mptcp", "goodput_mbps")
    assert (spray.n_a, spray.n_b) == (30, 30) and spray.held == "host=vanilla"
    rb = _finding(table, "noisy / query", "rb", "goodput_mbps")
    assert (rb.n_a, rb.n_b) == (60, 60)
    assert rb.held == "switching in {ecmp-mptcp, ps-mptcp}"


def test_the_default_pairs_are_each_level_against_the_first():
    metrics = synthetic_metrics(1, repetitions=2, switching=("a", "b", "c"),
                                hosts=("vanilla",))
    assert pairs_of_interest(AnalysisSpec(ivs=("switching",)), metrics) == [
        ("switching", "b", "a", ()), ("switching", "c", "a", ())]


def test_a_pair_holding_another_factors_levels_compares_there_only():
    """The study design: switching on the study's own host levels (vanilla, juggler),
    the reorder hold left out as its reference's claims leave it out; a held level the
    data lacks is passed over, and the sentence's `held` says what was kept."""
    metrics = synthetic_metrics(3, repetitions=20, switching=("ecmp-mptcp", "ps-mptcp"),
                                hosts=("vanilla", "reorder-resilient", "juggler"))
    spec = AnalysisSpec(ivs=("switching", "host"), compare=(
        ["ps-mptcp", "ecmp-mptcp", {"host": ["vanilla", "juggler"]}],
        ["ps-mptcp", "ecmp-mptcp"]))
    rows = compare(metrics, spec)
    query = rows[(rows.cluster == "noisy / query") & (rows.metric == "goodput_mbps")]
    held, pooled = query.iloc[0], query.iloc[1]
    assert (held.n_a, held.n_b) == (40, 40) and held.held == "host in {vanilla, juggler}"
    assert (pooled.n_a, pooled.n_b) == (60, 60) and pooled.held == ""
    vanilla_only = compare(metrics[metrics.host != "juggler"], spec)
    row = _finding(vanilla_only[vanilla_only.held != ""], "noisy / query", "ps-mptcp",
                   "goodput_mbps")
    assert (row.n_a, row.n_b) == (20, 20) and row.held == "host=vanilla"
    assert spec.compare_as_config()[0] == ["ps-mptcp", "ecmp-mptcp",
                                           {"host": ["vanilla", "juggler"]}]


def test_a_pair_of_no_factor_is_refused_at_check():
    with pytest.raises(ConfigError, match=r"analysis.compare\[0\]: \[ps-mptcp, rb\] is not "
                                          r"a pair of two levels of one factor"):
        load_config(REPO / "configs/noisy.yaml",
                    overrides=["analysis.compare=[[ps-mptcp, rb]]"])
    # the levels a pair holds: another factor's, at least one of them its own
    with pytest.raises(ConfigError, match=r"analysis.compare\[0\]\[2\].switching: not another "
                                          r"factor of analysis.ivs than the pair's; choose "
                                          r"from host"):
        load_config(REPO / "configs/noisy.yaml", overrides=[
            "analysis.compare=[[ps-mptcp, ecmp-mptcp, {switching: ps-tcp}]]"])
    with pytest.raises(ConfigError, match=r"analysis.compare\[0\]\[2\].host: \['vanila'\] "
                                          r"holds no level of host"):
        load_config(REPO / "configs/noisy.yaml", overrides=[
            "analysis.compare=[[ps-mptcp, ecmp-mptcp, {host: vanila}]]"])
    load_config(REPO / "configs/noisy.yaml", overrides=[
        "analysis.compare=[[ps-mptcp, ecmp-mptcp, {host: [vanilla, juggler]}]]"])
    # a pair the plan narrowed away is skipped, not refused
    load_config(REPO / "configs/noisy.yaml", overrides=["factors.host={vanilla: {}}"])


def test_stats_json_names_every_comparison(planted):
    assert list(pd.unique(planted.a)) == ["ps-mptcp", "rb"]
    assert len(planted) == 6 * 2 * 4  # clusters x pairs x metrics
