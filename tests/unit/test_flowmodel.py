"""The flow-level model of a permutation (analysis/references/flowmodel.py): max-min
fair rates on the paths ECMP, MPTCP's subflows or spraying give each flow."""

from __future__ import annotations

import random

import pytest

from pathdiv.analysis.references.flowmodel import (
    Flow,
    _max_min,
    flows_for,
    long_run,
    mean_share,
    path_links,
)
from pathdiv.experiments.plan.designations import rounds
from pathdiv.topologies.fattree import FatTree


def permutation(topo: FatTree, seed: int) -> list[tuple[str, str]]:
    (rnd,) = rounds("permutation", topo.hosts, seed, 1, 1)
    return [(r.client, r.servers[0]) for r in rnd]


def test_two_flows_on_one_core_link_share_it_and_the_others_run_at_the_link_rate():
    topo = FatTree(4)
    via_c1 = next(p for p in topo.paths("h1", "h5") if "c1" in p)
    other = next(p for p in topo.paths("h2", "h6") if "c1" in p)  # the same core link
    lone = topo.paths("h9", "h13")[0]
    flows = [Flow((path_links(via_c1),)), Flow((path_links(other),)),
             Flow((path_links(lone),))]
    assert long_run(flows) == pytest.approx([0.5, 0.5, 1.0])


def test_a_multipath_flow_moves_to_its_free_path():
    topo = FatTree(4)
    pinned = next(p for p in topo.paths("h1", "h5") if "c1" in p)  # a TCP flow via c1
    blocked = path_links(next(p for p in topo.paths("h2", "h6") if "c1" in p))
    free = path_links(next(p for p in topo.paths("h2", "h6") if "c4" in p))
    single = Flow((path_links(pinned),))
    both = Flow((blocked, free), adaptive=True)
    assert long_run([single, both]) == pytest.approx([1.0, 1.0])  # both at full rate
    stuck = Flow((blocked,), adaptive=True)  # one subflow only: it shares
    assert long_run([single, stuck]) == pytest.approx([0.5, 0.5])


def test_the_programs_and_progressive_filling_agree_on_single_paths():
    topo = FatTree(4)
    rng = random.Random(2)
    flows = flows_for(topo, permutation(topo, 3), "single", 1, rng)
    filled = long_run(flows)
    as_lp = [Flow(f.routes + f.routes, adaptive=True) for f in flows]  # forces the LPs
    assert long_run(as_lp) == pytest.approx(filled, abs=1e-6)


def test_more_subflows_reach_more_of_the_optimum_and_spraying_all_of_it():
    topo = FatTree(4)
    pairs = permutation(topo, 5)
    tcp = mean_share(topo, pairs, "single", draws=8)
    shares = [mean_share(topo, pairs, "multipath", n, draws=4) for n in (2, 8)]
    assert 0.3 < tcp < 0.75  # collisions cost single-path flows (the paper's point)
    assert tcp < shares[0] < shares[1] <= 1.0 + 1e-9
    assert shares[1] > 0.95
    assert mean_share(topo, pairs, "spray") == pytest.approx(1.0)


def test_at_k8_single_paths_lose_about_half_and_spraying_nothing():
    topo = FatTree(8)
    pairs = permutation(topo, 5)
    assert 0.35 < mean_share(topo, pairs, "single", draws=8) < 0.6
    assert mean_share(topo, pairs, "spray") == pytest.approx(1.0)


def _fluid(flows: list[Flow]) -> list[float]:
    """Equal transfers started together, rates max-min fair among those still sending."""
    left = dict.fromkeys(range(len(flows)), 1.0)
    done, now = {}, 0.0
    while left:
        rates = _max_min(flows, sorted(left))
        step = min(left[f] / rates[f] for f in left)
        now += step
        for f in list(left):
            left[f] -= rates[f] * step
            if left[f] <= 1e-9:
                done[f] = now
                del left[f]
    return [1.0 / done[f] for f in range(len(flows))]


@pytest.mark.parametrize(("kind", "subflows"), [("single", 1), ("multipath", 2)])
def test_equal_transfers_keep_their_long_run_rates_to_the_end(kind, subflows):
    topo = FatTree(4)
    for seed in range(3):
        flows = flows_for(topo, permutation(topo, seed), kind, subflows,
                          random.Random(seed))
        assert _fluid(flows) == pytest.approx(long_run(flows), rel=1e-6)
