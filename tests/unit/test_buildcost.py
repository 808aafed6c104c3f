"""The cost of building a fat tree's network, counted from the topology alone
(experiments/fabric/buildcost.py): it grows with the nodes and links (the reachability
check's echoes with the hosts times k), not with the host pairs, up to k=16."""

from __future__ import annotations

import pytest

from pathdiv.experiments.config.load import load
from pathdiv.experiments.fabric.buildcost import build_work
from tests.conftest import REPO


def work(k: int, *overrides):
    cfg = load(REPO / "configs/permutation.yaml").with_overrides(
        [("topology.k", k), *overrides])
    return build_work(cfg)


@pytest.mark.parametrize("transport", ["tcp", "mptcp"])
def test_k16_build_grows_with_links_not_host_pairs(transport):
    small = work(8, ("hosts.transport", transport))
    large = work(16, ("hosts.transport", transport))
    assert (large.shells, large.veths) == (1344, 3072)
    assert large.echoes == 1024 * 17  # k + 1 echoes a host; all pairs: 1,047,552
    pairs = (1024 * 1023) / (128 * 127)  # 64x the host pairs of k=8
    links = large.veths / small.veths  # 8x the links
    for count in ("commands", "captures"):
        ratio = getattr(large, count) / getattr(small, count)
        assert ratio <= 1.2 * links < pairs / 5, count
    # k + 1 echoes a host: the links times k/8 here (2x), never the pairs' 64x
    assert large.echoes / small.echoes <= 2 * links < pairs / 3
    # the static table as the rule it follows: k/2 map entries in each of the 256 edge
    # and aggregation switches, whatever the subflows (as routes it was every remote
    # host address at each edge: 128 x 1,016 x 4 + 128 x 15 x 8 = 535,552 with 4)
    assert large.static_entries == 256 * 8
    assert large.routes / small.routes <= 1.2 * links
    if transport == "tcp":  # neighbours, down routes, up tables and rules, static entries
        assert large.routes == 157_952 - 145_408 + 256 * 8 == 14_592


def test_access_captures_are_a_third_of_the_links():
    assert work(8, ("capture.links", "access")).captures == 128
    assert work(8).captures == 384
    assert work(8, ("capture.enabled", False)).captures == 0
