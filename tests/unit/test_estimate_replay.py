"""`pathdiv check`'s default-cost estimate against the wall time recorded plans took.

tests/data/estimate_plans.json (written by benchmarks/estimate_vs_measured.py --fixture)
holds, per plan recorded on this project's 2-core machine, its committed config, its
--reps, the ids of its complete runs and the sum of their `wall_s`; the runs are expanded
again from the config and estimated one at a time (boots included), as `PATHDIV_HISTORY=off
pathdiv check` prints "one at a time". The plans ran while other work shared the machine
(load 2-8 on 2 cores): plans of the same work took up to 2.1x one another, so the bound is
FACTOR, not 1.5 (docs/benchmarks.md, "Estimate against measured wall time"). Before the
traffic was costed per MB over each link of a transfer's path, the permutation plans came
out at 3-6x their estimate and the study001 long-flow plans at 3-4x.
"""

from __future__ import annotations

import json
import math

import pytest

from pathdiv.experiments.config.load import load
from pathdiv.experiments.plan.estimate import (
    DEFAULT_ESTIMATOR,
    boot_of,
    phases_s,
)
from pathdiv.experiments.plan.lanes import phases
from pathdiv.experiments.plan.runs import Run, expand
from tests.conftest import REPO

FACTOR = 1.7
PLANS = json.loads((REPO / "tests/data/estimate_plans.json").read_text())


def serial_estimate_s(runs: list[Run]) -> float:
    plane = str(runs[0].config.data["dataplane"])
    plane_name = None if plane == "auto" else plane

    def cost(run: Run) -> float:
        return DEFAULT_ESTIMATOR.run_s(run, plane_name)

    def boot(run: Run) -> float:
        return boot_of(run, plane_name)

    return phases_s([lanes for _, lanes in phases(runs, 1, cost)], cost, boot)


def plan_of(entry: dict) -> list[Run]:
    want = set(entry["runs"])
    runs = [r for r in expand(load(REPO / entry["config"]), repetitions=entry["reps"])
            if r.run_id in want]
    assert len(runs) == len(want), f"{entry['plan']}: runs of the fixture no longer expand"
    return runs


@pytest.mark.parametrize("entry", PLANS, ids=[p["plan"].split("reproduction/")[1]
                                              for p in PLANS])
def test_default_estimate_is_within_the_stated_factor_of_the_recorded_plan(entry):
    est = serial_estimate_s(plan_of(entry))
    ratio = entry["measured_s"] / est
    assert 1 / FACTOR <= ratio <= FACTOR, (
        f"{entry['plan']}: measured {entry['measured_s']:.0f} s, estimated {est:.0f} s "
        f"(x{ratio:.2f})")


def test_the_replayed_plans_are_not_fitted_to_one_side():
    """Over all the plans, as many above their estimate as below: the geometric mean of
    measured / estimate near 1, not a bound met by estimating everything high."""
    logs = [math.log(e["measured_s"] / serial_estimate_s(plan_of(e))) for e in PLANS]
    assert abs(sum(logs) / len(logs)) < math.log(1.2)


def test_the_permutation_at_k8_costs_more_per_run_than_at_k4():
    """The k=8 permutation moves 8x the payload over 208 nodes: its runs' estimate grows
    with both, as their wall time did (about 8x per run)."""
    k4 = next(e for e in PLANS if e["plan"].endswith("permutation/k4"))
    k8 = next(e for e in PLANS if e["plan"].endswith("permutation/k8-trial"))
    per_run = [serial_estimate_s(plan_of(e)) / len(e["runs"]) for e in (k4, k8)]
    measured = [e["measured_s"] / len(e["runs"]) for e in (k4, k8)]
    assert per_run[1] / per_run[0] > 0.5 * measured[1] / measured[0]
