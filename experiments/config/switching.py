"""The switching modes: one registry entry per mode, read by everything that knows modes.

An entry names the mode's P4 program (`p4src/<program>.p4`, run by the bmv2 data plane,
and by the p4-ebpf one when the program has a PSA version),
how its switches route remote destinations (per destination, or into the equal-cost up
group), the nftables rules that choose an up-group member on the kernel data plane (or
why that plane cannot), the P4 registers it sets and the config keys it reads
(`switching.<key>`). The schema's choices, both data planes, the P4 entries and the
classroom shell derive from `MODES`; a new mode is one entry here, one P4 file and its
tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

SPRAYS = ("random", "roundrobin")
SPRAY_POLICIES = {"random": 0, "roundrobin": 1}  # the spray program's spray_policy register


@dataclass(frozen=True)
class Param:
    """A config key of one mode: `switching.<key>`, an integer from minimum to maximum."""

    key: str
    default: int
    help: str
    minimum: int = 1
    maximum: int = 10_000_000
    unit: str = ""


@dataclass(frozen=True)
class UpGroup:
    """What a kernel-plane rule knows of one switch: its up-group size and hash seed."""

    members: int
    seed: int


# (the switch's up group, the switching section of a config) -> nftables prerouting
# rules that set `meta mark` to the chosen member 1..n
KernelRules = Callable[[UpGroup, Mapping[str, Any]], list[str]]
# the switching section -> register name (inside the program's select_member) -> value
Registers = Callable[[Mapping[str, Any]], dict[str, int]]


def _no_registers(_: Mapping[str, Any]) -> dict[str, int]:
    return {}


@dataclass(frozen=True)
class SwitchingMode:
    name: str
    summary: str  # one phrase for the schema's help: what chooses a packet's path
    program: str  # p4src/<program>.p4
    up_group: bool  # remote destinations: True into the up group, False one route each
    kernel_rules: KernelRules | None  # None: the kernel data plane cannot run this mode
    kernel_refusal: str = ""  # why not, when kernel_rules is None
    registers: Registers = _no_registers
    params: tuple[Param, ...] = field(default_factory=tuple)
    psa: bool = True  # the program has a PSA top level (dataplane: p4-ebpf can run it)
    psa_refusal: str = ""  # why not, when psa is False


def _static_rules(group: UpGroup, switching: Mapping[str, Any]) -> list[str]:
    return []  # no mark: rule 900 sends remote destinations to the static table


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


def _spray_registers(switching: Mapping[str, Any]) -> dict[str, int]:
    return {"spray_policy": SPRAY_POLICIES[str(switching.get("spray", "random"))]}


def _flowlet_registers(switching: Mapping[str, Any]) -> dict[str, int]:
    return {"flowlet_gap_us": int(switching.get("flowlet_gap_us", FLOWLET_GAP_US))}


FLOWLET_GAP_US = 5000

MODES: dict[str, SwitchingMode] = {m.name: m for m in (
    SwitchingMode("static", "one path per destination", "static", up_group=False,
                  kernel_rules=_static_rules),
    SwitchingMode("ecmp", "per-flow hash", "ecmp", up_group=True, kernel_rules=_ecmp_rules),
    SwitchingMode("spray", "per-packet (switching.spray)", "spray", up_group=True,
                  kernel_rules=_spray_rules, registers=_spray_registers),
    SwitchingMode(
        "flowlet", "per flowlet: a flow moves after an idle gap of switching.flowlet_gap_us",
        "flowlet", up_group=True, kernel_rules=None,
        kernel_refusal="the kernel data plane keeps no per-flow idle-gap state; "
                       "use dataplane: bmv2",
        registers=_flowlet_registers,
        psa=False, psa_refusal="flowlet.p4 reads bmv2's microsecond ingress timestamp",
        params=(Param("flowlet_gap_us", FLOWLET_GAP_US,
                      "idle gap (microseconds) after which a flow's next packet may take "
                      "another path (mode flowlet)", maximum=10_000_000, unit="µs"),),
    ),
)}


def mode_help() -> str:
    """The schema's help for switching.mode, from the registry."""
    return "; ".join(f"{m.name}: {m.summary}" for m in MODES.values())


def mode_params() -> dict[str, Param]:
    """Every mode's config keys (`switching.<key>`), by key."""
    return {p.key: p for m in MODES.values() for p in m.params}
