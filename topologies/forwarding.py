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
  seed    the per-switch hash seed for `ecmp`, so tiers do not polarise.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from pathdiv.topologies.fattree import FatTree
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


@dataclass(frozen=True)
class SwitchTable:
    switch: str
    address: str
    down: tuple[Route, ...]
    up: tuple[NextHop, ...]
    static: tuple[Route, ...]
    seed: int


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
    static: list[Route] = []
    if up and node.role is Role.EDGE:
        # Edges spread by the destination's host index, aggregation switches by its
        # edge index, so the hosts of a pod reach it through all (k/2)^2 cores.
        local = {r.prefix for r in down}
        for host in topo.hosts:
            if topo.edge_of(host) == switch:
                continue
            member = up[(topo.nodes[host].index + node.index) % len(up)]
            static += [
                Route(f"{a}/32", member) for a in topo.host_addresses(host) if a not in local
            ]
    elif up:  # an aggregation switch: one entry per remote edge (its /24 holds its hosts)
        for edge in topo.edges:
            if topo.nodes[edge].pod != node.pod:
                member = up[(topo.nodes[edge].index + node.index) % len(up)]
                static.append(Route(topo.edge_prefix(edge), member))
    return SwitchTable(
        switch, node.address, tuple(down), up, tuple(static), switch_seed(run_seed, switch)
    )


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
