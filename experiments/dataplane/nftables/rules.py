"""The nftables plane's routes, policy rules and each mode's nftables ruleset (pure).

Down routes (towards hosts) live in the main table. The equal-cost up group is one
routing table per member (table 100+i: default via member i) selected by a firewall
mark that nftables sets in prerouting:

  ecmp   mark = jhash(saddr, daddr, proto, sport, dport) mod n, per-switch seed
  spray  mark = numgen random|inc mod n   (per packet)
  static mark = the fat-tree paper's two-level table (one member per destination
         host), as the rule it follows (topologies/forwarding.py `StaticSpread`): a map
         from one field of the destination address (`ip daddr & 0.0.0.31`, the host
         number, at an edge; `& 0.0.255.0`, the edge number, at an aggregation switch)
         to the member; k/2 map entries a switch where routes took one per remote host
         address (145,408 of a k=16 fat tree's 157,952 routes)

Rule 1000 (`lookup main suppress_prefixlength 0`) lets specific down routes win over
the up group. A mode this plane's registry entry refuses (flowlet: no per-flow
idle-gap state) has no rules and is refused with the entry's reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pathdiv.experiments.config.planes import PLANES
from pathdiv.experiments.dataplane.base import DataPlaneError, check_mode
from pathdiv.topologies.forwarding import (
    HOST_FIELD_MASK,
    StaticSpread,
    SwitchTable,
    neighbor_entries,
)

NAME = "nftables"
UP_TABLE_BASE = 100
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
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class UpGroup:
    """What a mode's rules know of one switch: its up-group size, hash seed and the
    static table's rule."""

    members: int
    seed: int
    spread: StaticSpread | None = None


# StaticSpread.field -> the mask that keeps it of an address, and a value's address form
SPREAD_FIELDS: dict[str, tuple[str, Callable[[int], str]]] = {
    "host": (f"0.0.0.{HOST_FIELD_MASK}", lambda v: f"0.0.0.{v}"),
    "edge": ("0.0.255.0", lambda v: f"0.0.{v}.0"),
}


# (the switch's up group, the switching section of a config) -> nftables prerouting
# rules that set `meta mark` to the chosen member 1..n
ModeRules = Callable[[UpGroup, Mapping[str, Any]], list[str]]


def _static_rules(group: UpGroup, switching: Mapping[str, Any]) -> list[str]:
    if group.spread is None:
        return []
    mask, value = SPREAD_FIELDS[group.spread.field]
    entries = ", ".join(f"{value(v)} : {m + 1}" for v, m in group.spread.choices)
    return [f"meta mark set ip daddr & {mask} map {{ {entries} }}"]


def _ecmp_rules(group: UpGroup, switching: Mapping[str, Any]) -> list[str]:
    seed = f"0x{group.seed:08x}"
    return [
        "meta l4proto { tcp, udp } meta mark set jhash ip saddr . ip daddr . "
        f"meta l4proto . th sport . th dport mod {group.members} seed {seed} offset 1",
        f"meta l4proto != {{ tcp, udp }} meta mark set jhash ip saddr . ip daddr "
        f"mod {group.members} seed {seed} offset 1",
    ]


def _spray_rules(group: UpGroup, switching: Mapping[str, Any]) -> list[str]:
    kind = "random" if switching.get("spray", "random") == "random" else "inc"
    return [f"meta mark set numgen {kind} mod {group.members} offset 1"]


# switching mode (config/switching.py) -> its rules; a mode the plane's entry refuses
# (config/planes.py) has none
MODE_RULES: dict[str, ModeRules] = {
    "static": _static_rules,
    "ecmp": _ecmp_rules,
    "spray": _spray_rules,
}


def mode_rules(mode: str, spray: str) -> ModeRules:
    """The rules of `mode`; DataPlaneError naming why when this plane cannot run it."""
    check_mode(mode, spray)
    refused = PLANES[NAME].refused_modes
    if mode in refused or mode not in MODE_RULES:
        why = refused.get(mode, "no nftables rules are written for it "
                                "(dataplane/nftables/rules.py)")
        raise DataPlaneError(f"switching mode {mode!r}: {why}")
    return MODE_RULES[mode]


def nft_ruleset(table: SwitchTable, mode: str, spray: str) -> str:
    """The switch's whole nftables state for `mode` (replaces the previous one)."""
    rules_of = mode_rules(mode, spray)
    n = len(table.up)
    rules = rules_of(UpGroup(n, table.seed, table.spread), {"spray": spray}) if n else []
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
