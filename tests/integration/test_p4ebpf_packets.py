"""One p4-ebpf switch's decisions, packet by packet, without a network: the PSA program of
an edge switch of the k=4 fat tree is loaded into this machine's kernel, filled with that
switch's entries, and run on crafted frames through BPF_PROG_TEST_RUN. The frame it
returns shows the decision: the destination MAC is the chosen port's neighbour (each port
has its own), the TTL and checksum what forwarding leaves; the return value says whether
it was redirected (TC_ACT_REDIRECT) or dropped (TC_ACT_SHOT).

The frame enters on the switch's first host port, which is given ifindex 1 (test runs
receive on the loopback device); the other ports get made-up ifindexes, which is all the
program sees of them. Needs root, a BPF file system at /sys/fs/bpf and the p4-ebpf tools
(skips naming what is missing).
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

from pathdiv.experiments.dataplane.p4 import entries as pe
from pathdiv.experiments.dataplane.p4.hashing import ecmp_member
from pathdiv.experiments.dataplane.p4.sources import DEFAULT_CACHE
from pathdiv.experiments.dataplane.p4ebpf.entries import map_writes, psa_entries
from pathdiv.experiments.dataplane.p4ebpf.libbpf import Libbpf
from pathdiv.experiments.dataplane.p4ebpf.programs import (
    INITIALIZER,
    TC_PROGRAM,
    compile_program,
)
from pathdiv.experiments.dataplane.p4ebpf.tools import find_ebpf_tools
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.forwarding import forwarding_tables

pytestmark = pytest.mark.root
BPFFS = Path("/sys/fs/bpf")
TC_ACT_OK, TC_ACT_SHOT, TC_ACT_REDIRECT = 0, 2, 7
UDP = 17


@pytest.fixture(scope="module")
def tools():
    if os.geteuid() != 0:
        pytest.skip("loading BPF programs needs root")
    found, reason = find_ebpf_tools()
    if found is None:
        pytest.skip(f"p4-ebpf not available: {reason}")
    if not any(line.split()[1:3] == [str(BPFFS), "bpf"] for line in open("/proc/mounts")):
        pytest.skip(f"{BPFFS} is not a BPF file system here")
    return found


@pytest.fixture(scope="module")
def topo() -> FatTree:
    return FatTree(4)


class PsaSwitch:
    """One switch's program, loaded and filled, run on frames."""

    def __init__(self, tools, topo: FatTree, switch: str, program: str, spray: str,
                 pin: Path) -> None:
        self.topo, self.table = topo, forwarding_tables(topo, run_seed=5)[switch]
        hops = pe.switch_ports(self.table)
        self.in_hop = self.table.down[0].hop  # the frame's ingress port: ifindex 1
        self.ifindex = {h.intf: 1 if h.intf == self.in_hop.intf else 40 + i
                        for i, h in enumerate(hops)}
        self.macs = pe.port_macs(topo, switch)
        compiled = compile_program(program, tools, DEFAULT_CACHE if os.geteuid() == 0 else None)
        self.bpf = Libbpf(tools.libbpf)
        self.loaded = self.bpf.load(compiled.obj, pin / switch, (TC_PROGRAM, INITIALIZER))
        self.bpf.run_once(self.loaded.programs[INITIALIZER], bytes(64))
        entries = psa_entries(self.table, self.macs, self.ifindex, program,
                              pe.EntryOptions(spray))
        for w in map_writes(compiled.layout(), entries):
            fd = self.bpf.open_pinned(self.loaded.maps[w.map_name])
            try:
                self.bpf.update(fd, w.key, w.value, w.what)
            finally:
                os.close(fd)

    def neighbour_of(self, mac: str) -> str:
        """The neighbour (node) whose MAC a forwarded frame was given."""
        for hop in pe.switch_ports(self.table):
            if self.macs[hop.port][1] == mac:
                return hop.node
        raise AssertionError(f"{mac} is no neighbour's MAC")

    def port_mac(self, node: str) -> str:
        hop = next(h for h in pe.switch_ports(self.table) if h.node == node)
        return self.macs[hop.port][0]

    def run(self, frame, ctx: bytes | None = None):
        from scapy.layers.l2 import Ether

        rc, out = self.bpf.test_run(self.loaded.programs[TC_PROGRAM], bytes(frame), ctx)
        return rc, Ether(out)


@pytest.fixture
def switch(tools, topo, request, tmp_path):
    program, spray = getattr(request, "param", ("ecmp", "random"))
    edge = next(s for s in topo.switches if forwarding_tables(topo, 5)[s].up
                and forwarding_tables(topo, 5)[s].down[0].direct)
    pin = BPFFS / f"pathdiv-test-{os.getpid()}"
    try:
        yield PsaSwitch(tools, topo, edge, program, spray, pin)
    finally:
        shutil.rmtree(pin, ignore_errors=True)


def udp_frame(sw: PsaSwitch, dst_host: str, sport: int, ttl: int = 64, dport: int = 7000):
    from scapy.layers.inet import IP
    from scapy.layers.inet import UDP as ScapyUDP
    from scapy.layers.l2 import Ether

    src = sw.topo.nodes[sw.in_hop.node]
    return (Ether(src=sw.macs[sw.in_hop.port][1], dst=sw.macs[sw.in_hop.port][0])
            / IP(src=src.address, dst=sw.topo.nodes[dst_host].address, ttl=ttl)
            / ScapyUDP(sport=sport, dport=dport) / b"pathdiv")


def remote_host(sw: PsaSwitch) -> str:
    pod = sw.topo.nodes[sw.table.switch].pod
    return next(h for h in sw.topo.hosts if sw.topo.nodes[h].pod != pod)


def _recomputed(ip) -> int:
    from scapy.layers.inet import IP

    fresh = IP(bytes(ip))
    fresh.chksum = None
    return IP(bytes(fresh)).chksum


def test_ecmp_sends_each_flow_to_the_member_the_hash_model_predicts(switch) -> None:
    dst = remote_host(switch)
    up = [h.node for h in switch.table.up]
    seen = Counter()
    for sport in range(20000, 20032):
        frame = udp_frame(switch, dst, sport)
        rc, out = switch.run(frame)
        assert rc == TC_ACT_REDIRECT, (sport, rc)
        ip = frame["IP"]
        want = up[ecmp_member(ip.src, ip.dst, UDP, sport, 7000, switch.table.seed, len(up))]
        got = switch.neighbour_of(out.dst)
        assert got == want, (sport, got, want)
        assert out.src == switch.port_mac(got)  # the chosen port's own MAC
        assert out["IP"].ttl == 63 and _recomputed(out["IP"]) == out["IP"].chksum
        assert bytes(out["UDP"]) == bytes(frame["UDP"])  # L4 untouched
        seen[got] += 1
    assert len(seen) == len(up), seen  # both uplinks carry some of the 32 flows


def test_a_local_host_is_reached_down_its_own_port(switch) -> None:
    other = switch.table.down[1].hop.node
    rc, out = switch.run(udp_frame(switch, other, 20001))
    assert rc == TC_ACT_REDIRECT and switch.neighbour_of(out.dst) == other


@pytest.mark.parametrize("switch", [("spray", "roundrobin")], indirect=True)
def test_roundrobin_spray_takes_the_members_in_turn(switch) -> None:
    dst = remote_host(switch)
    order = [switch.neighbour_of(switch.run(udp_frame(switch, dst, 20000))[1].dst)
             for _ in range(8)]
    assert order[0::2] == [order[0]] * 4 and order[1::2] == [order[1]] * 4
    assert order[0] != order[1]


@pytest.mark.parametrize("switch", [("spray", "random")], indirect=True)
def test_random_spray_spreads_one_flow_over_both_members(switch) -> None:
    dst = remote_host(switch)
    seen = Counter(switch.neighbour_of(switch.run(udp_frame(switch, dst, 20000))[1].dst)
                   for _ in range(400))
    assert len(seen) == 2 and min(seen.values()) >= 400 * 0.35, seen  # sd of a share: 0.025


@pytest.mark.parametrize("switch", [("static", "random")], indirect=True)
def test_static_takes_the_destinations_one_uplink(switch) -> None:
    dst = remote_host(switch)
    address = switch.topo.nodes[dst].address
    route = next(r for r in switch.table.static if r.prefix == f"{address}/32")
    for sport in (20000, 20001, 30000):
        rc, out = switch.run(udp_frame(switch, dst, sport))
        assert rc == TC_ACT_REDIRECT and switch.neighbour_of(out.dst) == route.hop.node


def test_expired_ttl_bad_checksum_and_the_switchs_own_address_are_dropped(switch) -> None:
    dst = remote_host(switch)
    assert switch.run(udp_frame(switch, dst, 20000, ttl=1))[0] == TC_ACT_SHOT
    bad = udp_frame(switch, dst, 20000)
    bad["IP"].chksum = 0x1234
    assert switch.run(bad)[0] == TC_ACT_SHOT
    own = udp_frame(switch, dst, 20000)
    own["IP"].dst = switch.table.address
    assert switch.run(own)[0] == TC_ACT_SHOT


def test_arp_for_the_switch_address_is_answered_on_the_port_it_came_in(switch) -> None:
    from scapy.layers.l2 import ARP, Ether

    host = switch.topo.nodes[switch.in_hop.node]
    mine, peer = switch.macs[switch.in_hop.port]
    request = (Ether(src=peer, dst="ff:ff:ff:ff:ff:ff")
               / ARP(op=1, hwsrc=peer, psrc=host.address, pdst=switch.table.address))
    rc, out = switch.run(request)
    assert rc == TC_ACT_REDIRECT
    assert (out.src, out.dst) == (mine, peer)
    assert (out["ARP"].op, out["ARP"].hwsrc, out["ARP"].psrc, out["ARP"].pdst) == \
        (2, mine, switch.table.address, host.address)


def test_stale_cb_bytes_would_hand_the_packet_to_the_switchs_own_stack(switch) -> None:
    """Why every port runs the cb scrubber first (p4ebpf/scrub.py): with the bytes a
    qdisc may leave in skb->cb, the program passes the packet up (TC_ACT_OK) instead of
    redirecting it; with a zeroed cb (what the scrubber leaves) it redirects."""
    frame = udp_frame(switch, remote_host(switch), 20000)
    stale = bytes(48) + b"\xff" * 20  # struct __sk_buff up to cb[5], cb all ones
    assert switch.run(frame, ctx=stale)[0] == TC_ACT_OK
    assert switch.run(frame, ctx=bytes(68))[0] == TC_ACT_REDIRECT
