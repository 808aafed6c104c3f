"""The lab kernel's memory and a fat tree this machine cannot hold: `lab.memory_mb: auto`
sizes the guest for the plan's largest network, and a network too large for this
machine is refused before anything starts, saying why and what would fit (the memory
model of experiments/plan/memory.py)."""

from __future__ import annotations

import pytest

from pathdiv.experiments.config.load import ConfigError, load
from pathdiv.experiments.plan.lanes import memory_per_job_mb
from pathdiv.experiments.plan.memory import (
    AUTO_FLOOR_MB,
    JAIL_EXTRA_MB,
    boot_mb,
    chosen,
    clock_problems,
    config_mb,
    largest_k,
    memory_problems,
    need_mb,
    rounded,
)
from pathdiv.experiments.plan.runs import expand
from pathdiv.topologies.fattree import FatTree
from tests.conftest import REPO

GB24 = 24_105  # this machine's RAM in MB (free -m)


def plan(*overrides, flow_types=("query",)):
    cfg = load(REPO / "configs/noisy.yaml").with_overrides(list(overrides))
    return expand(cfg, repetitions=1, flow_types=list(flow_types))


def test_need_grows_with_nodes_and_captured_links():
    needs = [need_mb(k, captures=True) for k in (4, 6, 8)]
    assert needs == sorted(needs) and needs[2] > 3 * needs[0]
    assert need_mb(8, captures=False) < need_mb(8, captures=True)


def test_the_reference_config_fits_its_lab_kernel_and_this_kind_of_machine():
    runs = plan()
    assert memory_problems(runs, ram_mb=GB24, most_k=16) == []
    # auto never goes below the fixed default of before: a k=4 guest boots as it did
    assert boot_mb(runs[:1], runs) == AUTO_FLOOR_MB == 1536


def test_k8_needs_no_memory_setting_and_check_says_what_auto_chose():
    runs = plan(("topology.k", 8))
    assert memory_problems(runs, ram_mb=GB24, most_k=16) == []
    size = rounded(need_mb(8, captures=True))
    assert size > AUTO_FLOOR_MB
    # every boot of the plan gets the same memory, whichever runs share it
    assert {boot_mb([r], runs) for r in runs} == {size}
    assert memory_per_job_mb(runs) == size + JAIL_EXTRA_MB
    text = chosen(runs)
    assert text.startswith(f"lab.memory_mb: auto = {size} MB for every boot")
    assert f"a k=8 fat tree with captures needs about {need_mb(8, True)} MB" in text


def test_auto_is_sized_for_the_plans_largest_network():
    cfg = load(REPO / "configs/noisy.yaml")
    cfg.data["factors"]["size"] = {"k4": {"topology.k": 4}, "k8": {"topology.k": 8}}
    runs = expand(cfg, repetitions=1, flow_types=["query"])
    small = [r for r in runs if r.factors["size"] == "k4"]
    assert boot_mb(small[:1], runs) == rounded(need_mb(8, captures=True))
    assert config_mb(small[0].config) == AUTO_FLOOR_MB  # alone (`pathdiv net`): its own


def test_a_lab_kernel_set_too_small_for_k8_names_the_memory_that_would_do():
    problems = memory_problems(plan(("topology.k", 8), ("lab.memory_mb", 1536)),
                               ram_mb=GB24, most_k=16)
    assert len(problems) == 1
    need = need_mb(8, captures=True)
    assert problems[0].startswith("lab.memory_mb: 1536 is below")
    assert f"{need} MB a k=8 fat tree with captures" in problems[0]
    assert "set lab.memory_mb: auto" in problems[0]
    ok = plan(("topology.k", 8), ("lab.memory_mb", rounded(need)))
    assert memory_problems(ok, ram_mb=GB24, most_k=16) == []


def test_lab_memory_takes_auto_or_a_bounded_integer():
    with pytest.raises(ConfigError, match=r"lab.memory_mb: 'lots' is not allowed; expected "
                                          r"auto or an integer >= 256"):
        load(REPO / "configs/noisy.yaml").with_overrides([("lab.memory_mb", "lots")])


def test_a_k_this_machines_ram_cannot_hold_is_refused_with_the_k_that_fits():
    runs = plan(("topology.k", 8))
    problems = memory_problems(runs, ram_mb=3_000, most_k=16)
    assert len(problems) == 1 and problems[0].startswith("topology.k: 8:")
    fits = largest_k(3_000, captures=True, lab=True, most=16)
    assert fits is not None and fits < 8
    assert f"topology.k: {fits} fits here" in problems[0]
    assert "this machine has 3000 MB of RAM" in problems[0]
    assert memory_problems(runs, ram_mb=0, most_k=16) == []  # RAM unknown: not refused


def test_k16_fits_this_machine_on_the_virtual_clock_from_the_topology_alone():
    """k=16 (1,344 nodes, 3,072 links, 1,024 hosts fetching at once): on the virtual
    clock the captures' rings are small and the fetches share processes; with the real
    clock's 4 MiB rings and a process per fetch the same network would not fit 24 GB."""
    topo = FatTree(16)
    assert (len(topo.nodes), len(topo.links)) == (1344, 3072)
    virtual = need_mb(16, captures=True, virtual=True)
    real = need_mb(16, captures=True, virtual=False)
    assert virtual + JAIL_EXTRA_MB + 1024 < GB24 < real
    runs = plan(("topology.k", 16))
    assert memory_problems(runs, ram_mb=GB24, most_k=16) == []
    assert virtual < 8_000  # the lab kernel auto sizes for it (plan/memory.py)
    problems = memory_problems(runs, ram_mb=8_000, most_k=16)
    assert problems and problems[0].startswith("topology.k: 16:")
    assert "a machine with at least" in problems[0]


def test_k_above_8_on_a_real_clock_is_refused():
    assert clock_problems(plan(("topology.k", 16))) == []
    problems = clock_problems(plan(("topology.k", 16), ("lab.clock", "real")))
    assert len(problems) == 1
    assert problems[0].startswith("topology.k: 16 runs on the lab kernel's virtual clock "
                                  "only")
    assert clock_problems(plan(("topology.k", 8), ("lab.clock", "real"))) == []


def test_a_parallel_paths_network_is_sized_by_its_own_nodes_not_a_default_fat_tree():
    # seed003's testbed: 10 nodes, six hosts; `check` called it "a k=4 fat tree with
    # captures" needing 440 MB (topology.k's default)
    runs = expand(load(REPO / "configs/seed003-fig8-paper.yaml"), repetitions=1)
    text = chosen(runs)
    assert "fat tree" not in text
    assert "a parallel-paths network of 10 nodes needs about" in text
    need = int(text.split("needs about ")[1].split(" MB")[0])
    assert need < need_mb(4, captures=True)
    assert config_mb(runs[0].config) == AUTO_FLOOR_MB
