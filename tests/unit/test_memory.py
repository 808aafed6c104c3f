"""A fat tree this machine cannot hold is refused before anything starts, saying why and
what would fit (the memory model of experiments/plan/memory.py)."""

from __future__ import annotations

from pathdiv.experiments.config.load import load
from pathdiv.experiments.plan.memory import largest_k, memory_problems, need_mb
from pathdiv.experiments.plan.runs import expand
from tests.conftest import REPO


def plan(*overrides):
    cfg = load(REPO / "configs/noisy.yaml").with_overrides(list(overrides))
    return expand(cfg, repetitions=1, flow_types=["query"])


def test_need_grows_with_nodes_and_captured_links():
    needs = [need_mb(k, captures=True) for k in (4, 6, 8)]
    assert needs == sorted(needs) and needs[2] > 3 * needs[0]
    assert need_mb(8, captures=False) < need_mb(8, captures=True)


def test_the_reference_config_fits_its_lab_kernel_and_this_kind_of_machine():
    assert memory_problems(plan(), ram_mb=24_000, most_k=8) == []


def test_a_lab_kernel_too_small_for_k8_names_the_memory_that_would_do():
    problems = memory_problems(plan(("topology.k", 8)), ram_mb=24_000, most_k=8)
    assert len(problems) == 1
    need = need_mb(8, captures=True)
    assert problems[0].startswith("lab.memory_mb: 1536 is below")
    assert f"{need} MB a k=8 fat tree with captures" in problems[0]
    ok = plan(("topology.k", 8), ("lab.memory_mb", -(-need // 256) * 256))
    assert memory_problems(ok, ram_mb=24_000, most_k=8) == []


def test_a_k_this_machines_ram_cannot_hold_is_refused_with_the_k_that_fits():
    enough = -(-need_mb(8, captures=True) // 256) * 256  # for the lab kernel itself
    runs = plan(("topology.k", 8), ("lab.memory_mb", enough))
    problems = memory_problems(runs, ram_mb=4_000, most_k=8)
    assert len(problems) == 1 and problems[0].startswith("topology.k: 8:")
    fits = largest_k(4_000, captures=True, lab=True, most=8)
    assert fits is not None and fits < 8
    assert f"topology.k: {fits} fits here" in problems[0]
    assert "this machine has 4000 MB of RAM" in problems[0]
    assert memory_problems(runs, ram_mb=0, most_k=8) == []  # RAM unknown: not refused
