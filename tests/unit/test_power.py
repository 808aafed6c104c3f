"""Power before the runs: `pathdiv check` says per cell and metric what the plan's
repetitions can detect (from the spreads of recorded runs of the config) and what the
smallest effect of interest would need, and names the bimodal cells; the figures are
statsmodels' power of the two-sample t-test."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from pathdiv.analysis.stats import plan_power, power
from pathdiv.experiments.cli import main
from tests.conftest import REPO


def test_pathdiv_check_noisy_prints_the_detectable_effects(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no results/ here: the committed reproduction is read
    assert main(["check", str(REPO / "configs/noisy.yaml")]) == 0
    out = capsys.readouterr().out
    head = next(line for line in out.splitlines() if line.startswith("power ("))
    assert head.startswith("power (spreads of 240 recorded observations in "
                           "docs/reproduction/noisy/metrics.csv; two-sided alpha 0.05, "
                           "80 % power)")
    assert ("repetitions that detect 1 % (analysis.min_effect_pct; the plan has query 10, "
            "short 10, long 4)") in head
    lines = out.splitlines()
    table = lines[lines.index(head) + 1:]
    assert re.match(r"  cell +n  throughput_mbps +goodput_mbps +fct_s +utilization", table[0])
    rows = {line.split("  ")[1].strip(): line for line in table[1:22]}
    assert len(rows) == 21  # every cell of the plan: 7 configurations x 3 flow types
    # a query cell whose mean FCT is carried by timeouts: its 40 observations (10
    # repetitions) cannot see less than 59 %, and 1 % would take 34405 repetitions
    assert re.search(r"query / ecmp-mptcp / vanilla +40  >= 40 % \(15251 reps\) +"
                     r">= 41 % \(16293 reps\) +>= 59 % \(34405 reps\)",
                     rows["query / ecmp-mptcp / vanilla"])
    # a steady long-flow cell resolves well under 1 % with the plan's 16 observations
    assert re.search(r"long / static-tcp / vanilla +16  >= 0.11 % \(1 reps\)",
                     rows["long / static-tcp / vanilla"])
    bimodal = lines.index(next(x for x in lines if x.startswith("bimodal cells (13;")))
    assert ("  query / ecmp-mptcp / vanilla fct_s: 5 of 8 at 0.0329–0.0341; 3 of 8 at "
            "0.215–0.23; needs 4 repetitions") in lines[bimodal + 1:]


def test_a_pilot_folder_gives_the_spreads_and_a_missing_one_says_what_to_run(
        capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    pilot = tmp_path / "pilot"
    pilot.mkdir()
    pd.read_csv(REPO / "docs/reproduction/noisy-seed2/metrics.csv").to_csv(
        pilot / "metrics.csv", index=False)
    assert main(["check", str(REPO / "configs/noisy.yaml"), "--pilot", str(pilot)]) == 0
    out = capsys.readouterr().out
    assert f"power (spreads of 168 recorded observations in {pilot}/metrics.csv" in out
    assert main(["check", str(REPO / "configs/noisy.yaml"), "--pilot",
                 str(tmp_path / "none")]) == 0
    out = capsys.readouterr().out
    assert ("power: no recorded runs of this config (" + str(tmp_path / "none")
            + "/metrics.csv): run a pilot") in out


def test_the_detectable_effect_is_the_t_tests_at_80_pct_power():
    # n = 8 a side, two-sided alpha .05, power .8: d = 1.5067 (G*Power's figure for the
    # two-sample t-test), so a spread of 10 % of the mean hides differences under 15 %
    assert power.detectable_d(8, 8) == pytest.approx(1.5067, abs=1e-3)
    assert power.detectable_pct(10.0, 10.0, 8, 8, 100.0) == pytest.approx(15.07, abs=0.01)
    assert power.needed_n(1.0, 1.0, 1.0) == 17
    assert power.needed_n(0.02, 0.02, 0.19) == 2  # d = 9.5: two observations a side
    assert np.isnan(power.detectable_pct(float("nan"), 1.0, 8, 8, 1.0))


def test_cell_power_names_a_bimodal_cell_and_the_repetitions_its_rare_mode_needs():
    fast = [0.033, 0.034, 0.035, 0.034, 0.036, 0.035, 0.033]
    recorded = pd.DataFrame({"flow_type": "query", "switching": "ps-mptcp",
                             "fct_s": [*fast, 0.23], "goodput_mbps": 16.0})
    cell = ("query", "ps-mptcp")
    table = plan_power.cell_power(recorded, {cell: 8}, {cell: 4.0},
                                  ["flow_type", "switching"], ["fct_s", "goodput_mbps"])
    fct = table[table.metric == "fct_s"].iloc[0]
    assert fct.modes == "7 of 8 at 0.033–0.036; 1 of 8 at 0.23"
    assert fct.repetitions_for_modes == 10  # 40 observations: 5 expected in the rare mode
    assert fct.detectable_pct > 100  # a mean carried by one timeout in eight
    goodput = table[table.metric == "goodput_mbps"].iloc[0]
    assert goodput.detectable_pct == 0.0 and goodput.modes == ""  # constant: exact
