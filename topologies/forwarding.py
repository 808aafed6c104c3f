"""Forwarding state of every switch, computed from the topology alone.

Both data planes install exactly these entries (the kernel one as routes and
nftables rules, the bmv2 one as P4 table entries), so they cannot disagree on
where a packet may go:

  down    deterministic routes towards hosts (host /32 at edges, edge /24 at
          aggregation switches, pod /16 at cores);
  up      the equal-cost group towards the core, in port order (empty at cores);
  static  the fat-tree paper's two-level table for `switching.mode: static`: at an edge
          a host /32 (primary and aliases) -> one member of `up`, spread by host index,
          at an aggregation switch a remote edge's /24 -> one member, spread by edge
          index, so different destinations use different cores but one destination one
          path (an aggregation switch holds k^2/2 entries, not one per host address);
  spread  the rule that table follows (`StaticSpread`): the member depends on one field
          of the destination address only, the host number (the last octet's low five
          bits, primary and aliases alike) at an edge, the edge number (third octet) at
          an aggregation switch: k/2 entries a switch, where the table above holds one
          route per remote host address at an edge (a suffix: no prefix route holds it);
  seed    the per-switch hash seed for `ecmp`, so tiers do not polarise.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from pathdiv.topologies.fattree import ALIAS_STRIDE, FatTree
from pathdiv.topologies.model import Role


@dataclass(frozen=True)
class NextHop:
    """Leave through `port` (interface `intf`) towards neighbour `node` at `address`,
    whose port on this link has Ethernet address `mac`."""

    port: int
    intf: str
    node: str
    address: str
    mac: str


@dataclass(frozen=True)
class Route:
    prefix: str
    hop: NextHop
    direct: bool = False  # the destination is the neighbour itself (a host): no gateway


HOST_FIELD_MASK = ALIAS_STRIDE - 1  # last octet & this = host index + 2, aliases too


@dataclass(frozen=True)
class StaticSpread:
    """The static table as the rule it follows: the destination address's `field`
    ("host": last octet & HOST_FIELD_MASK, "edge": third octet) -> index into `up`, for
    each value a remote host can have (`choices`: (value, member index), ...)."""

    field: str
    choices: tuple[tuple[int, int], ...]

    def member(self, address: str) -> int | None:
        """The index into `up` for a remote destination `address` (None: no entry)."""
        octets = [int(x) for x in address.split(".")]
        value = octets[3] & HOST_FIELD_MASK if self.field == "host" else octets[2]
        return dict(self.choices).get(value)


@dataclass(frozen=True)
class SwitchTable:
    switch: str
    address: str
    down: tuple[Route, ...]
    up: tuple[NextHop, ...]
    static: tuple[Route, ...]
    seed: int
    spread: StaticSpread | None = None  # the rule `static` follows (None: no up group)


def static_spread(topo: FatTree, switch: str) -> StaticSpread | None:
    """The static table's rule at `switch` (None at a core): edges spread remote hosts
    by host index, aggregation switches remote edges by edge index, each offset by the
    switch's own index, so the hosts of a pod reach a destination through all (k/2)^2
    cores."""
    node = topo.nodes[switch]
    h = len(topo.uplinks(switch))
    if not h:
        return None
    if node.role is Role.EDGE:
        return StaticSpread("host", tuple((x + 2, (x + node.index) % h)
                                          for x in range(topo.half)))
    return StaticSpread("edge", tuple((e, (e + node.index) % h) for e in range(topo.half)))


def switch_seed(run_seed: int, switch: str) -> int:
    """A stable 32-bit hash seed per (run seed, switch)."""
    digest = hashlib.blake2s(f"{run_seed}:{switch}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big")


def _hop(topo: FatTree, switch: str, link_peer: str) -> NextHop:
    link = topo.link_between(switch, link_peer)
    port = link.port_of(switch)
    peer = link.peer_of(switch)
    return NextHop(port.number, port.intf, link_peer, topo.nodes[link_peer].address,
                   topo.mac(peer))


def _chosen(spread: StaticSpread, address: str) -> int:
    member = spread.member(address)
    if member is None:
        raise KeyError(f"{address} has no entry in the static spread {spread}")
    return member


def switch_table(topo: FatTree, switch: str, run_seed: int = 0) -> SwitchTable:
    node = topo.nodes[switch]
    if not node.is_switch:
        raise KeyError(f"{switch} is a host, not a switch")
    down: list[Route] = []
    for link in topo.downlinks(switch):
        peer = link.a.node
        hop = _hop(topo, switch, peer)
        if node.role is Role.EDGE:
            down += [Route(f"{a}/32", hop, direct=True) for a in topo.host_addresses(peer)]
        elif node.role is Role.AGG:
            down.append(Route(topo.edge_prefix(peer), hop))
        else:
            down.append(Route(topo.pod_prefix(topo.nodes[peer].pod or 0), hop))
    up = tuple(_hop(topo, switch, lk.b.node) for lk in topo.uplinks(switch))
    spread = static_spread(topo, switch)
    static: list[Route] = []
    if spread is not None and node.role is Role.EDGE:  # every remote host address
        static += [Route(f"{a}/32", up[_chosen(spread, a)]) for host in topo.hosts
                   if topo.edge_of(host) != switch for a in topo.host_addresses(host)]
    elif spread is not None:  # an aggregation switch: a remote edge's /24 holds its hosts
        static += [Route(topo.edge_prefix(edge),
                         up[_chosen(spread, topo.edge_prefix(edge).split("/")[0])])
                   for edge in topo.edges if topo.nodes[edge].pod != node.pod]
    return SwitchTable(switch, node.address, tuple(down), up, tuple(static),
                       switch_seed(run_seed, switch), spread)


def neighbor_entries(table: SwitchTable) -> list[tuple[str, str, str]]:
    """(address, mac, intf) of every neighbour a switch sends to: the fabric needs no ARP,
    so no ARP frame ever shares a queue or a counter with the measured traffic."""
    seen: dict[tuple[str, str], str] = {}
    for r in table.down:
        addr = r.prefix.split("/")[0] if r.direct else r.hop.address
        seen[(addr, r.hop.intf)] = r.hop.mac
    for hop in table.up:
        seen[(hop.address, hop.intf)] = hop.mac
    return [(addr, mac, intf) for (addr, intf), mac in seen.items()]


def forwarding_tables(topo: FatTree, run_seed: int = 0) -> dict[str, SwitchTable]:
    """Every switch's table, keyed by switch name."""
    return {s: switch_table(topo, s, run_seed) for s in topo.switches}
