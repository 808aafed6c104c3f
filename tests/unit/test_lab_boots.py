"""Which runs of a lane share a boot of the lab kernel: on the virtual clock a run with
transfers larger than lab.own_boot_above_kb (or an open-loop pattern) starts a boot of its
own, so nothing ran in its guest before it; the others follow the run before them."""

from __future__ import annotations

import pytest

from pathdiv.experiments.config.load import ConfigError, load, validate
from pathdiv.experiments.plan.lanes import boots, own_boot, phases
from pathdiv.experiments.plan.runs import expand
from tests.conftest import REPO


def noisy(*overrides):
    cfg = load(REPO / "configs/noisy.yaml").with_overrides(list(overrides))
    return expand(cfg, repetitions=1)


def test_short_and_long_runs_boot_alone_after_the_queries_boot_together():
    plan = noisy()
    assert {r.flow_type for r in plan} == {"query", "short", "long"}  # 10 KB, 500 KB, 25 MB
    ((_, (lane,)),) = phases(plan, 1, lambda r: 1.0)
    assert sorted(r.run_id for r in lane) == sorted(r.run_id for r in plan)
    parts = boots(lane)
    queries = sum(r.flow_type == "query" for r in plan)
    assert [r.flow_type for r in parts[0]] == ["query"] * queries  # reusing one network
    assert [r.order for r in parts[0]] == sorted(r.order for r in parts[0])
    assert all(len(part) == 1 and part[0].flow_type != "query" for part in parts[1:])
    assert len(parts) == 1 + sum(r.flow_type != "query" for r in plan)
    # a run that boots alone between two others splits the lane in three boots
    query = [r for r in plan if r.flow_type == "query"]
    long = next(r for r in plan if r.flow_type == "long")
    assert [len(b) for b in boots([query[0], long, *query[1:3]])] == [1, 1, 2]


def test_the_threshold_is_the_transfer_size_and_zero_boots_every_run_alone():
    lane = noisy()
    assert len(boots(noisy(("lab.own_boot_above_kb", 0)))) == len(lane)
    assert len(boots(noisy(("lab.own_boot_above_kb", 25_000)))) == 1  # 25 MB is not above
    at = noisy(("workload.flow_types", {"query": "128KB"}), ("lab.own_boot_above_kb", 128))
    above = noisy(("workload.flow_types", {"query": "129KB"}), ("lab.own_boot_above_kb", 128))
    assert not any(map(own_boot, at)) and all(map(own_boot, above))


def test_only_the_virtual_clock_boots_a_run_alone():
    assert not any(map(own_boot, noisy(("lab.clock", "real"))))
    host = noisy(("factors.host", {"host": {"hosts.kernel": "host"}}))
    assert not any(map(own_boot, host)) and len(boots(host)) == 1


def test_an_open_loop_pattern_boots_alone_whatever_its_flow_types_name():
    runs = expand(load(REPO / "configs/seed000-websearch.yaml"), repetitions=1)
    assert runs and all(map(own_boot, runs))  # its one flow type says 1KB


def test_check_refuses_a_negative_threshold_naming_the_key():
    with pytest.raises(ConfigError, match=r"lab.own_boot_above_kb: -1 is not allowed"):
        validate({"lab": {"own_boot_above_kb": -1}})
