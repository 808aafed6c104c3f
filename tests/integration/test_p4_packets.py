"""Packet-level behaviour of each P4 program on one bmv2 switch (no Mininet).

Port 0 leads to a host (10.0.0.2); ports 1-3 are the equal-cost up group. Scapy
sends crafted frames into a port and sniffs what the switch sends out.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pathdiv.experiments.dataplane.bmv2.programs import compile_program
from pathdiv.experiments.dataplane.bmv2.tools import find_p4_tools
from pathdiv.experiments.dataplane.p4.entries import EntryOptions, switch_entries
from pathdiv.experiments.dataplane.p4.hashing import ecmp_member
from pathdiv.topologies.forwarding import NextHop, Route, SwitchTable
from tests.support.p4_harness import OneSwitch

pytestmark = pytest.mark.root

scapy_all = pytest.importorskip("scapy.all", reason="scapy is not installed")
ARP, Ether, IP, TCP, UDP = (scapy_all.ARP, scapy_all.Ether, scapy_all.IP, scapy_all.TCP,
                            scapy_all.UDP)

SWITCH_IP = "10.0.0.1"
HOST_IP = "10.0.0.2"
REMOTE = "10.1.0.2"
SEED = 0x1234ABCD
UP_PORTS = (1, 2, 3)
PORTS = 4
QUIET_S = 0.7  # how long to listen for packets that must not come


@pytest.fixture(scope="module")
def tools():
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    found, reason = find_p4_tools()
    if found is None:
        pytest.skip(f"bmv2 not available: {reason}")
    return found


def one_table(box: OneSwitch, macs: dict[int, tuple[str, str]]) -> SwitchTable:
    def hop(port: int, addr: str) -> NextHop:
        return NextHop(port, box.switch_intf(port), f"peer{port}", addr, macs[port][1])

    return SwitchTable(
        switch="sw",
        address=SWITCH_IP,
        down=(Route(f"{HOST_IP}/32", hop(0, HOST_IP), direct=True),),
        up=tuple(hop(p, f"10.0.{p}.1") for p in UP_PORTS),
        static=(Route("10.1.0.2/32", hop(2, "10.0.2.1")), Route("10.1.0.3/32", hop(3, "10.0.3.1"))),
        seed=SEED,
    )


@contextmanager
def switch(tools, program: str, tmp_path: Path, **options) -> Iterator[tuple[OneSwitch, dict]]:
    compiled = compile_program(program, tools)
    with OneSwitch(tools, compiled.json, PORTS, tmp_path / "box") as box:
        macs = box.port_macs()
        box.install(switch_entries(one_table(box, macs), macs, program, EntryOptions(**options)))
        yield box, macs


class Capture:
    """Frames the switch sends out of any port (those with a switch-port source MAC)."""

    def __init__(self, box: OneSwitch, macs: dict) -> None:
        self.port_of = {box.peer_intf(i): i for i in range(box.ports)}
        self.switch_macs = {m[0] for m in macs.values()}
        self.frames: list[tuple[int, object]] = []
        self.cond = threading.Condition()
        started = threading.Event()
        self.sniffer = scapy_all.AsyncSniffer(
            iface=list(self.port_of), prn=self._add, store=False,
            lfilter=lambda p: Ether in p and p[Ether].src in self.switch_macs,
            started_callback=started.set,
        )
        self.sniffer.start()
        if not started.wait(5):
            raise RuntimeError("scapy sniffer did not start within 5 s")

    def _add(self, pkt) -> None:
        with self.cond:
            self.frames.append((self.port_of[pkt.sniffed_on], pkt))
            self.cond.notify_all()

    def wait(self, count: int, timeout_s: float = 10.0) -> list[tuple[int, object]]:
        """Until `count` frames came (count 0: until any frame came) or the timeout."""
        with self.cond:
            self.cond.wait_for(lambda: len(self.frames) >= max(count, 1), timeout_s)
            return list(self.frames)

    def stop(self) -> None:
        self.sniffer.stop()


def exchange(box, macs, in_port: int, frames: list, expect: int, inter: float = 0.0,
             wait_s: float = 10.0) -> list[tuple[int, object]]:
    """Send `frames` into `in_port`; return what came out (port, frame)."""
    scapy_all.conf.ifaces.reload()  # each test recreates the veths (new ifindexes)
    cap = Capture(box, macs)
    try:
        scapy_all.sendp(frames, iface=box.peer_intf(in_port), inter=inter, verbose=False)
        got = cap.wait(expect, wait_s if expect else QUIET_S)
        if expect:
            time.sleep(0.2)  # let any surplus frame show up too
            got = cap.wait(expect, 0)
        return got
    finally:
        cap.stop()


def to_switch(macs, in_port: int, dst: str, sport: int = 40000, ttl: int = 64, ident: int = 1,
              proto: str = "tcp"):
    l4 = TCP(sport=sport, dport=5001, flags="A") if proto == "tcp" else UDP(sport=sport, dport=53)
    return (Ether(src=macs[in_port][1], dst=macs[in_port][0])
            / IP(src=HOST_IP if in_port == 0 else "10.1.0.9", dst=dst, ttl=ttl, id=ident)
            / l4 / (b"x" * 64))


def ipv4_checksum_ok(ip) -> bool:
    fresh = ip.copy()
    fresh.chksum = None
    return IP(bytes(fresh))[IP].chksum == ip.chksum


def tcp_checksum_ok(pkt) -> bool:
    fresh = pkt[IP].copy()
    fresh[TCP].chksum = None
    return IP(bytes(fresh))[TCP].chksum == pkt[TCP].chksum


ALL = ("static", "ecmp", "spray", "flowlet")


@pytest.mark.parametrize("program", ALL)
def test_arp_for_the_switch_address_is_answered_by_the_port(tools, tmp_path, program) -> None:
    with switch(tools, program, tmp_path) as (box, macs):
        req = (Ether(src=macs[0][1], dst="ff:ff:ff:ff:ff:ff")
               / ARP(op=1, hwsrc=macs[0][1], psrc=HOST_IP, pdst=SWITCH_IP))
        other = (Ether(src=macs[0][1], dst="ff:ff:ff:ff:ff:ff")
                 / ARP(op=1, hwsrc=macs[0][1], psrc=HOST_IP, pdst="10.0.0.77"))
        got = exchange(box, macs, 0, [req, other], expect=1)
    assert len(got) == 1
    port, reply = got[0]
    assert port == 0
    assert (reply[ARP].op, reply[ARP].hwsrc, reply[ARP].psrc) == (2, macs[0][0], SWITCH_IP)
    assert (reply[ARP].hwdst, reply[ARP].pdst, reply[Ether].dst) == (macs[0][1], HOST_IP,
                                                                     macs[0][1])


@pytest.mark.parametrize("program", ALL)
def test_forwarded_packet_has_new_macs_lower_ttl_and_valid_checksums(tools, tmp_path,
                                                                     program) -> None:
    with switch(tools, program, tmp_path) as (box, macs):
        got = exchange(box, macs, 1, [to_switch(macs, 1, HOST_IP, ttl=64)], expect=1)
    assert len(got) == 1
    port, pkt = got[0]
    assert port == 0
    assert (pkt[Ether].src, pkt[Ether].dst) == macs[0]
    assert pkt[IP].ttl == 63
    assert ipv4_checksum_ok(pkt[IP])
    assert tcp_checksum_ok(pkt)
    assert bytes(pkt[TCP].payload) == b"x" * 64


@pytest.mark.parametrize("program", ("ecmp", "static"))
def test_expired_ttl_bad_checksum_and_unknown_destinations_are_dropped(tools, tmp_path,
                                                                        program) -> None:
    with switch(tools, program, tmp_path) as (box, macs):
        expired = to_switch(macs, 1, HOST_IP, ttl=1)
        corrupt = to_switch(macs, 1, HOST_IP)
        corrupt[IP].chksum = 0x1234
        stray = to_switch(macs, 1, "192.168.7.7")
        frames = [expired, corrupt] + ([stray] if program == "static" else [])
        got = exchange(box, macs, 1, frames, expect=0)
    assert got == []


def test_ecmp_member_matches_the_documented_hash(tools, tmp_path) -> None:
    flows = [(f"10.{1 + i % 3}.{i % 7}.{2 + i % 5}", 41000 + 17 * i) for i in range(60)]
    with switch(tools, "ecmp", tmp_path) as (box, macs):
        frames = [to_switch(macs, 0, dst, sport=sport, ident=i)
                  for i, (dst, sport) in enumerate(flows)]
        again = [to_switch(macs, 0, flows[0][0], sport=flows[0][1], ident=100 + k)
                 for k in range(5)]
        got = exchange(box, macs, 0, frames + again, expect=len(frames) + 5)
    assert len(got) == 65
    by_id = {pkt[IP].id: port for port, pkt in got}
    for i, (dst, sport) in enumerate(flows):
        member = ecmp_member(HOST_IP, dst, 6, sport, 5001, SEED, len(UP_PORTS))
        assert by_id[i] == UP_PORTS[member], (dst, sport)
    assert {by_id[100 + k] for k in range(5)} == {by_id[0]}
    assert {by_id[i] for i in range(60)} == set(UP_PORTS)


def test_spray_random_puts_one_flow_on_every_member(tools, tmp_path) -> None:
    with switch(tools, "spray", tmp_path, spray="random") as (box, macs):
        frames = [to_switch(macs, 0, REMOTE, ident=i) for i in range(90)]
        got = exchange(box, macs, 0, frames, expect=90)
    counts = {p: sum(1 for port, _ in got if port == p) for p in UP_PORTS}
    assert sum(counts.values()) == 90
    assert min(counts.values()) >= 10, counts


def test_spray_roundrobin_takes_members_in_turn(tools, tmp_path) -> None:
    with switch(tools, "spray", tmp_path, spray="roundrobin") as (box, macs):
        frames = [to_switch(macs, 0, REMOTE, ident=i) for i in range(30)]
        got = exchange(box, macs, 0, frames, expect=30)
    by_id = {pkt[IP].id: port for port, pkt in got}
    assert len(by_id) == 30
    first = UP_PORTS.index(by_id[0])
    assert all(by_id[i] == UP_PORTS[(first + i) % 3] for i in range(30)), by_id


def test_spray_policy_changes_at_run_time(tools, tmp_path) -> None:
    from pathdiv.experiments.dataplane.p4.entries import R_SPRAY_POLICY, SPRAY_POLICIES

    with switch(tools, "spray", tmp_path, spray="random") as (box, macs):
        box.cli([f"register_write {R_SPRAY_POLICY} 0 {SPRAY_POLICIES['roundrobin']}"])
        frames = [to_switch(macs, 0, REMOTE, ident=i) for i in range(12)]
        got = exchange(box, macs, 0, frames, expect=12)
    by_id = {pkt[IP].id: port for port, pkt in got}
    first = UP_PORTS.index(by_id[0])
    assert all(by_id[i] == UP_PORTS[(first + i) % 3] for i in range(12)), by_id


def test_static_sends_each_destination_to_its_one_port(tools, tmp_path) -> None:
    with switch(tools, "static", tmp_path) as (box, macs):
        frames = [to_switch(macs, 0, dst, sport=40000 + i, ident=i)
                  for i in range(20) for dst in ("10.1.0.2", "10.1.0.3")]
        got = exchange(box, macs, 0, frames, expect=40)
    assert len(got) == 40
    assert {port for port, pkt in got if pkt[IP].dst == "10.1.0.2"} == {2}
    assert {port for port, pkt in got if pkt[IP].dst == "10.1.0.3"} == {3}


def test_flowlet_keeps_a_burst_together(tools, tmp_path) -> None:
    with switch(tools, "flowlet", tmp_path, flowlet_gap_us=1_000_000) as (box, macs):
        frames = [to_switch(macs, 0, REMOTE, ident=i) for i in range(20)]
        got = exchange(box, macs, 0, frames, expect=20)
    assert len(got) == 20
    assert len({port for port, _ in got}) == 1


def test_flowlet_moves_a_flow_after_an_idle_gap(tools, tmp_path) -> None:
    with switch(tools, "flowlet", tmp_path, flowlet_gap_us=100) as (box, macs):
        frames = [to_switch(macs, 0, REMOTE, ident=i) for i in range(30)]
        got = exchange(box, macs, 0, frames, expect=30, inter=0.005)
    assert len(got) == 30
    assert len({port for port, _ in got}) >= 2


def test_port_counters_count_what_was_sent_and_forwarded(tools, tmp_path) -> None:
    with switch(tools, "ecmp", tmp_path) as (box, macs):
        before = box.counters()
        frames = [to_switch(macs, 1, HOST_IP, ident=i) for i in range(25)]
        got = exchange(box, macs, 1, frames, expect=25)
        after = box.counters()
    assert len(got) == 25
    length = len(frames[0])
    rx = after[1][0].packets - before[1][0].packets, after[1][0].bytes - before[1][0].bytes
    tx = after[0][1].packets - before[0][1].packets, after[0][1].bytes - before[0][1].bytes
    assert rx == (25, 25 * length)
    assert tx == (25, 25 * length)
