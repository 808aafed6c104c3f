"""What building a fat tree's network asks of the kernel that runs it, counted from the
topology object alone (pure): `pathdiv check` prints it, and the tests hold it to a
cost that grows with the nodes and links, not with the host pairs.

    shells     node shells (a namespace and a Mininet shell each)
    veths      veth pairs, one `ip -batch` in the root namespace
    commands   the nodes' set-up: every host's and link end's commands
               (fabric/hostsetup.py, fabric/conditions.py)
    routes     the switches' forwarding state as the kernel data plane installs it
               (topologies/forwarding.py: neighbours, down routes, the up group's
               tables and rules, the static mode's map entries); the static table, as
               routes, held every remote host address at each edge switch, the one
               part that grew with hosts x edges (k=16: 145,408 of 157,952 routes; with
               8 subflows 1,040,384 routes in 128 edges); as the rule it follows
               (`StaticSpread`, k/2 map entries a switch) it grows with the switches
    echoes     the reachability check's scheduled echoes (fabric/reach.py: k + 1 a host)
    captures   links captured (capture.links)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pathdiv.experiments.config.load import Config
from pathdiv.experiments.fabric.conditions import node_commands
from pathdiv.experiments.fabric.hostsetup import host_commands
from pathdiv.experiments.fabric.netstate import host_spec
from pathdiv.experiments.fabric.reach import echo_rounds
from pathdiv.experiments.plan.budget import captured_links
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.forwarding import forwarding_tables, neighbor_entries


@dataclass(frozen=True)
class BuildWork:
    shells: int
    veths: int
    commands: int
    routes: int
    static_entries: int
    echoes: int
    captures: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        return (f"build: {self.shells:,} node shells, {self.veths:,} veths, "
                f"{self.commands:,} set-up commands, {self.routes:,} switch routes "
                f"({self.static_entries:,} of them the static mode's map entries), "
                f"{self.echoes:,} echoes to "
                f"check reachability, {self.captures:,} captured links")


def switch_routes(topo: FatTree) -> tuple[int, int]:
    """(every forwarding entry the kernel plane installs, the static mode's map entries)."""
    total = static = 0
    for table in forwarding_tables(topo).values():
        up = 2 * len(table.up) + (1 if table.up else 0)  # a table and a rule each, rule 1000
        entries = len(table.spread.choices) if table.spread is not None else 0
        total += len(neighbor_entries(table)) + len(table.down) + up + entries
        static += entries
    return total, static


def build_work(cfg: Config) -> BuildWork:
    """What building `cfg`'s fat tree costs, by count (the module docstring)."""
    topo = cfg.topology()
    if not isinstance(topo, FatTree):
        raise TypeError("build_work counts a fat tree's build")
    spec = host_spec(cfg)
    conditions = cfg.link_conditions()
    commands = sum(len(host_commands(topo, h, spec)) for h in topo.hosts)
    commands += sum(len(node_commands(topo, n, conditions, cfg.ecn_threshold_pkts))
                    for n in topo.nodes)
    routes, static = switch_routes(topo)
    captures = (len(captured_links(topo, cfg.captured_links))
                if cfg.data["capture"]["enabled"] else 0)
    return BuildWork(len(topo.nodes), len(topo.links), commands, routes, static,
                     sum(len(r) for r in echo_rounds(topo)), captures)
