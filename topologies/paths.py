"""Parallel bottleneck paths between two dual-homed hosts, as plain data.

The testbed of seed 003's paper (Fig. 2): an MPTCP client and server, each with one
interface per path; path i runs through two routers whose link is its bottleneck (its own
rate, delay, loss and queue); background TCP flows of their own client/server pair cross
that bottleneck only. `ParallelPaths(paths)` knows every node, port, link, address and
route; the lab network, the workloads and the analysis read this one object, as they
read `FatTree` for the fat tree.

Naming and addressing (paths i = 1..N, N <= MAX_PATHS):
  h1      MPTCP client (fetches; the data receiver), eth(i-1) on path i   10.i.1.2
  h2      MPTCP server (the data sender), eth(i-1) on path i              10.i.2.2
          its service address 10.0.0.2 (on its loopback) is reached over every path
  ra<i>   path i's router on the client side: eth0 h1, eth1 bottleneck, eth2 bc<i>
  rb<i>   path i's router on the server side: eth0 h2, eth1 bottleneck, eth2 bs<i>
  bc<i>   path i's background client (10.i.3.2), bs<i> its server (10.i.4.2)
  bottleneck ra<i>-rb<i>: 10.i.0.1 - 10.i.0.2
The client routes by source address (one table per path), so the subflow from its path-i
address goes over path i; each router knows only its own path (10.i.0.0/16) and the
service address. The access links are unshaped: only the bottleneck shapes (the paper:
"the links between client and router or between server and router do not affect the
transmission").
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from pathdiv.topologies.model import Link, LinkLookup, LinkParams, Node, Port, Role, Tier

MAX_PATHS = 8
MAX_BACKGROUND_FLOWS = 16
CLIENT, SERVER = "h1", "h2"
SERVICE_ADDRESS = "10.0.0.2"


class PathsError(ValueError):
    """A parallel-paths topology that cannot be built as asked."""


@dataclass(frozen=True)
class PathSpec:
    """One bottleneck path: its link conditions (both directions) and its background
    traffic: `background_flows` long TCP downloads from bs<i> to bc<i> running for the
    whole run, with congestion control `background_cc` (None: the hosts' own)."""

    params: LinkParams = field(default_factory=LinkParams)
    background_flows: int = 0
    background_cc: str | None = None


@dataclass(frozen=True)
class Route:
    """One route of one node: `prefix` via `via` (None: on the link) out of `dev`;
    `source`: only for packets from this address (policy routing, table per path)."""

    prefix: str
    dev: str
    via: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class ParallelPaths(LinkLookup):
    """N disjoint bottleneck paths between dual-homed hosts h1 (client) and h2 (server)."""

    specs: Sequence[PathSpec]

    def __post_init__(self) -> None:
        if not 1 <= len(self.specs) <= MAX_PATHS:
            raise PathsError(f"topology.paths: {len(self.specs)} paths; between 1 and "
                             f"{MAX_PATHS} are allowed")
        for i, spec in enumerate(self.specs):
            if not 0 <= spec.background_flows <= MAX_BACKGROUND_FLOWS:
                raise PathsError(f"topology.paths[{i}].background.flows: "
                                 f"{spec.background_flows}; 0..{MAX_BACKGROUND_FLOWS} allowed")

    kind = "paths"

    @property
    def count(self) -> int:
        return len(self.specs)

    # ---- nodes -------------------------------------------------------------------
    @cached_property
    def nodes(self) -> dict[str, Node]:
        out = {CLIENT: Node(CLIENT, Role.HOST, self.client_address(1), None, 0),
               SERVER: Node(SERVER, Role.HOST, SERVICE_ADDRESS, None, 1)}
        for i in self.path_numbers:
            out[f"ra{i}"] = Node(f"ra{i}", Role.ROUTER, f"10.{i}.0.1", i, 0)
            out[f"rb{i}"] = Node(f"rb{i}", Role.ROUTER, f"10.{i}.0.2", i, 1)
            if self.specs[i - 1].background_flows:
                out[f"bc{i}"] = Node(f"bc{i}", Role.HOST, f"10.{i}.3.2", i, 2)
                out[f"bs{i}"] = Node(f"bs{i}", Role.HOST, f"10.{i}.4.2", i, 3)
        return out

    @property
    def path_numbers(self) -> range:
        return range(1, self.count + 1)

    @cached_property
    def hosts(self) -> list[str]:
        return [n.name for n in self.nodes.values() if n.role is Role.HOST]

    @cached_property
    def switches(self) -> list[str]:
        """The routers (named as the fat tree's switches for code that lists both)."""
        return [n.name for n in self.nodes.values() if n.role is Role.ROUTER]

    def background_pairs(self) -> list[tuple[int, str, str]]:
        """(path, background client, background server) of every path with background."""
        return [(i, f"bc{i}", f"bs{i}") for i in self.path_numbers
                if self.specs[i - 1].background_flows]

    # ---- addresses ---------------------------------------------------------------
    @staticmethod
    def client_address(path: int) -> str:
        return f"10.{path}.1.2"

    @staticmethod
    def server_address(path: int) -> str:
        return f"10.{path}.2.2"

    def host_addresses(self, host: str) -> list[str]:
        """h1: its address on every path, path 1 first (the initial subflow's; each other
        an MPTCP `subflow` endpoint on its own interface). h2: the service address, then
        its per-path addresses. A background host: its one address."""
        if host == CLIENT:
            return [self.client_address(i) for i in self.path_numbers]
        if host == SERVER:
            return [SERVICE_ADDRESS] + [self.server_address(i) for i in self.path_numbers]
        node = self.nodes.get(host)
        if node is None or node.role is not Role.HOST:
            raise KeyError(f"{host} is not a host of the {self.count}-path topology")
        return [node.address]

    def subflow_endpoints(self) -> list[tuple[str, str]]:
        """(address, interface) of the client's MPTCP `subflow` endpoints: one per extra
        interface, so the connection opens one subflow per interface."""
        return [(self.client_address(i), f"{CLIENT}-eth{i - 1}") for i in self.path_numbers
                if i > 1]

    def path_of_address(self, address: str) -> int | None:
        """The path a client or server per-path address belongs to."""
        for i in self.path_numbers:
            if address in (self.client_address(i), self.server_address(i)):
                return i
        return None

    def interface_addresses(self) -> dict[str, str]:
        """Interface name -> its address/prefix, for every interface of every node."""
        out: dict[str, str] = {}
        for i in self.path_numbers:
            out[f"{CLIENT}-eth{i - 1}"] = f"{self.client_address(i)}/24"
            out[f"ra{i}-eth0"] = f"10.{i}.1.1/24"
            out[f"ra{i}-eth1"] = f"10.{i}.0.1/24"
            out[f"rb{i}-eth1"] = f"10.{i}.0.2/24"
            out[f"rb{i}-eth0"] = f"10.{i}.2.1/24"
            out[f"{SERVER}-eth{i - 1}"] = f"{self.server_address(i)}/24"
            if self.specs[i - 1].background_flows:
                out[f"ra{i}-eth2"] = f"10.{i}.3.1/24"
                out[f"bc{i}-eth0"] = f"10.{i}.3.2/24"
                out[f"rb{i}-eth2"] = f"10.{i}.4.1/24"
                out[f"bs{i}-eth0"] = f"10.{i}.4.2/24"
        return out

    # ---- links -------------------------------------------------------------------
    @cached_property
    def links(self) -> list[Link]:
        out: list[Link] = []
        for i in self.path_numbers:
            spec = self.specs[i - 1]
            out.append(Link(Port(CLIENT, i - 1), Port(f"ra{i}", 0), Tier.HOST))
            out.append(Link(Port(f"ra{i}", 1), Port(f"rb{i}", 1), Tier.BOTTLENECK, spec.params))
            out.append(Link(Port(SERVER, i - 1), Port(f"rb{i}", 0), Tier.HOST))
            if spec.background_flows:
                out.append(Link(Port(f"bc{i}", 0), Port(f"ra{i}", 2), Tier.HOST))
                out.append(Link(Port(f"bs{i}", 0), Port(f"rb{i}", 2), Tier.HOST))
        return out

    def bottleneck(self, path: int) -> Link:
        return self.link_between(f"ra{path}", f"rb{path}")

    def links_of(self, node: str) -> list[Link]:
        mine = [lk for lk in self.links if node in (lk.a.node, lk.b.node)]
        return sorted(mine, key=lambda lk: lk.port_of(node).number)

    @cached_property
    def _by_intf(self) -> dict[str, Link]:
        return {p.intf: lk for lk in self.links for p in (lk.a, lk.b)}

    def link_of_intf(self, intf: str) -> Link:
        try:
            return self._by_intf[intf]
        except KeyError:
            raise KeyError(f"no interface {intf!r} in the {self.count}-path topology") from None

    @property
    def interfaces(self) -> list[str]:
        return list(self._by_intf)

    # ---- paths and routes --------------------------------------------------------
    def paths(self, src: str, dst: str) -> list[tuple[str, ...]]:
        """Node paths between two hosts: h1-h2 has one per bottleneck; a background pair
        only its own."""
        ends = {src, dst}
        out: list[tuple[str, ...]]
        if ends == {CLIENT, SERVER}:
            out = [(CLIENT, f"ra{i}", f"rb{i}", SERVER) for i in self.path_numbers]
        elif src[:2] in ("bc", "bs") and dst[:2] in ("bc", "bs") and src[2:] == dst[2:]:
            i = src[2:]
            out = [(f"bc{i}", f"ra{i}", f"rb{i}", f"bs{i}")]
        else:
            raise KeyError(f"no path between {src} and {dst}: h1-h2 or bc<i>-bs<i> only")
        return out if src == out[0][0] else [tuple(reversed(p)) for p in out]

    def path_links(self, path: tuple[str, ...] | list[str]) -> list[Link]:
        return [self.link_between(u, v) for u, v in itertools.pairwise(path)]

    def routes(self) -> dict[str, list[Route]]:
        """Every node's routes beyond its connected subnets."""
        out: dict[str, list[Route]] = {CLIENT: [], SERVER: []}
        for i in self.path_numbers:
            c_dev, s_dev = f"{CLIENT}-eth{i - 1}", f"{SERVER}-eth{i - 1}"
            # client: per-path table chosen by source address; path 1 is the main route
            out[CLIENT].append(Route(f"{SERVICE_ADDRESS}/32", c_dev, f"10.{i}.1.1",
                                     source=self.client_address(i)))
            if i == 1:
                out[CLIENT].append(Route(f"{SERVICE_ADDRESS}/32", c_dev, f"10.{i}.1.1"))
            out[SERVER].append(Route(f"10.{i}.0.0/16", s_dev, f"10.{i}.2.1"))
            out[f"ra{i}"] = [Route(f"10.{i}.0.0/16", f"ra{i}-eth1", f"10.{i}.0.2"),
                             Route(f"{SERVICE_ADDRESS}/32", f"ra{i}-eth1", f"10.{i}.0.2")]
            out[f"rb{i}"] = [Route(f"10.{i}.0.0/16", f"rb{i}-eth1", f"10.{i}.0.1"),
                             Route(f"{SERVICE_ADDRESS}/32", f"rb{i}-eth0",
                                   self.server_address(i))]
            if self.specs[i - 1].background_flows:
                out[f"bc{i}"] = [Route(f"10.{i}.0.0/16", f"bc{i}-eth0", f"10.{i}.3.1")]
                out[f"bs{i}"] = [Route(f"10.{i}.0.0/16", f"bs{i}-eth0", f"10.{i}.4.1")]
        return out

    # ---- export ------------------------------------------------------------------
    def to_dict(self) -> dict[str, object]:
        """JSON-ready description (written into each run's manifest)."""
        return {
            "kind": self.kind,
            "paths": [{"path": i, "bw_mbps": s.params.bw_mbps, "delay_ms": s.params.delay_ms,
                       "loss_pct": s.params.loss_pct, "queue_pkts": s.params.queue_pkts,
                       "background_flows": s.background_flows,
                       "background_cc": s.background_cc}
                      for i, s in zip(self.path_numbers, self.specs, strict=True)],
            "nodes": [{"name": n.name, "role": str(n.role), "address": n.address}
                      for n in self.nodes.values()],
            "links": [{"a": lk.a.intf, "b": lk.b.intf, "tier": str(lk.tier),
                       "bw_mbps": lk.params.bw_mbps, "delay_ms": lk.params.delay_ms,
                       "loss_pct": lk.params.loss_pct, "queue_pkts": lk.params.queue_pkts}
                      for lk in self.links],
        }
