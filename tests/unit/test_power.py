"""Power before the runs: `pathdiv check` says per cell and metric what the plan's
repetitions can detect (from the spreads of recorded runs of the config) and what the
smallest effect of interest would need, and names the bimodal cells; the figures are
statsmodels' power of the two-sample t-test."""

from __future__ import annotations

import math
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


def _t_test_power(d: float, n: int, alpha: float = 0.05) -> float:
    """Power of the two-sided two-sample t-test, n a side, from the noncentral t."""
    from scipy import stats

    df, nc = 2 * n - 2, d * math.sqrt(n / 2)
    crit = stats.t.ppf(1 - alpha / 2, df)
    upper = 1.0 - stats.nct.cdf(crit, df, nc)
    lower = stats.nct.cdf(-crit, df, nc)  # NaN in scipy where it is far below 1e-12
    return float(upper + (0.0 if np.isnan(lower) else lower))


def _sig2(x: float) -> str:
    """The check's two significant digits."""
    return f"{float(f'{x:.2g}'):g}"


def test_every_figure_check_prints_is_the_noncentral_t_recomputed_from_the_csv(
        capsys, monkeypatch, tmp_path):
    """Each cell's detectable effect, recomputed without statsmodels: the d that gives the
    t-test 80 % power at the plan's observations (noncentral t, bisection), times the
    cell's spread in the committed metrics.csv over its mean; and the repetitions for 1 %:
    the smallest n a side at 80 % power, divided by the observations a repetition gives."""
    from scipy import optimize

    monkeypatch.chdir(tmp_path)
    assert main(["check", str(REPO / "configs/noisy.yaml")]) == 0
    out = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(out) if line.startswith("power ("))
    metrics = ["throughput_mbps", "goodput_mbps", "fct_s", "utilization"]
    recorded = pd.read_csv(REPO / "docs/reproduction/noisy/metrics.csv")
    checked = 0
    for line in out[head + 2:head + 23]:
        cell, rest = re.match(r"  (\S+ / \S+ / \S+) +(\d.*)", line).groups()
        n = int(rest.split()[0])
        printed = re.findall(r">= ([\d.]+) % \((\d+) reps\)", rest)
        flow, switching, host = cell.split(" / ")
        obs = recorded[(recorded.flow_type == flow) & (recorded.switching == switching)
                       & (recorded.host == host)]
        per_rep = n / {"query": 10, "short": 10, "long": 4}[flow]
        for metric, (pct, reps) in zip(metrics, printed, strict=True):
            values = obs[metric].to_numpy(float)
            sd, mean = values.std(ddof=1), values.mean()
            d = optimize.brentq(lambda x, n=n: _t_test_power(x, n) - 0.8, 0.01, 3)
            assert pct == _sig2(d * sd / abs(mean) * 100), (cell, metric)
            target = 0.01 * abs(mean) / sd
            # the exact search, where it is quick and scipy's noncentral t has a figure
            powers = [_t_test_power(target, k) for k in range(2, 201)] if reps != "1" else []
            if int(reps) <= 50 and reps != "1" and not np.isnan(powers).any():
                need = 2 + next(k for k, p in enumerate(powers) if p >= 0.8)
                assert int(reps) == math.ceil(need / per_rep), (cell, metric)
                checked += 1
    assert checked >= 15  # repetitions recomputed too, not only the effects


def test_runs_of_the_same_design_under_another_name_give_the_spreads(
        capsys, monkeypatch, tmp_path):
    """A config with no runs under its own name: check finds the folder whose config.yaml
    differs from it only in name, seed and repetitions (and says it did), never the newer
    one that differs in a design key."""
    import os

    import yaml

    from pathdiv.experiments.config.load import load

    monkeypatch.chdir(tmp_path)
    data = load(REPO / "configs/noisy.yaml").data
    mine = {**data, "name": "trial-design"}
    (tmp_path / "trial.yaml").write_text(yaml.safe_dump(mine, sort_keys=False))
    same = tmp_path / "results" / "other-seed-20261129-010000"
    other = tmp_path / "results" / "other-gap-20261129-020000"
    for folder, cfg, csv in (
            (same, {**data, "name": "other-seed", "seed": 7, "repetitions": 2},
             "noisy-seed2"),
            (other, {**data, "name": "other-gap",
                     "switching": {**data["switching"], "flowlet_gap_us": 100}}, "noisy")):
        folder.mkdir(parents=True)
        (folder / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        pd.read_csv(REPO / f"docs/reproduction/{csv}/metrics.csv").to_csv(
            folder / "metrics.csv", index=False)
    os.utime(other / "metrics.csv", (2e9, 2e9))  # the newest folder, of another design
    assert main(["check", "trial.yaml"]) == 0
    head = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("power"))
    assert head.startswith(f"power (spreads of 168 recorded observations in results/{same.name}"
                           "/metrics.csv, runs of the same design under another name "
                           "(configs equal but for name, seed, repetitions, analysis);"), head
    (same / "metrics.csv").unlink()  # left: only the folder of another design
    assert main(["check", "trial.yaml"]) == 0
    out = capsys.readouterr().out
    assert "other-gap" not in out
    assert ("power: no recorded runs of this config (results/trial-design-*/ or "
            "docs/reproduction/trial-design/, nor of its design under another name)") in out
