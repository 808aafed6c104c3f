"""The switching modes: one registry entry per mode, read by everything that knows modes.

An entry names the mode's P4 program (`p4src/<program>.p4`, run by the P4 data planes),
how its switches route remote destinations (per destination, or into the equal-cost up
group), the P4 registers it sets and the config keys it reads (`switching.<key>`). How
each data plane carries a mode is the plane's (the nftables plane's rules:
`dataplane/nftables/rules.py`; a plane that cannot carry a mode says why in its entry of
`config/planes.py`). The schema's choices, the data planes, the P4 entries and the
classroom shell derive from `MODES`; a new mode is one entry here, one P4 file, its
nftables rules and its tests.
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
    registers: Registers = _no_registers
    params: tuple[Param, ...] = field(default_factory=tuple)


def _spray_registers(switching: Mapping[str, Any]) -> dict[str, int]:
    return {"spray_policy": SPRAY_POLICIES[str(switching.get("spray", "random"))]}


def _flowlet_registers(switching: Mapping[str, Any]) -> dict[str, int]:
    return {"flowlet_gap_us": int(switching.get("flowlet_gap_us", FLOWLET_GAP_US))}


FLOWLET_GAP_US = 5000

MODES: dict[str, SwitchingMode] = {m.name: m for m in (
    SwitchingMode("static", "one path per destination", "static", up_group=False),
    SwitchingMode("ecmp", "per-flow hash", "ecmp", up_group=True),
    SwitchingMode("spray", "per-packet (switching.spray)", "spray", up_group=True,
                  registers=_spray_registers),
    SwitchingMode(
        "flowlet", "per flowlet: a flow moves after an idle gap of switching.flowlet_gap_us",
        "flowlet", up_group=True, registers=_flowlet_registers,
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
