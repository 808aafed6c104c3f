"""Plain data that describes a network: nodes, interfaces, links and their parameters.

Nothing here touches the kernel. A topology object (e.g. `pathdiv.topologies.fattree.FatTree`)
builds these records once; data planes, workloads and analysis read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property


class Role(StrEnum):
    """What a node does in the data center."""

    HOST = "host"
    EDGE = "edge"
    AGG = "aggregation"
    CORE = "core"
    ROUTER = "router"  # a router of the parallel-paths topology (topologies/paths.py)


class Tier(StrEnum):
    """Which layer a link belongs to; each tier has its own link parameters."""

    HOST = "host"  # host <-> edge switch
    EDGE = "edge"  # edge <-> aggregation switch
    CORE = "core"  # aggregation <-> core switch
    BOTTLENECK = "bottleneck"  # a parallel path's router <-> router link (topologies/paths.py)


@dataclass(frozen=True)
class LinkParams:
    """Shaping of one link, applied to both directions.

    bw_mbps: rate in Mbit/s (None = unshaped); delay_ms: one-way delay added at each
    end's egress, jitter_ms: its variation (both need netem); loss_pct: random loss in
    percent on arrival; queue_pkts: drop-tail queue length in packets at each egress.
    `pathdiv.topologies.conditions` refines these per direction.
    """

    bw_mbps: float | None = None
    delay_ms: float = 0.0
    queue_pkts: int = 100
    jitter_ms: float = 0.0
    loss_pct: float = 0.0


@dataclass(frozen=True)
class Node:
    """A host or a switch. `address` is its fat-tree address (switches use it as
    router id on every interface; hosts as their primary address)."""

    name: str
    role: Role
    address: str
    pod: int | None  # None for core switches
    index: int  # position inside its group (edge index in pod, host index on edge, ...)

    @property
    def is_switch(self) -> bool:
        return self.role is not Role.HOST


@dataclass(frozen=True)
class Port:
    """One end of a link: node name and port number (interface `<node>-eth<port>`)."""

    node: str
    number: int

    @property
    def intf(self) -> str:
        return f"{self.node}-eth{self.number}"


@dataclass(frozen=True)
class Link:
    """A full-duplex link. `a` is the end nearer the hosts (lower tier)."""

    a: Port
    b: Port
    tier: Tier
    params: LinkParams = field(default_factory=LinkParams)

    @property
    def name(self) -> str:
        return f"{self.a.node}-{self.b.node}"

    def port_of(self, node: str) -> Port:
        if node == self.a.node:
            return self.a
        if node == self.b.node:
            return self.b
        raise KeyError(f"link {self.name} does not touch node {node!r}")

    def peer_of(self, node: str) -> Port:
        return self.b if self.port_of(node) is self.a else self.a


class LinkLookup:
    """`link_between` for a topology whose `links` lists each of its links once."""

    @property
    def links(self) -> list[Link]:
        raise NotImplementedError

    @cached_property
    def _by_pair(self) -> dict[frozenset[str], Link]:
        return {frozenset((lk.a.node, lk.b.node)): lk for lk in self.links}

    def link_between(self, u: str, v: str) -> Link:
        try:
            return self._by_pair[frozenset((u, v))]
        except KeyError:
            raise KeyError(f"no link between {u} and {v}") from None

