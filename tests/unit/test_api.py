"""The public API (`pathdiv.experiments.api`) without a network: configs from a file, a name or a
dict with overrides; plans; a run with its progress callback; a workload pattern
registered from user code that the plan, the schema and the traffic's rounds take."""

from __future__ import annotations

import random

import pytest

from pathdiv.experiments import api
from pathdiv.experiments.api import extend
from pathdiv.experiments.config.workloads import PATTERNS
from pathdiv.experiments.execute import run as one_run
from pathdiv.experiments.execute.runstate import base_manifest
from pathdiv.experiments.manifest import write_json_atomic
from pathdiv.experiments.plan.designations import SHAPES, rounds
from tests.conftest import REPO

FACTORS = {"switching": {
    "ecmp-tcp": {"switching.mode": "ecmp", "hosts.transport": "tcp"},
    "ps-tcp": {"switching.mode": "spray", "hosts.transport": "tcp"}}}


def test_a_config_from_a_file_a_name_or_a_dict_with_overrides():
    by_path = api.load_config(REPO / "configs" / "silent.yaml")
    by_name = api.load_config("silent")
    assert by_path.data == by_name.data
    cfg = api.load_config({"seed": 5, "factors": FACTORS}, {"topology.k": 6, "repetitions": 3})
    assert (cfg.k, cfg.seed, cfg.data["repetitions"]) == (6, 5, 3)
    as_set = api.load_config("silent", ["workload.iterations=1"])
    assert as_set.data["workload"]["iterations"] == 1
    with pytest.raises(api.ConfigError, match=r"topology\.k"):
        api.load_config({"topology": {"k": 5}})
    with pytest.raises(api.ConfigError, match=r"hosts\.transport"):
        api.load_config({"factors": FACTORS}, {"hosts.transport": "mptcp"})


def test_a_plan_is_the_runs_the_config_expands_to():
    cfg = api.load_config({"seed": 5, "factors": FACTORS, "repetitions": 2})
    runs = api.plan(cfg)
    assert len(runs) == 2 * 2 * len(cfg.flow_sizes())
    only = api.plan(cfg, only={"switching": "ps-tcp"}, flow_types=["query"])
    assert [r.factors["switching"] for r in only] == ["ps-tcp", "ps-tcp"]
    assert {r.flow_type for r in api.plan(cfg, quick=True)} <= set(cfg.flow_sizes())


def test_run_calls_progress_once_per_run_and_writes_the_folder(tmp_path, monkeypatch):
    def fake_execute(run, run_dir, on_round=None, keeper=None):
        manifest = {**base_manifest(run), "status": "complete",
                    "transfers": {"total": 1, "ok": 1, "failed": 0, "rounds": 1},
                    "timings": {"build_s": 1.0, "traffic_s": 1.0, "teardown_s": 1.0}}
        write_json_atomic(run_dir / "manifest.json", manifest)
        return manifest

    monkeypatch.setattr(one_run, "execute_run", fake_execute)
    monkeypatch.setattr(api.plans, "preflight", lambda cfg: None)
    cfg = api.load_config({"seed": 5, "factors": FACTORS, "hosts": {"kernel": "host"}})
    runs = api.plan(cfg, repetitions=1, flow_types=["query"])
    seen: list[api.RunProgress] = []
    result = api.run(cfg, tmp_path / "out", runs=runs, progress=seen.append, analyze=False)
    assert result.folder == tmp_path / "out"
    assert [p.run_id for p in seen] == [r.run_id for r in runs]
    assert [(p.done, p.total, p.status) for p in seen] == [(1, 2, "complete"),
                                                           (2, 2, "complete")]
    assert result.outcome.count("complete") == 2 and result.report is None
    assert (tmp_path / "out" / "plan.json").is_file()


def ring(hosts: list[str], rng: random.Random) -> list[api.Shape]:
    """One round: every host fetches from its neighbour (rotated by a random offset)."""
    turn = rng.randrange(1, len(hosts))
    return [[(h, (hosts[(i + turn) % len(hosts)],)) for i, h in enumerate(hosts)]]


@pytest.fixture
def registered_ring():
    api.register_pattern("ring-test", "every host fetches from a neighbour at once", ring)
    yield "ring-test"
    PATTERNS.pop("ring-test", None)
    SHAPES.pop("ring-test", None)
    extend._refresh_schema()


def test_a_user_registered_pattern_runs_in_a_plan(registered_ring):
    with pytest.raises(api.ConfigError, match="ring-nope"):
        api.load_config({"workload": {"pattern": "ring-nope"}})
    cfg = api.load_config({"seed": 9, "factors": FACTORS, "hosts": {"kernel": "host"},
                           "workload": {"pattern": registered_ring, "iterations": 2}})
    runs = api.plan(cfg, repetitions=1, flow_types=["query"])
    assert len(runs) == 2
    w = runs[0].config.data["workload"]
    drawn = rounds(w["pattern"], runs[0].config.topology().hosts, runs[0].workload_seed,
                   int(w["iterations"]), int(w["requests"]))
    assert len(drawn) == 2  # one round per iteration, as the shape says
    for rnd in drawn:
        assert sorted(r.client for r in rnd) == sorted(cfg.topology().hosts)
        assert all(r.client not in r.servers for r in rnd)


def test_a_registered_pattern_is_refused_on_the_lab_kernel(registered_ring):
    cfg = api.load_config({"seed": 9, "hosts": {"kernel": "lab"},
                           "workload": {"pattern": registered_ring}})
    with pytest.raises(api.EnvironmentProblem, match="registered from Python"):
        api.check_plan(api.plan(cfg, repetitions=1, flow_types=["query"]))


def test_a_bad_shape_or_a_taken_name_is_refused():
    with pytest.raises(ValueError, match="exists"):
        api.register_pattern("silent", "again", ring)
    with pytest.raises(ValueError, match="never its own server"):
        api.register_pattern("selfish", "x", lambda hosts, rng: [[(hosts[0], (hosts[0],))]])
    assert "selfish" not in PATTERNS


def test_docs_api_md_names_every_public_name():
    text = (REPO / "docs" / "api.md").read_text()
    missing = [n for n in api.__all__ if f"api.{n}" not in text and f"`{n}`" not in text]
    assert missing == [], f"docs/api.md does not describe {missing}"
    for name in api.__all__:  # and each resolves (the lazy names too)
        assert getattr(api, name) is not None
