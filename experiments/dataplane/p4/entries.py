"""Table entries and register values of every P4 switch, computed from the topology.

Pure: from a switch's `SwitchTable` (topologies/forwarding.py), the MAC addresses of
its ports and their neighbours and the program it runs, produce the entries as data with fully
qualified P4 names; render them as simple_switch_CLI commands. The same data is
compared with what the switch reports back (see `pathdiv.experiments.dataplane.bmv2.cli`).

  ingress  arp_responder  (port, switch address) -> arp_reply(port MAC)
           ipv4_lpm       down routes -> forward(port); static: remote host /32s ->
                          forward(port); other programs: 0.0.0.0/0 -> set_group(up);
                          the switch's own address /32 -> drop
           group_member   (up group, i) -> forward(port of up member i)
  egress   neighbor_mac   port -> set_macs(port MAC, neighbour MAC)
  registers ecn_threshold, spray_policy (spray), flowlet_gap_us (flowlet)
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

from pathdiv.experiments.config.switching import (
    FLOWLET_GAP_US,
    MODES,
    SPRAY_POLICIES,
    SwitchingMode,
)
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.forwarding import NextHop, SwitchTable

PROGRAMS = tuple(dict.fromkeys(m.program for m in MODES.values()))
UP_GROUP = 1
PORT_BITS = 9
MEMBER_BITS = 16
DEFAULT_FLOWLET_GAP_US = FLOWLET_GAP_US
QDEPTH_MAX = (1 << 19) - 1

# Fully qualified names, as p4c-bm2-ss writes them into the JSON and P4Info.
INGRESS = "PathdivIngress"
EGRESS = "PathdivEgress"
SELECT = f"{INGRESS}.select_member"
T_ARP = f"{INGRESS}.arp_responder"
T_LPM = f"{INGRESS}.ipv4_lpm"
T_GROUP = f"{INGRESS}.group_member"
T_NEIGHBOR = f"{EGRESS}.neighbor_mac"
A_ARP_REPLY = f"{INGRESS}.arp_reply"
A_FORWARD = f"{INGRESS}.forward"
A_SET_GROUP = f"{INGRESS}.set_group"
A_DROP = f"{INGRESS}.drop"
A_SET_MACS = f"{EGRESS}.set_macs"
R_ECN_THRESHOLD = f"{EGRESS}.ecn_threshold"
R_SPRAY_POLICY = f"{SELECT}.spray_policy"
R_FLOWLET_GAP = f"{SELECT}.flowlet_gap_us"
C_PORT_RX = f"{INGRESS}.port_rx"
C_PORT_TX = f"{EGRESS}.port_tx"
TABLES = (T_ARP, T_LPM, T_GROUP, T_NEIGHBOR)


class EntryError(ValueError):
    """Entries cannot be computed (unknown program, missing MAC, duplicate key...)."""


@dataclass(frozen=True)
class Value:
    """One match field or action parameter; `kind` only chooses how it is written."""

    value: int
    kind: str = "int"  # int | ipv4 | mac
    prefix_len: int | None = None  # LPM match fields only

    def cli(self) -> str:
        if self.kind == "ipv4":
            text = str(ipaddress.IPv4Address(self.value))
        elif self.kind == "mac":
            raw = f"{self.value:012x}"
            text = ":".join(raw[i : i + 2] for i in range(0, 12, 2))
        else:
            text = str(self.value)
        return text if self.prefix_len is None else f"{text}/{self.prefix_len}"

    def key(self) -> tuple[int, int | None]:
        return (self.value, self.prefix_len)


@dataclass(frozen=True)
class TableEntry:
    table: str
    match: tuple[Value, ...]
    action: str
    params: tuple[Value, ...]

    def cli(self) -> str:
        match = " ".join(v.cli() for v in self.match)
        params = " ".join(v.cli() for v in self.params)
        return f"table_add {self.table} {self.action} {match} => {params}".rstrip()

    def normalized(self) -> tuple[tuple[tuple[int, int | None], ...], str, tuple[int, ...]]:
        """(match keys, action, parameter values) as integers, as read back."""
        keys = tuple(v.key() for v in self.match)
        return (keys, self.action, tuple(v.value for v in self.params))


@dataclass(frozen=True)
class RegisterWrite:
    register: str
    index: int
    value: int

    def cli(self) -> str:
        return f"register_write {self.register} {self.index} {self.value}"


@dataclass(frozen=True)
class SwitchEntries:
    switch: str
    program: str
    tables: tuple[TableEntry, ...]
    registers: tuple[RegisterWrite, ...]

    def commands(self) -> list[str]:
        """simple_switch_CLI commands that install everything, in order."""
        return [e.cli() for e in self.tables] + [r.cli() for r in self.registers]

    def by_table(self) -> dict[str, list[TableEntry]]:
        out: dict[str, list[TableEntry]] = {t: [] for t in TABLES}
        for e in self.tables:
            out[e.table].append(e)
        return out


@dataclass(frozen=True)
class EntryOptions:
    spray: str = "random"
    flowlet_gap_us: int = DEFAULT_FLOWLET_GAP_US
    ecn_threshold_pkts: int = 0  # 0 = no ECN marking

    def __post_init__(self) -> None:
        if self.spray not in SPRAY_POLICIES:
            raise EntryError(
                f"spray policy {self.spray!r} is not one of {', '.join(SPRAY_POLICIES)}"
            )
        if self.flowlet_gap_us <= 0:
            raise EntryError(f"flowlet gap must be > 0 microseconds, got {self.flowlet_gap_us}")
        if not 0 <= self.ecn_threshold_pkts <= QDEPTH_MAX:
            raise EntryError(
                f"ECN threshold must be in 0..{QDEPTH_MAX} packets (0 = off), "
                f"got {self.ecn_threshold_pkts}"
            )

    def switching(self) -> dict[str, object]:
        """The switching keys a mode's registers read (`switching.<key>` of a config)."""
        return {"spray": self.spray, "flowlet_gap_us": self.flowlet_gap_us}


def mode_of_program(program: str) -> SwitchingMode:
    """The switching mode whose P4 program is `program` (EntryError when none is)."""
    for mode in MODES.values():
        if mode.program == program:
            return mode
    raise EntryError(f"P4 program {program!r} is not one of {', '.join(PROGRAMS)}")


def egress_queue_commands(queues: list[tuple[int, int, int]]) -> list[str]:
    """simple_switch_CLI lines giving each egress port's queue a rate (packets per second)
    and a depth (packets), so packets wait in bmv2, where `enq_qdepth` sees them, rather
    than in the kernel's shaper behind it. `queues`: (port, rate_pps, depth) rows."""
    cmds = []
    for port, rate_pps, depth in queues:
        if rate_pps < 1 or depth < 1:
            raise EntryError(f"port {port}: an egress queue needs a rate and a depth of at "
                             f"least 1, got {rate_pps} pps and {depth} packets")
        cmds += [f"set_queue_rate {rate_pps} {port}", f"set_queue_depth {depth} {port}"]
    return cmds


def mac_to_int(mac: str) -> int:
    parts = mac.split(":")
    if len(parts) != 6 or not all(len(p) == 2 for p in parts):
        raise EntryError(f"MAC address {mac!r} is not of the form aa:bb:cc:dd:ee:ff")
    try:
        return int("".join(parts), 16)
    except ValueError:
        raise EntryError(f"MAC address {mac!r} has non-hex digits") from None


def _ip(address: str) -> Value:
    return Value(int(ipaddress.IPv4Address(address)), "ipv4")


def _prefix(prefix: str) -> Value:
    net = ipaddress.IPv4Network(prefix)
    return Value(int(net.network_address), "ipv4", net.prefixlen)


def port_macs(topo: FatTree, switch: str) -> dict[int, tuple[str, str]]:
    """Port number -> (the port's MAC, the neighbour's MAC on that link), from the topology."""
    return {
        lk.port_of(switch).number: (topo.mac(lk.port_of(switch)), topo.mac(lk.peer_of(switch)))
        for lk in topo.links_of(switch)
    }


def _forward(hop: NextHop) -> tuple[str, tuple[Value, ...]]:
    return A_FORWARD, (Value(hop.port),)


def switch_ports(table: SwitchTable) -> list[NextHop]:
    """One hop per port of the switch (down and up), in port order."""
    hops = {r.hop.port: r.hop for r in table.down}
    hops.update({h.port: h for h in table.up})
    return [hops[p] for p in sorted(hops)]


def switch_entries(
    table: SwitchTable,
    macs: Mapping[int, tuple[str, str]],
    program: str,
    options: EntryOptions | None = None,
) -> SwitchEntries:
    """Everything `program` needs on `table.switch`; `macs` as returned by `port_macs`."""
    mode = mode_of_program(program)
    options = options or EntryOptions()
    sw = table.switch
    entries: list[TableEntry] = []
    for hop in switch_ports(table):
        if hop.port not in macs:
            raise EntryError(
                f"switch {sw}: no MAC addresses given for port {hop.port} ({hop.intf})"
            )
        mine, peer = (Value(mac_to_int(m), "mac") for m in macs[hop.port])
        port = Value(hop.port)
        entries.append(TableEntry(T_ARP, (port, _ip(table.address)), A_ARP_REPLY, (mine,)))
        entries.append(TableEntry(T_NEIGHBOR, (port,), A_SET_MACS, (mine, peer)))
    # The switch's own address is no host's: drop instead of sending it up the default.
    entries.append(TableEntry(T_LPM, (_prefix(f"{table.address}/32"),), A_DROP, ()))
    routes = list(table.down) + ([] if mode.up_group else list(table.static))
    for route in routes:
        action, params = _forward(route.hop)
        entries.append(TableEntry(T_LPM, (_prefix(route.prefix),), action, params))
    if mode.up_group and table.up:
        entries.append(
            TableEntry(
                T_LPM,
                (_prefix("0.0.0.0/0"),),
                A_SET_GROUP,
                (Value(UP_GROUP), Value(len(table.up)), Value(table.seed)),
            )
        )
        for i, hop in enumerate(table.up):
            action, params = _forward(hop)
            entries.append(TableEntry(T_GROUP, (Value(UP_GROUP), Value(i)), action, params))
    _check_unique(sw, entries)
    registers = [RegisterWrite(R_ECN_THRESHOLD, 0, options.ecn_threshold_pkts)]
    registers += [RegisterWrite(f"{SELECT}.{name}", 0, value)
                  for name, value in mode.registers(options.switching()).items()]
    return SwitchEntries(sw, program, tuple(entries), tuple(registers))


def _check_unique(switch: str, entries: list[TableEntry]) -> None:
    seen: dict[tuple[str, tuple[tuple[int, int | None], ...]], TableEntry] = {}
    for e in entries:
        key = (e.table, tuple(v.key() for v in e.match))
        if key in seen:
            raise EntryError(
                f"switch {switch}: two entries for the same key in {e.table}: "
                f"`{seen[key].cli()}` and `{e.cli()}`; the forwarding tables disagree"
            )
        seen[key] = e


def network_entries(
    topo: FatTree,
    tables: Mapping[str, SwitchTable],
    program: str,
    options: EntryOptions | None = None,
) -> dict[str, SwitchEntries]:
    """Every switch's entries, with the MACs the topology assigns."""
    return {
        sw: switch_entries(t, port_macs(topo, sw), program, options) for sw, t in tables.items()
    }
