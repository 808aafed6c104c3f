"""Verdicts that survive a rerun: two planted runs of one design, one claim planted in the
first only (its verdict flips and is reported unstable, never agreement), one in both
(held), and a cell with retransmission timeouts (named with the share in each mode and
the repetitions it needs); the committed stability table is what its folders generate."""

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pathdiv.analysis.report import stability as report
from pathdiv.analysis.stats.agreement import mark_claims
from pathdiv.analysis.stats.claims import load_reference
from pathdiv.analysis.stats.stability import (
    HELD,
    UNSTABLE,
    bimodal_cells,
    compare_verdicts,
    needed_for_modes,
    needed_for_power,
    split_modes,
    tally,
)
from tests.conftest import REPO
from tests.support.study_data import synthetic_metrics

SWITCHING = ("ecmp-mptcp", "ps-mptcp")
HOSTS = ("vanilla", "juggler")


def _run(seed, against_study):
    """One run of the study's design; `against_study` plants ECMP's better silent goodput
    (against V.D's 'spraying is never significantly worse'). Spraying's higher
    utilisation is planted in every run."""
    metrics = synthetic_metrics(seed, repetitions=6, switching=SWITCHING, hosts=HOSTS,
                                effects={"switching": {"ps-mptcp": {"utilization": 6.0}}})
    if against_study:
        rows = (metrics.condition == "silent") & (metrics.switching == "ps-mptcp")
        metrics.loc[rows, "goodput_mbps"] -= 4.0
    return metrics


@pytest.fixture(scope="module")
def runs():
    return _run(1, against_study=True), _run(2, against_study=False)


@pytest.fixture(scope="module")
def verdicts(runs):
    ref = load_reference("seed001")
    return compare_verdicts(mark_claims(ref, runs[0]), mark_claims(ref, runs[1]),
                            repetitions=6)


def _row(table, claim_id, cluster, metric):
    rows = table[(table.claim_id == claim_id) & (table.cluster == cluster)
                 & (table.metric == metric)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_a_verdict_that_flips_between_runs_is_unstable_and_counts_as_none(verdicts):
    row = _row(verdicts, "silent-switching-inconclusive",
               "condition=silent / flow_type=query", "goodput_mbps")
    # planted gap in the first run: a difference; none in the second: 12 observations a
    # side cannot show equivalence within 1 %
    assert (row.verdict_1, row.verdict_2) == ("disagree", "inconclusive")
    assert row.pair == UNSTABLE and row.result == UNSTABLE


def test_a_verdict_planted_in_both_runs_holds(verdicts):
    rows = verdicts[verdicts.claim_id == "spray-raises-utilisation"]
    assert len(rows) == 6  # both conditions x three flow types
    assert set(rows.pair) == {HELD} and set(rows.result) == {"agree"}


def test_the_tally_counts_a_verdict_only_where_both_seeds_give_it(verdicts):
    counts = tally(verdicts)
    counted = verdicts[verdicts.counted]
    assert counts[UNSTABLE] == int((counted.pair == UNSTABLE).sum()) >= 3
    assert counts["agree"] == int(((counted.pair == HELD)
                                   & (counted.verdict_1 == "agree")).sum())
    assert counts["agree"] + counts["disagree"] < len(counted)


def test_a_large_planted_effect_needs_fewer_observations_than_a_small_one(verdicts):
    big = _row(verdicts, "spray-raises-utilisation", "condition=noisy / flow_type=short",
               "utilization")
    assert big.needed_n <= 6  # 6 standard deviations apart: a few observations suffice
    # a side pools both host levels: 2 observations per repetition
    assert big.needed_repetitions == -(-big.needed_n // 2)
    # the t-test's power for 1 sd apart at alpha .05, power .8: 16.7 per side
    assert needed_for_power(1.0, 1.0, 1.0) == 17
    assert np.isnan(needed_for_power(float("nan"), 1.0, 1.0))


# ---- modes ----------------------------------------------------------------------------

def test_a_cell_with_timeouts_has_two_modes_with_their_shares():
    rng = np.random.default_rng(3)
    query = np.r_[0.033 + 0.004 * rng.random(12), 0.21 + 0.03 * rng.random(4)]
    modes = split_modes(query)
    assert [m.n for m in modes] == [12, 4]
    assert modes[0].high < 0.04 and modes[1].low > 0.2
    assert needed_for_modes(modes) == 20  # the 1-in-4 mode expected 5 times


def test_the_issues_cells_are_found_with_their_modes():
    # MPTCP spraying, 10 KB queries: 12 at ~35 ms, 2 RTOs, 2 several RTOs (issue 27)
    spray = [0.033, 0.034, 0.034, 0.035, 0.035, 0.035, 0.036, 0.036, 0.036, 0.037, 0.037,
             0.037, 0.24, 0.25, 1.07, 1.09]
    assert [m.n for m in split_modes(spray)] == [12, 2, 2]
    # ECMP TCP long flows: 73.2 s in 6 groups, 112-115 s in 2
    long = [73.1, 73.2, 73.2, 73.2, 73.3, 73.2, 112.0, 115.0]
    modes = split_modes(long)
    assert [m.n for m in modes] == [6, 2]
    assert needed_for_modes(modes) == 20


def test_a_tight_or_noisy_single_mode_is_not_split():
    rng = np.random.default_rng(0)
    assert len(split_modes(10.0 + 0.001 * rng.standard_normal(32))) == 1  # virtual clock
    for seed in range(50):  # wall-clock noise, 5 % of the mean
        values = np.random.default_rng(seed).normal(1.0, 0.05, 8)
        assert len(split_modes(values)) == 1, seed
    assert len(split_modes([1.0, 2.0, 3.0])) == 1  # too few observations to tell
    assert needed_for_modes(split_modes([1.0, 1.01, 1.02, 1.03])) == 0


def test_bimodal_cells_names_the_cell_and_the_repetitions_it_needs():
    metrics = synthetic_metrics(4, repetitions=4, switching=SWITCHING, hosts=("vanilla",),
                                conditions=("noisy",), flow_types=("query",))
    rows = metrics.switching == "ps-mptcp"
    metrics.loc[rows, "fct_s"] = [0.035, 0.036, 0.24, 0.035]  # one timeout in 4
    cells = bimodal_cells(metrics, ["condition", "flow_type", "switching", "host"],
                          ["fct_s", "goodput_mbps"])
    assert list(cells.cell) == ["noisy / query / ps-mptcp / vanilla"]
    row = cells.iloc[0]
    assert row.metric == "fct_s" and row.rare_share == 0.25
    assert row.modes == "3 of 4 at 0.035–0.036; 1 of 4 at 0.24"
    assert row.needed_n == 20 and row.needed_repetitions == 20  # one observation per rep


# ---- the command -----------------------------------------------------------------------

def _folder(path: Path, metrics, seed):
    path.mkdir()
    metrics.to_csv(path / "metrics.csv", index=False)
    (path / "config.yaml").write_text(json.dumps(
        {"seed": seed, "analysis": {"ivs": ["switching", "host"], "reference": "seed001"}}))
    return path


def test_the_command_writes_the_table_between_the_markers(tmp_path, runs, capsys):
    first = _folder(tmp_path / "first", runs[0], 11)
    second = _folder(tmp_path / "second", runs[1], 12)
    page = tmp_path / "page.md"
    page.write_text(f"intro\n{report.BEGIN}\nold\n{report.END}\nafter\n")
    assert report.main([str(first), str(second), "--write", str(page)]) == 0
    text = page.read_text()
    assert text.startswith(f"intro\n{report.BEGIN}\nGenerated by") and "old" not in text
    assert "| first / second | 11 / 12 | 6 / 6 |" in text  # the summary line of the pair
    rows = tmp_path / "rows.md"
    rows.write_text(f"{report.ROWS_BEGIN}\n{report.ROWS_END}\n")
    assert report.main([str(first), str(second), "--rows", str(rows)]) == 0
    assert re.search(r"\| V\.A \| silent-switching-inconclusive \| silent / query \| "
                     r"goodput_mbps \| ps-mptcp vs ecmp-mptcp \| disagree [^|]*\| "
                     r"inconclusive [^|]*\| unstable \|", rows.read_text())
    with pytest.raises(SystemExit):
        report.main([str(first)])  # an odd number of folders



def test_a_folder_can_be_marked_with_another_configs_design(tmp_path, runs):
    first = _folder(tmp_path / "first", runs[0], 11)
    second = _folder(tmp_path / "second", runs[1], 12)
    design = tmp_path / "design.yaml"  # an alpha nothing reaches: no effect is significant
    design.write_text("analysis: {ivs: [switching, host], alpha: 1.0e-30, "
                      "reference: seed001}\n")
    assert report.parse_source(f"{first}:{design}") == (first, design)
    assert report.parse_source(str(first)) == (first, None)
    text = report.render([f"{first}:{design}", str(second)])
    assert f"stability {first}:{design} {second}`" in text
    # the first is marked with the design's alpha, the second with its own config's
    assert re.search(r"\| spray-raises-utilisation \| noisy / short \| utilization \| "
                     r"ps-mptcp vs ecmp-mptcp \| inconclusive [^|]*\| agree "
                     r"[^|]*\| unstable \|", text)


def test_cells_the_design_leaves_out_are_not_named_among_the_modes(tmp_path):
    """A folder run before applies_to holds TCP x rb cells; marked with the scoped
    design, its timeouts there are no cell of the analysis and need no repetitions."""
    metrics = synthetic_metrics(3, repetitions=4, switching=("ps-tcp", "ps-mptcp"),
                                hosts=("vanilla", "rb"), conditions=["noisy"],
                                flow_types=["query"])
    tcp_rb = (metrics.switching == "ps-tcp") & (metrics.host == "rb")
    metrics.loc[tcp_rb & (metrics.index % 4 == 0), "fct_s"] *= 8  # timeouts, planted
    folder = tmp_path / "old"
    folder.mkdir()
    metrics.to_csv(folder / "metrics.csv", index=False)
    (folder / "config.yaml").write_text(json.dumps({"seed": 1, "analysis": {
        "ivs": ["switching", "host"], "reference": "seed001"}}))
    design = tmp_path / "scoped.yaml"
    design.write_text(json.dumps({"factors": {
        "switching": {"ps-tcp": {}, "ps-mptcp": {}},
        "host": {"vanilla": {}, "rb": {"applies_to": {"switching": ["ps-mptcp"]}}}},
        "analysis": {"ivs": ["switching", "host"], "reference": "seed001"}}))
    plain = report.load(folder)
    scoped = report.load(folder, design)
    assert "ps-tcp / rb" in " ".join(report.modes(plain, plain)["cell"])
    assert len(scoped.metrics) == len(metrics) - int(tcp_rb.sum())
    assert "ps-tcp / rb" not in " ".join(report.modes(scoped, scoped)["cell"])


def _one_row(verdict, mean_a, kind="better", b="ecmp-mptcp"):
    return pd.DataFrame([{"reference": "seed001", "claim_id": "c", "cluster": "k",
                          "metric": "goodput_mbps", "a": "ps-mptcp", "b": b, "kind": kind,
                          "section": "V.D", "verdict": verdict, "counted": True, "ours": "",
                          "mean_a": mean_a, "mean_b": 10.0, "sd_a": 0.5, "sd_b": 0.5,
                          "n_a": 16, "n_b": 16}])


def test_a_flip_on_a_negligible_difference_says_so():
    flip = compare_verdicts(_one_row("agree", 10.05), _one_row("inconclusive", 9.99),
                            min_effect_pct=1.0, repetitions=2)
    row = flip.iloc[0]
    assert row.pair == UNSTABLE and row.below_min_effect
    # delta is the smallest effect of interest, 0.1, with sd 0.5: d = 0.2, the t-test
    # needs 393.4 per side at alpha .05 and power .8
    assert row.needed_n == 394 and row.needed_repetitions == 50  # 8 per side per rep
    real = compare_verdicts(_one_row("agree", 11.0), _one_row("agree", 11.0))
    assert real.iloc[0].pair == HELD and not real.iloc[0].below_min_effect


def test_best_rows_pair_up_whoever_is_the_runner_up():
    first = _one_row("agree", 11.0, kind="best", b="ecmp-mptcp/vanilla")
    second = _one_row("disagree", 9.0, kind="best", b="ps-mptcp/vanilla")
    table = compare_verdicts(first, second)
    assert len(table) == 1 and table.iloc[0].pair == UNSTABLE


def test_docs_reproduction_md_holds_the_generated_stability_tables(monkeypatch):
    monkeypatch.chdir(REPO)
    page = (REPO / "docs" / "reproduction.md").read_text()
    block = page.split(report.BEGIN, 1)[1].split(report.END, 1)[0]
    command = re.search(r"`python -m pathdiv\.analysis\.report\.stability ([^`]+)`", block)
    assert command, "the stability block names the command that made it"
    sources = command.group(1).split()
    assert Path("docs/reproduction/study001-silent-qs-seed211") in [
        report.parse_source(s)[0] for s in sources]
    again = ("python -m pathdiv.analysis.report.stability " + " ".join(sources)
             + " --write docs/reproduction.md --rows docs/reproduction/stability.md")
    assert block.strip() == report.render_summary(sources).strip(), (
        f"docs/reproduction.md's stability summary is stale: run {again}")
    rows = (REPO / "docs" / "reproduction" / "stability.md").read_text()
    block = rows.split(report.ROWS_BEGIN, 1)[1].split(report.ROWS_END, 1)[0]
    assert block.strip() == report.render(sources).strip(), (
        f"docs/reproduction/stability.md is stale: run {again}")


def test_pathdiv_compare_prints_the_table_of_one_pair(tmp_path, runs, capsys):
    from pathdiv.experiments.cli import main

    first = _folder(tmp_path / "first", runs[0], 11)
    second = _folder(tmp_path / "second", runs[1], 12)
    assert main(["compare", str(first), str(second)]) == 0
    out = capsys.readouterr().out
    assert "**first (seed 11) vs second (seed 12)**" in out and "| unstable |" in out
    with pytest.raises(SystemExit) as stop:
        main(["compare", str(first), str(tmp_path / "none")])
    assert stop.value.code == 2
    assert "pathdiv compare: error:" in capsys.readouterr().err
