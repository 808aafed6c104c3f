"""The nftables plane's generated routes and nftables rules, per mode."""

import ipaddress
import re

import pytest

from pathdiv.experiments.dataplane.base import DataPlaneError, parse_proc_net_dev
from pathdiv.experiments.dataplane.nftables.rules import nft_ruleset, route_batch
from pathdiv.experiments.fabric.hostsetup import HostSpec, host_commands
from pathdiv.experiments.fabric.shaping import tc_commands
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.forwarding import forwarding_tables
from pathdiv.topologies.model import LinkParams

TABLES = forwarding_tables(FatTree(4), run_seed=1)


def test_ecmp_hashes_the_five_tuple_with_the_switch_seed():
    rules = nft_ruleset(TABLES["e1"], "ecmp", "random")
    assert "jhash ip saddr . ip daddr . meta l4proto . th sport . th dport mod 2" in rules
    assert f"seed 0x{TABLES['e1'].seed:08x} offset 1" in rules
    assert f"0x{TABLES['e2'].seed:08x}" not in rules


@pytest.mark.parametrize(("spray", "expr"), [("random", "numgen random mod 2"),
                                             ("roundrobin", "numgen inc mod 2")])
def test_spray_marks_every_packet(spray, expr):
    assert expr in nft_ruleset(TABLES["a1"], "spray", spray)


def _static_mark(rules: str, address: str) -> int | None:
    """The mark the static rule of `rules` sets for a packet to `address`, as nft would
    (`ip daddr & MASK map { VALUE : MARK, ... }`, read back from the rule's text)."""
    found = re.search(r"meta mark set ip daddr & (\S+) map \{ (.*) \}", rules)
    assert found is not None, rules
    key = int(ipaddress.IPv4Address(address)) & int(ipaddress.IPv4Address(found.group(1)))
    marks = {int(ipaddress.IPv4Address(v)): int(m)
             for v, m in (e.split(" : ") for e in found.group(2).split(", "))}
    return marks.get(key)


@pytest.mark.parametrize(("k", "aliases"), [(4, 0), (4, 3), (8, 7)])
def test_static_marks_send_every_remote_address_where_the_static_table_does(k, aliases):
    """The static mode is marks, not routes: a map of k/2 entries a switch that sends
    every remote host address (primary and aliases) through the up-group member the
    fat-tree paper's two-level table names (the table bmv2 and p4-ebpf install)."""
    topo = FatTree(k, aliases_per_host=aliases)
    tables = forwarding_tables(topo, run_seed=1)
    for name, table in tables.items():
        rules = nft_ruleset(table, "static", "random")
        if not table.up:
            assert "mark set" not in rules  # a core only routes down
            continue
        assert rules.count(" : ") == k // 2
        for route in table.static:
            net = ipaddress.ip_network(route.prefix)
            addresses = [str(net.network_address)] if net.prefixlen == 32 else [
                a for h in topo.hosts for a in topo.host_addresses(h)
                if ipaddress.ip_address(a) in net]
            for address in addresses:
                mark = _static_mark(rules, address)
                assert mark is not None and table.up[mark - 1] == route.hop, (name, address)


def test_bad_modes_fail():
    with pytest.raises(DataPlaneError, match="switching mode 'flowlet': the nftables plane "
                       "keeps no per-flow idle-gap state; use dataplane: bmv2"):
        nft_ruleset(TABLES["e1"], "flowlet", "random")
    with pytest.raises(DataPlaneError, match="switching mode 'bogus' is not one of"):
        nft_ruleset(TABLES["e1"], "bogus", "random")


def test_route_batch_has_one_table_per_uplink_and_main_first():
    batch = route_batch(TABLES["e1"])
    assert "table 50" not in batch and "pref 900" not in batch  # static is marks
    assert "rule add pref 1000 lookup main suppress_prefixlength 0" in batch
    assert "default via 10.0.2.1 dev e1-eth2 onlink src 10.0.0.1 table 100" in batch
    assert "default via 10.0.3.1 dev e1-eth3 onlink src 10.0.0.1 table 101" in batch
    assert "route replace 10.0.0.2/32 dev e1-eth0 src 10.0.0.1" in batch
    assert "table 100" not in route_batch(TABLES["c1"])


def test_shaping_uses_htb_and_a_packet_queue():
    cmds = tc_commands("e1-eth0", LinkParams(bw_mbps=20, queue_pkts=50))
    flat = [" ".join(c) for c in cmds]
    assert any("htb rate 20mbit ceil 20mbit" in c for c in flat)
    assert flat[-1].endswith("parent 1:1 handle 10: pfifo limit 50")
    delayed = " ".join(tc_commands("x", LinkParams(bw_mbps=None, delay_ms=2))[-1])
    assert "netem delay 2ms limit 100" in delayed and "htb" not in delayed


def test_mptcp_hosts_get_alias_subflow_endpoints():
    topo = FatTree(4, aliases_per_host=3)
    cmds = [" ".join(c) for c in host_commands(topo, "h1", HostSpec("mptcp", 4, "cubic"))]
    assert "ip mptcp limits set subflow 3 add_addr_accepted 3" in cmds
    for alias in ("10.0.0.34", "10.0.0.66", "10.0.0.98"):
        assert f"ip mptcp endpoint add {alias} dev h1-eth0 subflow" in cmds
    assert any("net.ipv4.conf.all.rp_filter=2" in c for c in cmds)
    tcp = [" ".join(c) for c in host_commands(FatTree(4), "h1", HostSpec("tcp", 1, "reno"))]
    assert not any("mptcp endpoint" in c for c in tcp)
    assert any("tcp_congestion_control=reno" in c for c in tcp)


def test_proc_net_dev_parsing():
    text = (
        "Inter-|   Receive                                                |  Transmit\n"
        " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets\n"
        "c1-eth0: 1000 10 0 0 0 0 0 0 2000 20 0 0 0 0 0 0\n"
        "    lo: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
    )
    c = parse_proc_net_dev(text)["c1-eth0"]
    assert (c.rx_bytes, c.rx_packets, c.tx_bytes, c.tx_packets) == (1000, 10, 2000, 20)
