"""The fat tree as a user counts it: switches, hosts, links, addresses, paths."""

import itertools
from collections import deque

import pytest

from pathdiv.topologies.fattree import FatTree, TopologyError
from pathdiv.topologies.model import Role, Tier


def bfs_shortest_paths(topo: FatTree, src: str, dst: str) -> set[tuple[str, ...]]:
    """Independent check: every shortest path by breadth-first search over links."""
    dist = {src: 0}
    order = deque([src])
    while order:
        u = order.popleft()
        for v in topo.neighbors(u):
            if v not in dist:
                dist[v] = dist[u] + 1
                order.append(v)
    paths: set[tuple[str, ...]] = set()

    def walk(path: list[str]) -> None:
        if path[-1] == dst:
            paths.add(tuple(path))
            return
        for v in topo.neighbors(path[-1]):
            if dist.get(v) == dist[path[-1]] + 1 and dist[v] <= dist[dst]:
                walk([*path, v])

    walk([src])
    return paths


@pytest.mark.parametrize(("k", "switches", "hosts", "links"), [
    (4, 20, 16, 48), (6, 45, 54, 162), (8, 80, 128, 384),
])
def test_counts(k, switches, hosts, links):
    t = FatTree(k)
    assert (len(t.switches), len(t.hosts), len(t.links)) == (switches, hosts, links)
    assert len(t.cores) == (k // 2) ** 2
    assert len(t.aggs) == len(t.edges) == k * k // 2


def test_k4_paths_between_and_within_pods():
    t = FatTree(4)
    assert len(t.paths("h1", "h16")) == 4  # different pods: (k/2)^2
    assert len(t.paths("h1", "h3")) == 2  # same pod, different edges: k/2
    assert t.paths("h1", "h2") == [("h1", "e1", "h2")]
    cores = {t.core_of_path(p) for p in t.paths("h1", "h16")}
    assert cores == set(t.cores)


@pytest.mark.parametrize("k", [4, 6])
def test_paths_match_breadth_first_search(k):
    t = FatTree(k)
    for src, dst in itertools.islice(itertools.permutations(t.hosts, 2), 0, None, 7):
        assert set(t.paths(src, dst)) == bfs_shortest_paths(t, src, dst)


@pytest.mark.parametrize("k", [2, 4, 6])
def test_the_links_a_pair_may_cross_follow_from_the_subtrees(k):
    """may_cross (structure only) is the union of the pair's equal-cost paths' links, and
    each path crosses two links of every tier the pair climbs."""
    t = FatTree(k)
    for src, dst in itertools.permutations(t.hosts, 2):
        paths = t.paths(src, dst)
        on_paths = {lk for p in paths for lk in t.path_links(p)}
        assert set(t.may_cross(src, dst)) == on_paths
        assert {len(p) - 1 for p in paths} == {2 * len(t.tiers_crossed(src, dst))}


def test_a_link_joins_its_lower_ends_subtree_to_the_rest():
    t = FatTree(4)
    assert t.subtree("h1", Tier.HOST) == (0, 0, 0) and t.subtree("h4", Tier.EDGE) == (0, 1)
    assert t.subtree("h16", Tier.CORE) == (3,) and t.subtree("a1", Tier.CORE) == (0,)
    assert t.tiers_crossed("h1", "h2") == [Tier.HOST]
    assert t.tiers_crossed("h1", "h3") == [Tier.HOST, Tier.EDGE]
    assert t.tiers_crossed("h1", "h16") == [Tier.HOST, Tier.EDGE, Tier.CORE]
    with pytest.raises(KeyError, match=r"c1 .* is not below a link of the core tier"):
        t.subtree("c1", Tier.CORE)
    with pytest.raises(KeyError, match=r"a1 .* is not below a link of the edge tier"):
        t.subtree("a1", Tier.EDGE)


def test_addresses_follow_the_fat_tree_convention_and_are_unique():
    t = FatTree(4, aliases_per_host=3)
    assert t.nodes["h1"].address == "10.0.0.2"
    assert t.nodes["h16"].address == "10.3.1.3"
    assert t.nodes["e1"].address == "10.0.0.1"
    assert t.nodes["a2"].address == "10.0.3.1"  # aggregation 10.pod.(k/2+i).1
    assert t.nodes["c4"].address == "10.4.2.2"  # core 10.k.j.i
    every = [n.address for n in t.nodes.values()] + [
        a for h in t.hosts for a in t.host_addresses(h)[1:]
    ]
    assert len(every) == len(set(every))
    assert t.host_addresses("h1") == ["10.0.0.2", "10.0.0.34", "10.0.0.66", "10.0.0.98"]
    assert t.address_owner["10.0.0.66"] == "h1"


def test_interfaces_name_their_link_and_tier():
    t = FatTree(4)
    assert t.link_of_intf("e1-eth0").a.node == "h1"
    assert t.link_of_intf("h1-eth0").tier is Tier.HOST
    assert t.link_of_intf("a1-eth2").b.node == "c1"
    assert t.link_of_intf("c1-eth3").a.node == "a7"
    assert len(t.interfaces) == 2 * len(t.links)
    with pytest.raises(KeyError, match="no interface 'x1-eth0'"):
        t.link_of_intf("x1-eth0")


def test_every_switch_has_k_ports_and_hosts_one():
    t = FatTree(6)
    for name, node in t.nodes.items():
        ports = [lk.port_of(name).number for lk in t.links_of(name)]
        expected = 1 if node.role is Role.HOST else 6
        assert ports == list(range(expected))


@pytest.mark.parametrize("k", [3, 0, -2, 60])
def test_bad_k_is_rejected(k):
    with pytest.raises(TopologyError, match="k must be"):
        FatTree(k)
