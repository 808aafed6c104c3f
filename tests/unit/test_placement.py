"""Path-aware subflow placement: ports the hash puts where pathdiv wants them."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pathdiv.experiments.dataplane.ecmp_model import FiveTuple, PathModel
from pathdiv.experiments.fabric.hostsetup import HostSpec, host_commands, host_sysctls
from pathdiv.experiments.traffic.placement import (
    Placement,
    PlacementError,
    fabric_links,
    place_argv,
    sharing_subflows,
)
from pathdiv.experiments.traffic.transfer import parse_place
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.forwarding import forwarding_tables

SERVER = ("10.3.1.3", 8080)  # h16


def model(plane: str = "kernel", aliases: int = 7, seed: int = 3) -> PathModel:
    topo = FatTree(4, aliases_per_host=aliases)
    return PathModel(topo, forwarding_tables(topo, seed), plane)


def data_path(m: PathModel, addr: str, port: int) -> tuple[str, ...]:
    return m.path(FiveTuple(SERVER[0], addr, 6, SERVER[1], port))


@pytest.mark.parametrize("plane", ["kernel", "bmv2"])
def test_disjoint_puts_four_subflows_on_four_cores_in_both_directions(plane: str) -> None:
    m = model(plane)
    rng = random.Random(0)
    for _ in range(5):
        subs = Placement(m, "disjoint", 4).place("h1", SERVER, rng)
        assert [s.address for s in subs] == m.topo.host_addresses("h1")[:4]
        cores = set()
        for s in subs:
            for port in s.ports:
                data = data_path(m, s.address, port)
                ack = m.path(FiveTuple(s.address, SERVER[0], 6, port, SERVER[1]))
                assert data == s.path and ack == tuple(reversed(s.path))
            cores.add(m.topo.core_of_path(s.path))
        assert len(cores) == 4


def test_more_subflows_than_paths_wrap_around_evenly() -> None:
    m = model()
    subs = Placement(m, "disjoint", 8).place("h1", SERVER, random.Random(1))
    assert sorted(Counter(m.topo.core_of_path(s.path) for s in subs).values()) == [2, 2, 2, 2]


def test_the_first_path_is_drawn_per_connection() -> None:
    m = model()
    rng = random.Random(2)
    firsts = {m.topo.core_of_path(Placement(m, "disjoint", 1).place("h1", SERVER, rng)[0].path)
              for _ in range(40)}
    assert firsts == set(m.topo.cores)


def test_eliminate_keeps_only_subflows_with_no_shared_fabric_link() -> None:
    m = model()
    rng = random.Random(5)
    sizes = Counter()
    for _ in range(50):
        subs = Placement(m, "eliminate", 8).place("h1", SERVER, rng)
        assert subs[0].address == "10.0.0.2"  # the initial subflow always stays
        assert sharing_subflows(m.topo, [s.path for s in subs]) == 0
        for s in subs:
            assert all(data_path(m, s.address, p) == s.path for p in s.ports)
        sizes[len(subs)] += 1
    # between pods of a k=4 tree at most two paths are link-disjoint (one per edge uplink)
    assert set(sizes) <= {1, 2} and sizes[2] > 0


def test_fabric_links_leave_out_the_access_links() -> None:
    topo = FatTree(4)
    path = topo.paths("h16", "h1")[0]
    _, e8, a7, core, a1, e1, _ = path
    assert fabric_links(topo, path) == {(e8, a7), (a7, core), (core, a1), (a1, e1)}
    assert sharing_subflows(topo, topo.paths("h16", "h1")) == 4  # aggregation links
    assert sharing_subflows(topo, [topo.paths("h16", "h1")[0], topo.paths("h16", "h1")[3]]) == 0


def test_within_one_edge_any_port_will_do() -> None:
    m = model()
    subs = Placement(m, "disjoint", 4).place("h1", ("10.0.0.3", 8080), random.Random(0))
    assert len({s.path for s in subs}) == 1 and len(subs) == 4


def test_place_argv_round_trips_through_the_transfer_tool() -> None:
    m = model()
    argv = place_argv(Placement(m, "disjoint", 4), "h1", [SERVER, ("10.2.0.2", 8080)],
                      random.Random(0))
    assert argv[0::2] == ["--place", "--place"]
    planned = parse_place(argv[1])
    assert [p.address for p in planned] == m.topo.host_addresses("h1")[:4]
    assert all(len(p.ports) == 4 for p in planned)
    assert place_argv(Placement(m, "hashed", 4), "h1", [SERVER], random.Random(0)) == []


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(PlacementError, match="'random': expected one of hashed, disjoint"):
        Placement(model(), "random", 4)


def test_hosts_run_the_userspace_path_manager_only_when_pathdiv_places() -> None:
    topo = FatTree(4, aliases_per_host=3)
    placed = HostSpec("mptcp", 4, "cubic", subflow_paths="disjoint")
    hashed = HostSpec("mptcp", 4, "cubic")
    assert "net.mptcp.pm_type=1" in host_sysctls("h1-eth0", placed)
    assert "net.mptcp.pm_type=0" in host_sysctls("h1-eth0", hashed)
    assert not [c for c in host_commands(topo, "h1", placed) if c[:3] == ["ip", "mptcp",
                                                                          "endpoint"]]
    assert len([c for c in host_commands(topo, "h1", hashed) if c[:4] == ["ip", "mptcp",
                                                                          "endpoint", "add"]]) == 3
