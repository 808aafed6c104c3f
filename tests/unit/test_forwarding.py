"""Forwarding tables: every destination reachable along shortest paths, in every mode."""

import ipaddress

from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.forwarding import forwarding_tables


def lookup(table, addr: str, member: int | None):
    """Next hop for addr: longest-prefix down route, else static or up member."""
    ip = ipaddress.ip_address(addr)
    best = None
    for r in table.down:
        net = ipaddress.ip_network(r.prefix)
        if ip in net and (best is None or net.prefixlen > best[0]):
            best = (net.prefixlen, r.hop)
    if best:
        return best[1]
    if member is None:  # longest prefix of the static table
        return max((r for r in table.static if ip in ipaddress.ip_network(r.prefix)),
                   key=lambda r: ipaddress.ip_network(r.prefix).prefixlen).hop
    return table.up[member % len(table.up)]


def walk(topo, tables, src, dst_addr, choose):
    node, path = topo.edge_of(src), [src]
    while node in tables:
        path.append(node)
        hop = lookup(tables[node], dst_addr, choose(node))
        node = hop.node
    path.append(node)
    return tuple(path)


def test_every_pair_reaches_along_a_shortest_path_for_every_member_choice():
    topo = FatTree(4, aliases_per_host=1)
    tables = forwarding_tables(topo, run_seed=3)
    for src in topo.hosts:
        for dst in topo.hosts:
            if src == dst:
                continue
            shortest = set(topo.paths(src, dst))
            for addr in topo.host_addresses(dst):
                for m in range(2):
                    assert walk(topo, tables, src, addr, lambda _n, m=m: m) in shortest
                assert walk(topo, tables, src, addr, lambda _n: None) in shortest


def test_static_uses_one_path_per_destination_and_spreads_destinations_over_cores():
    topo = FatTree(4)
    tables = forwarding_tables(topo)
    cores = set()
    for dst in ["h9", "h10", "h11", "h12"]:  # pod 2, seen from h1
        path = walk(topo, tables, "h1", topo.nodes[dst].address, lambda _n: None)
        cores.add(topo.core_of_path(path))
    assert len(cores) == 4


def test_seeds_differ_per_switch_and_follow_the_run_seed():
    topo = FatTree(4)
    a, b = forwarding_tables(topo, 1), forwarding_tables(topo, 2)
    assert len({t.seed for t in a.values()}) == len(a)
    assert a["e1"].seed != b["e1"].seed
    assert a["e1"].seed == forwarding_tables(topo, 1)["e1"].seed


def test_static_tables_grow_with_the_hosts_at_edges_only():
    topo = FatTree(16, aliases_per_host=7)
    tables = forwarding_tables(topo)
    agg, edge = tables[topo.aggs[0]], tables[topo.edges[0]]
    assert len(agg.static) == 15 * 8  # one /24 per edge of the other pods
    assert len(edge.static) == (1024 - 8) * 8  # every remote host address


def test_cores_route_down_only():
    tables = forwarding_tables(FatTree(4))
    assert tables["c1"].up == () and tables["c1"].static == ()
    assert [r.prefix for r in tables["c1"].down] == [f"10.{p}.0.0/16" for p in range(4)]
