"""P4 table entries computed from the fat tree (no p4c, no root)."""

from __future__ import annotations

import ipaddress

import pytest

from pathdiv.experiments.dataplane.p4.entries import (
    A_ARP_REPLY,
    A_DROP,
    A_FORWARD,
    A_SET_GROUP,
    A_SET_MACS,
    R_ECN_THRESHOLD,
    R_FLOWLET_GAP,
    R_SPRAY_POLICY,
    T_ARP,
    T_GROUP,
    T_LPM,
    T_NEIGHBOR,
    UP_GROUP,
    EntryError,
    EntryOptions,
    Value,
    mac_to_int,
    network_entries,
    port_macs,
    switch_entries,
)
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.forwarding import forwarding_tables


@pytest.fixture(scope="module")
def topo() -> FatTree:
    return FatTree(4, aliases_per_host=3)


@pytest.fixture(scope="module")
def tables(topo: FatTree):
    return forwarding_tables(topo, run_seed=7)


@pytest.fixture(scope="module")
def macs(topo: FatTree) -> dict[str, str]:
    """Interface name -> MAC, as the topology assigns them."""
    return {p.intf: topo.mac(p) for lk in topo.links for p in (lk.a, lk.b)}


def entries_of(topo, table, macs, program, options=None):
    return switch_entries(table, port_macs(topo, table.switch), program, options)


def lpm(entries, prefix: str):
    net = ipaddress.IPv4Network(prefix)
    key = ((int(net.network_address), net.prefixlen),)
    hits = [e for e in entries.tables if e.table == T_LPM and e.normalized()[0] == key]
    assert len(hits) <= 1
    return hits[0] if hits else None


def test_edge_routes_its_hosts_and_aliases_to_their_ports(topo, tables, macs) -> None:
    entries = entries_of(topo, tables["e1"], macs, "ecmp")
    for host in ("h1", "h2"):
        port = topo.link_between("e1", host).port_of("e1").number
        for addr in topo.host_addresses(host):
            e = lpm(entries, f"{addr}/32")
            assert e is not None, addr
            assert (e.action, e.params) == (A_FORWARD, (Value(port),))


def test_ecmp_up_group_lists_every_uplink_in_port_order(topo, tables, macs) -> None:
    entries = entries_of(topo, tables["a1"], macs, "ecmp")
    default = lpm(entries, "0.0.0.0/0")
    assert default.action == A_SET_GROUP
    assert [v.value for v in default.params] == [UP_GROUP, 2, tables["a1"].seed]
    members = sorted(
        (e.match[1].value, e.params[0].value) for e in entries.tables if e.table == T_GROUP
    )
    up_ports = [lk.port_of("a1").number for lk in topo.uplinks("a1")]
    assert members == list(enumerate(up_ports))


def test_seeds_differ_between_switches(topo, tables, macs) -> None:
    seeds = {
        lpm(entries_of(topo, tables[s], macs, "ecmp"), "0.0.0.0/0").params[-1].value
        for s in ("e1", "e2", "a1", "a2")
    }
    assert len(seeds) == 4


def test_static_has_one_route_per_remote_address_and_no_group(topo, tables, macs) -> None:
    entries = entries_of(topo, tables["e1"], macs, "static")
    assert not [e for e in entries.tables if e.table == T_GROUP]
    assert lpm(entries, "0.0.0.0/0") is None
    remote = [a for h in topo.hosts if topo.edge_of(h) != "e1" for a in topo.host_addresses(h)]
    up_ports = {lk.port_of("e1").number for lk in topo.uplinks("e1")}
    used = set()
    for addr in remote:
        e = lpm(entries, f"{addr}/32")
        assert e is not None and e.action == A_FORWARD, addr
        assert e.params[0].value in up_ports
        used.add(e.params[0].value)
    assert used == up_ports  # destinations are spread over both uplinks


def test_core_routes_pods_down_and_has_no_group(topo, tables, macs) -> None:
    entries = entries_of(topo, tables["c1"], macs, "spray")
    for pod in range(4):
        e = lpm(entries, f"10.{pod}.0.0/16")
        assert e.params == (Value(pod),)
    assert lpm(entries, "0.0.0.0/0") is None


@pytest.mark.parametrize("switch", ["e1", "a2", "c3"])
def test_own_address_is_dropped_not_routed_up(topo, tables, macs, switch) -> None:
    entries = entries_of(topo, tables[switch], macs, "ecmp")
    own = lpm(entries, f"{topo.nodes[switch].address}/32")
    assert (own.action, own.params) == (A_DROP, ())


def test_arp_and_neighbor_macs_cover_every_port(topo, tables, macs) -> None:
    entries = entries_of(topo, tables["e3"], macs, "ecmp")
    for link in topo.links_of("e3"):
        mine, peer = link.port_of("e3"), link.peer_of("e3")
        arp = [e for e in entries.tables if e.table == T_ARP and e.match[0].value == mine.number]
        assert len(arp) == 1
        assert arp[0].match[1] == Value(int(ipaddress.IPv4Address("10.1.0.1")), "ipv4")
        my_mac, peer_mac = mac_to_int(macs[mine.intf]), mac_to_int(macs[peer.intf])
        assert (arp[0].action, arp[0].params) == (A_ARP_REPLY, (Value(my_mac, "mac"),))
        nb = [
            e for e in entries.tables if e.table == T_NEIGHBOR and e.match[0].value == mine.number
        ]
        assert nb[0].action == A_SET_MACS
        assert [v.value for v in nb[0].params] == [my_mac, peer_mac]


def test_registers_per_program(topo, tables, macs) -> None:
    opts = EntryOptions(spray="roundrobin", flowlet_gap_us=250, ecn_threshold_pkts=30)
    spray = entries_of(topo, tables["e1"], macs, "spray", opts)
    assert {(r.register, r.value) for r in spray.registers} == {
        (R_ECN_THRESHOLD, 30),
        (R_SPRAY_POLICY, 1),
    }
    flowlet = entries_of(topo, tables["e1"], macs, "flowlet", opts)
    assert {(r.register, r.value) for r in flowlet.registers} == {
        (R_ECN_THRESHOLD, 30),
        (R_FLOWLET_GAP, 250),
    }


def test_cli_commands_are_readable(topo, tables, macs) -> None:
    cmds = entries_of(topo, tables["e1"], macs, "ecmp").commands()
    assert "table_add PathdivIngress.ipv4_lpm PathdivIngress.forward 10.0.0.2/32 => 0" in cmds
    mac0 = macs["e1-eth0"]
    arp = f"table_add PathdivIngress.arp_responder PathdivIngress.arp_reply 0 10.0.0.1 => {mac0}"
    assert arp in cmds
    assert "register_write PathdivEgress.ecn_threshold 0 0" in cmds


def test_whole_network_has_entries_for_every_switch(topo, tables, macs) -> None:
    net = network_entries(topo, tables, "ecmp")
    assert set(net) == set(topo.switches)


def test_missing_port_mac_names_the_port(topo, tables, macs) -> None:
    partial = {p: m for p, m in port_macs(topo, "e1").items() if p != 2}
    with pytest.raises(EntryError, match=r"e1: no MAC addresses given for port 2 \(e1-eth2\)"):
        switch_entries(tables["e1"], partial, "ecmp")


def test_bad_inputs_name_the_value() -> None:
    with pytest.raises(EntryError, match="spray policy 'zigzag' is not one of random, roundrobin"):
        EntryOptions(spray="zigzag")
    with pytest.raises(EntryError, match=r"ECN threshold must be in 0\.\.524287"):
        EntryOptions(ecn_threshold_pkts=-1)
    with pytest.raises(EntryError, match="'aa:bb' is not of the form"):
        mac_to_int("aa:bb")


def test_unknown_program_lists_the_known_ones(topo, tables, macs) -> None:
    with pytest.raises(EntryError, match="'wcmp' is not one of static, ecmp, spray, flowlet"):
        entries_of(topo, tables["e1"], macs, "wcmp")
