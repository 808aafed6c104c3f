"""The k-ary fat tree (Al-Fares et al., SIGCOMM 2008) as plain data.

`FatTree(k)` knows every node, port, link, address and every equal-cost shortest
path between two hosts. It imports nothing from Mininet: the emulation, the data
planes, the workloads and the analysis all read this one object.

Naming and addressing (k even, pods p in [0, k), h = k/2):
  core (j, i), j, i in [1, h]    name c<(j-1)*h + i>          address 10.k.j.i
  aggregation a in pod p         name a<p*h + a + 1>          address 10.p.(h+a).1
  edge e in pod p                name e<p*h + e + 1>          address 10.p.e.1
  host x on edge e in pod p      name h<p*h*h + e*h + x + 1>  address 10.p.e.(x+2)
Host x additionally owns alias addresses 10.p.e.(x + 2 + ALIAS_STRIDE*j), j >= 1,
used as extra MPTCP subflow sources on its single interface.

Ports: a host has eth0. An edge switch's eth0..eth(h-1) go down to its hosts and
eth(h)..eth(k-1) up to the pod's aggregation switches; an aggregation switch's
eth0..eth(h-1) go down to the pod's edges and eth(h+m) up to core (a+1, m+1); core
(j, i) reaches pod p on eth p.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from pathdiv.topologies.model import Link, LinkLookup, LinkParams, Node, Port, Role, Tier

ALIAS_STRIDE = 32
MAX_ALIASES = 7  # 10.p.e.(x + 2 + 32*j) stays below .255 for x < 30 and j <= 7
MAX_K = 58  # host ids x + 2 must stay below ALIAS_STRIDE


class TopologyError(ValueError):
    """A topology that cannot be built as asked (odd k, too many aliases, ...)."""


@dataclass(frozen=True)
class FatTree(LinkLookup):
    """A k-ary fat tree: (k/2)^2 core, k^2/2 aggregation + edge switches, k^3/4 hosts."""

    k: int = 4
    params: Mapping[Tier, LinkParams] = field(default_factory=dict)
    aliases_per_host: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or self.k < 2 or self.k % 2:
            raise TopologyError(f"fat tree k must be an even integer >= 2, got {self.k!r}")
        if self.k > MAX_K:
            raise TopologyError(f"fat tree k must be <= {MAX_K} (addressing), got {self.k}")
        if not 0 <= self.aliases_per_host <= MAX_ALIASES:
            raise TopologyError(
                f"aliases_per_host must be in 0..{MAX_ALIASES}, got {self.aliases_per_host}"
            )

    # ---- sizes -------------------------------------------------------------------
    @property
    def half(self) -> int:
        return self.k // 2

    @property
    def pods(self) -> int:
        return self.k

    # ---- nodes -------------------------------------------------------------------
    @cached_property
    def nodes(self) -> dict[str, Node]:
        h, k = self.half, self.k
        out: dict[str, Node] = {}
        for j in range(1, h + 1):
            for i in range(1, h + 1):
                name = f"c{(j - 1) * h + i}"
                out[name] = Node(name, Role.CORE, f"10.{k}.{j}.{i}", None, (j - 1) * h + i - 1)
        for p in range(k):
            for a in range(h):
                name = f"a{p * h + a + 1}"
                out[name] = Node(name, Role.AGG, f"10.{p}.{h + a}.1", p, a)
            for e in range(h):
                name = f"e{p * h + e + 1}"
                out[name] = Node(name, Role.EDGE, f"10.{p}.{e}.1", p, e)
                for x in range(h):
                    name = f"h{p * h * h + e * h + x + 1}"
                    out[name] = Node(name, Role.HOST, f"10.{p}.{e}.{x + 2}", p, x)
        return out

    def _names(self, role: Role) -> list[str]:
        return [n.name for n in self.nodes.values() if n.role is role]

    @cached_property
    def hosts(self) -> list[str]:
        return self._names(Role.HOST)

    @cached_property
    def edges(self) -> list[str]:
        return self._names(Role.EDGE)

    @cached_property
    def aggs(self) -> list[str]:
        return self._names(Role.AGG)

    @cached_property
    def cores(self) -> list[str]:
        return self._names(Role.CORE)

    @cached_property
    def switches(self) -> list[str]:
        return self.cores + self.aggs + self.edges

    def edge_of(self, host: str) -> str:
        """The edge switch a host hangs off."""
        return self.links_of(host)[0].peer_of(host).node

    def edge_index(self, node: str) -> int:
        """For a host or edge switch: the edge's index inside its pod."""
        n = self.nodes[node]
        if n.role is Role.EDGE:
            return n.index
        if n.role is Role.HOST:
            return self.nodes[self.edge_of(node)].index
        raise KeyError(f"{node} is neither a host nor an edge switch")

    # ---- addresses ---------------------------------------------------------------
    def host_addresses(self, host: str) -> list[str]:
        """Primary address first, then the aliases (extra MPTCP subflow sources)."""
        node = self.nodes[host]
        if node.role is not Role.HOST:
            raise KeyError(f"{host} is not a host")
        net = node.address.rsplit(".", 1)[0]
        last = node.index + 2
        return [node.address] + [
            f"{net}.{last + ALIAS_STRIDE * j}" for j in range(1, self.aliases_per_host + 1)
        ]

    @cached_property
    def address_owner(self) -> dict[str, str]:
        """Every host address (primary and aliases) -> host name."""
        return {a: h for h in self.hosts for a in self.host_addresses(h)}

    def edge_prefix(self, edge: str) -> str:
        n = self.nodes[edge]
        return f"10.{n.pod}.{n.index}.0/24"

    def pod_prefix(self, pod: int) -> str:
        return f"10.{pod}.0.0/16"

    # ---- links -------------------------------------------------------------------
    def _link(self, lower: str, lport: int, upper: str, uport: int, tier: Tier) -> Link:
        params = self.params.get(tier, LinkParams())
        return Link(Port(lower, lport), Port(upper, uport), tier, params)

    @cached_property
    def links(self) -> list[Link]:
        h = self.half
        out: list[Link] = []
        for p in range(self.k):
            for e in range(h):
                edge = f"e{p * h + e + 1}"
                for x in range(h):
                    out.append(self._link(f"h{p * h * h + e * h + x + 1}", 0, edge, x, Tier.HOST))
                for a in range(h):
                    out.append(self._link(edge, h + a, f"a{p * h + a + 1}", e, Tier.EDGE))
            for a in range(h):
                for m in range(h):
                    core = f"c{a * h + m + 1}"
                    out.append(self._link(f"a{p * h + a + 1}", h + m, core, p, Tier.CORE))
        return out

    @cached_property
    def _by_node(self) -> dict[str, list[Link]]:
        table: dict[str, list[Link]] = {n: [] for n in self.nodes}
        for link in self.links:
            table[link.a.node].append(link)
            table[link.b.node].append(link)
        for node, links in table.items():
            links.sort(key=functools.partial(_port_number, node))
        return table

    def links_of(self, node: str) -> list[Link]:
        """The node's links in port order."""
        return self._by_node[node]

    @cached_property
    def _by_intf(self) -> dict[str, Link]:
        return {p.intf: lk for lk in self.links for p in (lk.a, lk.b)}

    def link_of_intf(self, intf: str) -> Link:
        """The link an interface name such as 'e1-eth2' belongs to."""
        try:
            return self._by_intf[intf]
        except KeyError:
            raise KeyError(f"no interface {intf!r} in a k={self.k} fat tree") from None

    def mac(self, port: Port) -> str:
        """A stable locally administered MAC per port: 02:role:node(16 bit):port:00."""
        node = self.nodes[port.node]
        code = {Role.HOST: 1, Role.EDGE: 2, Role.AGG: 3, Role.CORE: 4}[node.role]
        num = int(node.name[1:])
        return f"02:{code:02x}:{num >> 8:02x}:{num & 0xFF:02x}:{port.number:02x}:00"

    @property
    def interfaces(self) -> list[str]:
        return list(self._by_intf)

    def neighbors(self, node: str) -> list[str]:
        return [lk.peer_of(node).node for lk in self.links_of(node)]

    def uplinks(self, switch: str) -> list[Link]:
        """Links towards the core (empty for a core switch), in port order."""
        return [lk for lk in self.links_of(switch) if lk.a.node == switch]

    def downlinks(self, switch: str) -> list[Link]:
        return [lk for lk in self.links_of(switch) if lk.b.node == switch]

    # ---- subtrees -----------------------------------------------------------------
    def subtree(self, node: str, tier: Tier) -> tuple[int, ...]:
        """The subtree `node` lies in as `tier`'s links see it: each link of the tier joins
        its lower end's subtree to the rest of the tree. HOST: the host alone (pod, edge,
        host); EDGE: its edge switch and hosts (pod, edge); CORE: its pod (pod,). `node`
        is a host or the lower end of a link of `tier` (an edge switch, an aggregation)."""
        key = self._subtree_keys[node]
        depth = _SUBTREE_DEPTH.get(tier, 0)
        if not 0 < depth <= len(key):
            raise KeyError(f"{node} ({self.nodes[node].role}) is not below a link of the "
                           f"{tier} tier")
        return key[:depth]

    @cached_property
    def _subtree_keys(self) -> dict[str, tuple[int, ...]]:
        """(pod, edge, host) of a host, (pod, edge) of an edge switch, (pod,) of an
        aggregation switch, () of a core switch."""
        out: dict[str, tuple[int, ...]] = {}
        for name, n in self.nodes.items():
            pod = n.pod if n.pod is not None else -1
            if n.role is Role.HOST:
                out[name] = (pod, self.edge_index(name), n.index)
            elif n.role is Role.EDGE:
                out[name] = (pod, n.index)
            elif n.role is Role.AGG:
                out[name] = (pod,)
            else:
                out[name] = ()
        return out

    def tiers_crossed(self, src: str, dst: str) -> list[Tier]:
        """The tiers whose links the equal-cost shortest paths between two hosts climb,
        access first: HOST alone under one edge switch, HOST and EDGE inside a pod, all
        three across the core. Each path crosses two links of each (up, then down)."""
        return [t for t in UP_TIERS if self.subtree(src, t) != self.subtree(dst, t)]

    def may_cross(self, src: str, dst: str) -> list[Link]:
        """Every link some equal-cost shortest path between hosts src and dst crosses, from
        the structure alone (no path enumerated): a link of a crossed tier is on such a
        path iff its subtree holds exactly one of the two hosts (ECMP and spraying choose
        among all of them at run time)."""
        ends = {t: (self.subtree(src, t), self.subtree(dst, t))
                for t in self.tiers_crossed(src, dst)}
        return [lk for lk in self.links
                if lk.tier in ends and self.subtree(lk.a.node, lk.tier) in ends[lk.tier]]

    # ---- paths -------------------------------------------------------------------
    def paths(self, src: str, dst: str) -> list[tuple[str, ...]]:
        """All equal-cost shortest paths from host src to host dst, as node tuples."""
        return list(self._iter_paths(src, dst))

    def _iter_paths(self, src: str, dst: str) -> Iterator[tuple[str, ...]]:
        for n in (src, dst):
            if self.nodes[n].role is not Role.HOST:
                raise KeyError(f"paths are between hosts; {n} is a {self.nodes[n].role}")
        if src == dst:
            yield (src,)
            return
        es, ed = self.edge_of(src), self.edge_of(dst)
        if es == ed:
            yield (src, es, dst)
            return
        ps, pd = self.nodes[src].pod, self.nodes[dst].pod
        up_aggs = [lk.b.node for lk in self.uplinks(es)]
        if ps == pd:
            for agg in up_aggs:
                yield (src, es, agg, ed, dst)
            return
        for agg in up_aggs:
            for core_link in self.uplinks(agg):
                core = core_link.b.node
                agg_down = next(
                    lk.a.node for lk in self.downlinks(core) if self.nodes[lk.a.node].pod == pd
                )
                yield (src, es, agg, core, agg_down, ed, dst)

    def path_links(self, path: tuple[str, ...] | list[str]) -> list[Link]:
        return [self.link_between(u, v) for u, v in itertools.pairwise(path)]

    def core_of_path(self, path: tuple[str, ...]) -> str | None:
        return next((n for n in path if self.nodes[n].role is Role.CORE), None)

    # ---- export ------------------------------------------------------------------
    def to_dict(self) -> dict[str, object]:
        """JSON-ready description (written into each run's manifest)."""
        return {
            "kind": "fattree",
            "k": self.k,
            "aliases_per_host": self.aliases_per_host,
            "nodes": [
                {"name": n.name, "role": str(n.role), "address": n.address, "pod": n.pod}
                for n in self.nodes.values()
            ],
            "links": [
                {
                    "a": lk.a.intf,
                    "b": lk.b.intf,
                    "tier": str(lk.tier),
                    "bw_mbps": lk.params.bw_mbps,
                    "delay_ms": lk.params.delay_ms,
                    "queue_pkts": lk.params.queue_pkts,
                }
                for lk in self.links
            ],
        }


UP_TIERS = (Tier.HOST, Tier.EDGE, Tier.CORE)  # a fat tree's tiers, from the hosts up
_SUBTREE_DEPTH = {Tier.HOST: 3, Tier.EDGE: 2, Tier.CORE: 1}


def _port_number(node: str, link: Link) -> int:
    """The number of `node`'s port on `link` (sorts a node's links in port order)."""
    return link.port_of(node).number
