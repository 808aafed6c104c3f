"""The plan's ETA weighs runs by their expected traffic, not by their number."""

from __future__ import annotations

import pytest

from pathdiv.experiments.config.load import load
from pathdiv.experiments.plan.estimate import (
    PLANE_FACTORS,
    PlanClock,
    expected_run_s,
    format_duration,
)
from pathdiv.experiments.plan.runs import expand
from tests.conftest import REPO


def host_plan():
    cfg = load(REPO / "configs/noisy.yaml").with_overrides(
        [("factors.host", {"host": {"hosts.kernel": "host"}})])
    return expand(cfg, repetitions=1)


def test_a_long_run_is_expected_to_take_longer_than_a_query_run():
    runs = host_plan()
    by_flow = {r.flow_type: expected_run_s(r) for r in runs}
    # 7 servers x 25 MB into one 20 Mbit/s host link is ~75 s per round
    assert by_flow["long"] > 5 * by_flow["query"] > 5 * 15
    assert by_flow["short"] > by_flow["query"]


def test_the_eta_of_a_plan_with_its_long_runs_left_is_not_a_count():
    runs = host_plan()
    short_first = sorted(runs, key=lambda r: r.flow_type != "query")  # queries first
    clock = PlanClock(short_first)
    total = clock.remaining_s()
    assert total == pytest.approx(sum(expected_run_s(r) for r in runs))
    for run in short_first[:5]:  # the five query runs end, each as expected
        clock.finished(run.run_id, expected_run_s(run))
    left = clock.remaining_s()
    # counted by runs, 2/3 of the plan would be left; by expected traffic, nearly all of it
    assert left > 0.85 * total > 0.67 * total
    assert clock.text() == f"~{format_duration(left)} left"


def test_the_eta_scales_with_how_the_finished_runs_compared():
    runs = host_plan()[:4]
    clock = PlanClock(runs)
    assert clock.text().endswith("left (estimated)")
    first = runs[0]
    clock.finished(first.run_id, 2 * expected_run_s(first))  # twice as slow as expected
    assert clock.scale() == 2.0
    assert clock.remaining_s() == 2 * sum(expected_run_s(r) for r in runs[1:])
    clock.finished(runs[1].run_id, None)  # a failed run: left out of the ratio
    assert clock.scale() == 2.0


def test_durations_read_as_people_say_them():
    assert [format_duration(s) for s in (45, 720, 7500)] == ["45 s", "12 min", "2 h 05 min"]


def test_bmv2_in_the_lab_kernel_is_expected_to_cost_its_measured_factor():
    lab = expand(load(REPO / "configs/noisy.yaml"), repetitions=1)[0]
    host = host_plan()[0]
    assert expected_run_s(lab, "bmv2") == pytest.approx(
        expected_run_s(lab) * PLANE_FACTORS[("lab", "bmv2")], rel=1e-3)
    assert expected_run_s(lab, "kernel") == expected_run_s(lab)
    # on the host kernel's real clock the switches' CPU work overlaps the traffic
    assert expected_run_s(host, "bmv2") == expected_run_s(host)
