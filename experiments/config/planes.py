"""The data planes: one registry entry per plane, read by everything that knows planes.

A data plane is what forwards packets in the fat tree's switches. An entry says what a
config calls it (`dataplane: <name>`; an older name stays an alias), whether it runs the
P4 programs of p4src/, which switching modes and link conditions it refuses and why, what
a run on it costs beyond the same run on the baseline plane (nftables), whether a network
built on it can serve the next run, where ECN is marked, which environment variables the
lab kernel's guest needs to find its tools, what to install to get it, and the module of
`pathdiv.experiments.dataplane` that implements it (its switches, tool finder, lab-kernel
preparation and ECMP member function: `dataplane/base.py`, `PlaneImplementation`).

The schema's choices, the config check, the estimate (`plan/estimate.py`), the network
reuse rule (`fabric/netstate.py`) and `dataplane: auto` (`dataplane/select.py`) read
`PLANES`; a new plane is one module under `experiments/dataplane/` and one entry here
(`tests/unit/test_plane_registry.py` plants one).

Costs are modelled from what a plane pays per switch and per packet, measured against
the nftables plane on this project's 2-core reference machine (docs/p4.md, "What a run
costs on each plane"): `per_switch_s` for every switch of a run that builds its network
(starting its process or loading its program, writing its entries), `per_switch_mb_s` for
every MB of payload that crosses one switch on the lab kernel's virtual clock, where CPU
work is wall time. On the real clock traffic takes its simulated time on every plane that
keeps up with the link rate, so only the per-switch part applies there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

BASELINE = "nftables"  # the plane every other is measured against, and auto's fallback
AUTO = "auto"
# auto takes a P4 plane for a run only when the run's expected wall time there is at most
# this many times its expected time on the baseline plane (dataplane/select.py)
AUTO_BOUND = 1.5


@dataclass(frozen=True)
class PlaneCost:
    """Wall time a run on a plane costs beyond the same run on the baseline plane."""

    per_switch_s: float = 0.0     # each switch of a run that builds its network
    per_switch_mb_s: float = 0.0  # each MB of payload through one switch (virtual clock)


@dataclass(frozen=True)
class Plane:
    name: str
    summary: str  # one phrase for the schema's help
    implementation: str  # module under pathdiv.experiments.dataplane with IMPLEMENTATION
    p4: bool  # runs p4src/'s programs (auto prefers such a plane when it can afford it)
    install: str  # the one thing to do to get this plane here (check prints it)
    aliases: tuple[str, ...] = ()  # older names a config may still use
    refused_modes: Mapping[str, str] = field(default_factory=dict)  # mode -> why not
    lossy_links: str = ""  # why loss_pct into a switch cannot be honoured ("": it can)
    costs: Mapping[str, PlaneCost] = field(default_factory=dict)  # hosts.kernel -> cost
    reusable: bool = False  # a built network may serve the next run (reset and verified)
    marks_ecn_in_program: bool = False  # False: the egress qdiscs mark (RED)
    guest_env: tuple[str, ...] = ()  # what the lab kernel's guest needs to find the tools

    def cost(self, kernel: str) -> PlaneCost:
        """The cost model on hosts.kernel `kernel` (none beyond the baseline's if unknown)."""
        return self.costs.get(kernel, PlaneCost())


P4_ENV = ("P4_PREFIX", "PATHDIV_P4_CACHE", "PATHDIV_P4_DEBUG")
LOSS_BEFORE = ("loss_pct: loss into a switch is dropped by nftables on arrival (netdev "
               "ingress), which {} switches read before ({}); use dataplane: nftables for "
               "lossy links")

PLANES: dict[str, Plane] = {p.name: p for p in (
    Plane(
        "nftables", "Linux forwarding in each switch's namespace, the member chosen by "
        "nftables (jhash, numgen)", "nftables.plane", p4=False,
        install="nothing: Linux forwarding and nftables are always there",
        aliases=("kernel",),
        refused_modes={"flowlet": "the nftables plane keeps no per-flow idle-gap state; "
                                  "use dataplane: bmv2"},
        reusable=True,
    ),
    Plane(
        "p4-ebpf", "P4 (PSA programs compiled by p4c-ebpf) as eBPF at tc, one program per "
        "switch, no switch process", "p4ebpf.plane", p4=True,
        install="p4c's eBPF back end with its runtime headers, clang, llvm and libbpf: "
                "`sudo scripts/install-p4.sh` (docs/p4.md, Installing the tools)",
        refused_modes={"flowlet": "its P4 program has no PSA version (flowlet.p4 reads "
                                  "bmv2's microsecond ingress timestamp); use dataplane: "
                                  "bmv2"},
        lossy_links=LOSS_BEFORE.format("p4-ebpf", "at tc ingress"),
        # what a run leaves in its maps is checked against what was written (the spray
        # program's round-robin position excepted, as nftables' `numgen inc` counter)
        reusable=True,
        # lab: fitted over 30 paired runs of noisy.yaml's vanilla cells (docs/p4.md, "What
        # a run costs on each plane", 2026-11-28); host: not measured, the lab figure
        costs={"lab": PlaneCost(per_switch_s=0.05, per_switch_mb_s=0.001),
               "host": PlaneCost(per_switch_s=0.05)},
        guest_env=("P4C_EBPF_RUNTIME", *P4_ENV),
    ),
    Plane(
        "bmv2", "P4 on p4lang's software switch, one simple_switch process per switch: "
        "tables, counters and debug pcaps to look at", "bmv2.plane", p4=True,
        install="p4lang's bmv2 and p4c: `sudo scripts/install-p4.sh` (docs/p4.md, "
                "Installing the tools)",
        lossy_links=LOSS_BEFORE.format("bmv2", "from a packet socket"),
        # lab: a query run (per switch) and a long run (per switch-MB) against nftables
        # (docs/p4.md, "What a run costs on each plane"); host: not measured (its
        # switches start in a few seconds and forward at the link rate)
        costs={"lab": PlaneCost(per_switch_s=2.3, per_switch_mb_s=0.44),
               "host": PlaneCost(per_switch_s=0.3)},
        marks_ecn_in_program=True,  # p4src/include/egress.p4, from the queue depth
        guest_env=P4_ENV,
    ),
)}


class UnknownPlane(KeyError):
    """A name that is neither a plane, an alias of one, nor `auto`."""


def lookup(name: str) -> Plane:
    """The entry a config's `dataplane:` value names (its name or an alias)."""
    if name in PLANES:
        return PLANES[name]
    for plane in PLANES.values():
        if name in plane.aliases:
            return plane
    raise UnknownPlane(f"data plane {name!r} is not one of {', '.join(choices())}")


def alias_note(name: str) -> str:
    """'' for a plane's own name or auto; for an alias, the note that says its name now."""
    if name == AUTO or name in PLANES:
        return ""
    plane = lookup(name)
    return (f"dataplane: {name} is the {plane.name} plane's former name (it still works; "
            f"write dataplane: {plane.name})")


def choices() -> tuple[str, ...]:
    """What `dataplane:` accepts: every plane, its aliases, and auto."""
    return (*PLANES, *(a for p in PLANES.values() for a in p.aliases), AUTO)


def plane_help() -> str:
    """The schema's help for `dataplane`, from the registry."""
    names = "; ".join(f"{p.name}: {p.summary}" for p in PLANES.values())
    old = ", ".join(f"{a} = {p.name}" for p in PLANES.values() for a in p.aliases)
    return (f"switch implementation: {names}; auto: a P4 plane whose tools are found where "
            f"a run costs at most {AUTO_BOUND}x its time on {BASELINE}, else {BASELINE} "
            f"(pathdiv check says which and why){f'; older names: {old}' if old else ''}")


def lossy(data: Mapping[str, Any]) -> bool:
    """Whether a resolved config drops packets on arrival at some link (loss_pct)."""
    topo = data["topology"]
    return any((p or {}).get("loss_pct") for p in [
        *topo["links"].values(), *topo["link_overrides"].values(),
        *((e.get("set") or {}) for e in data.get("events") or [])])


def refusals(plane: Plane, data: Mapping[str, Any]) -> list[str]:
    """Why `plane` cannot run the resolved config `data` (empty: it can)."""
    out = []
    mode = str(data["switching"]["mode"])
    if mode in plane.refused_modes:
        out.append(f"switching.mode: {mode!r} cannot run on {plane.name}: "
                   f"{plane.refused_modes[mode]}")
    if plane.lossy_links and lossy(data):
        out.append(plane.lossy_links)
    return out
