"""The embedded data plane: Linux IPv4 forwarding inside each switch's namespace.

Down routes (towards hosts) live in the main table. The equal-cost up group is one
routing table per member (table 100+i: default via member i) selected by a firewall
mark that nftables sets in prerouting:

  ecmp   mark = jhash(saddr, daddr, proto, sport, dport) mod n, per-switch seed
  spray  mark = numgen random|inc mod n   (per packet)
  static no mark; rule 900 sends remote destinations to table 50, the fat-tree
         paper's two-level table (one member per destination host)

Rule 1000 (`lookup main suppress_prefixlength 0`) lets specific down routes win over
the up group. Everything is generated as text by pure functions and applied with
`ip -batch` and `nft -f`, one call each per switch.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from mininet.node import Node

from experiments.dataplane.base import (
    DataPlane,
    DataPlaneError,
    PortCounters,
    check_mode,
    parse_proc_net_dev,
)
from experiments.hostsetup import NO_IPV6
from topologies.forwarding import SwitchTable, neighbor_entries

UP_TABLE_BASE = 100
STATIC_TABLE = 50
PREF_STATIC = 900
PREF_MAIN = 1000
PREF_UP_BASE = 1100
NFT_TABLE = "pathdiv"


def route_batch(table: SwitchTable) -> str:
    """`ip -batch` lines: addresses are set elsewhere; routes and rules for all modes."""
    lines = [f"neigh replace {addr} lladdr {mac} dev {intf} nud permanent"
             for addr, mac, intf in neighbor_entries(table)]
    for r in table.down:
        if r.direct:
            lines.append(f"route replace {r.prefix} dev {r.hop.intf} src {table.address}")
        else:
            lines.append(
                f"route replace {r.prefix} via {r.hop.address} dev {r.hop.intf} onlink "
                f"src {table.address}"
            )
    if table.up:
        lines.append(f"rule add pref {PREF_MAIN} lookup main suppress_prefixlength 0")
        for i, hop in enumerate(table.up):
            tid = UP_TABLE_BASE + i
            lines.append(
                f"route replace default via {hop.address} dev {hop.intf} onlink "
                f"src {table.address} table {tid}"
            )
            lines.append(f"rule add pref {PREF_UP_BASE + i} fwmark {i + 1} lookup {tid}")
        for r in table.static:
            lines.append(
                f"route replace {r.prefix} via {r.hop.address} dev {r.hop.intf} onlink "
                f"src {table.address} table {STATIC_TABLE}"
            )
    return "\n".join(lines) + "\n"


def static_rule(enable: bool) -> str:
    verb = "add" if enable else "del"
    return f"rule {verb} pref {PREF_STATIC} lookup {STATIC_TABLE}"


def nft_ruleset(table: SwitchTable, mode: str, spray: str) -> str:
    """The switch's whole nftables state for `mode` (replaces the previous one)."""
    check_mode(mode, spray)
    n = len(table.up)
    rules: list[str] = []
    if n and mode == "ecmp":
        seed = f"0x{table.seed:08x}"
        rules.append(
            "meta l4proto { tcp, udp } meta mark set jhash ip saddr . ip daddr . "
            f"meta l4proto . th sport . th dport mod {n} seed {seed} offset 1"
        )
        rules.append(
            f"meta l4proto != {{ tcp, udp }} meta mark set jhash ip saddr . ip daddr "
            f"mod {n} seed {seed} offset 1"
        )
    elif n and mode == "spray":
        kind = "random" if spray == "random" else "inc"
        rules.append(f"meta mark set numgen {kind} mod {n} offset 1")
    body = "\n".join(f"    {r}" for r in rules)
    return (
        f"table ip {NFT_TABLE}\n"
        f"delete table ip {NFT_TABLE}\n"
        f"table ip {NFT_TABLE} {{\n"
        "  chain pre {\n"
        "    type filter hook prerouting priority mangle; policy accept;\n"
        f"{body}\n"
        "  }\n"
        "}\n"
    )


class KernelSwitch(Node):
    """A network namespace that forwards IPv4 in the kernel (configured by the plane)."""


SWITCH_SYSCTLS = [
    *NO_IPV6,
    "net.ipv4.ip_forward=1",
    "net.ipv4.conf.all.rp_filter=0",
    "net.ipv4.conf.default.rp_filter=0",
]


class KernelDataPlane(DataPlane):
    name = "kernel"

    def __init__(self, topo: Any, tables: dict[str, SwitchTable], workdir: Path) -> None:
        super().__init__(topo, tables, workdir)
        self.net: Any = None
        self._static_rule = False

    def switch_class(self) -> type:
        return KernelSwitch

    def _run(self, switch: str, argv: list[str]) -> str:
        node = self.net[switch]
        out = node.cmd(shlex.join(argv) + " 2>&1; echo __rc=$?")
        body, _, rc = out.rpartition("__rc=")
        if rc.strip() != "0":
            raise DataPlaneError(
                f"switch {switch}: `{shlex.join(argv)}` failed (exit {rc.strip()}): "
                f"{body.strip()[-500:]}"
            )
        return body

    def _apply(self, switch: str, suffix: str, text: str, argv: list[str]) -> None:
        path = self.workdir / "switches" / f"{switch}.{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self._run(switch, [*argv, str(path)])

    def start(self, net: Any, mode: str, spray: str) -> None:
        check_mode(mode, spray)
        self.net = net
        for name, table in self.tables.items():
            self._run(name, ["sysctl", "-qw", *SWITCH_SYSCTLS])
            for link in self.topo.links_of(name):
                intf = link.port_of(name).intf
                self._run(name, ["ip", "addr", "replace", f"{table.address}/32", "dev", intf])
                self._run(name, ["ip", "link", "set", intf, "up"])
            self._apply(name, "routes", route_batch(table), ["ip", "-batch"])
        self.set_mode(mode, spray)

    def set_mode(self, mode: str, spray: str) -> None:
        check_mode(mode, spray)
        want_static = mode == "static"
        for name, table in self.tables.items():
            if not table.up:
                continue  # core switches only route down
            if want_static != self._static_rule:
                self._apply(name, "mode", static_rule(want_static) + "\n", ["ip", "-batch"])
            self._apply(name, "nft", nft_ruleset(table, mode, spray), ["nft", "-f"])
        self._static_rule = want_static
        self.mode, self.spray = mode, spray

    def port_counters(self, switch: str) -> dict[str, PortCounters]:
        return parse_proc_net_dev(self._run(switch, ["cat", "/proc/net/dev"]))

    def stop(self) -> None:
        self.net = None  # state lives in the namespaces, which die with their nodes
