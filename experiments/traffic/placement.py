"""Where each MPTCP subflow goes: `hosts.subflow_paths` (pure).

  hashed     the in-kernel path manager opens the subflows from the alias addresses
             with ports the kernel picks; ECMP's hash places them (nothing here runs).
  disjoint   subflow i leaves from the client's i-th address with a source port chosen
             so that the switches' hash puts its data (server -> client) and its ACKs
             (client -> server) on equal-cost path (offset + i) mod n, n = the pair's
             paths and offset random per connection: up to n subflows use n distinct
             paths (distinct cores between pods), more wrap around evenly.
  eliminate  ports drawn at random, as the kernel would; a subflow whose predicted data
             path shares a fabric link with a subflow kept before it is not opened
             (seed 004's MPTCP-D idea, with the topology's exact paths standing in for
             MPTCP-D's measurement).

A path's fabric links are its switch-to-switch links in the direction of travel: every
subflow crosses the client's and the server's one access link, so those say nothing
about placement. Ports come from PORT_RANGE, below Linux's ephemeral range (32768 on),
so they never collide with ports the kernel hands out; each subflow gets CANDIDATES
ports with the same path, tried in order, in case one is in use.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

from pathdiv.experiments.dataplane.ecmp_model import TCP, FiveTuple, PathModel
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.model import Role

POLICIES = ("hashed", "disjoint", "eliminate")
PORT_RANGE = (20000, 32767)
CANDIDATES = 4

DirectedLink = tuple[str, str]


class PlacementError(ValueError):
    """No port puts a subflow where it must go (or an unknown policy)."""


def fabric_links(topo: FatTree, path: Sequence[str]) -> frozenset[DirectedLink]:
    """The switch-to-switch links of a path, as (from, to) pairs."""
    return frozenset(
        (u, v) for u, v in itertools.pairwise(path)
        if topo.nodes[u].role is not Role.HOST and topo.nodes[v].role is not Role.HOST
    )


def sharing_subflows(topo: FatTree, paths: Sequence[Sequence[str]]) -> int:
    """How many of the paths share at least one fabric link with another of them."""
    links = [fabric_links(topo, p) for p in paths]
    return sum(
        1 for i, mine in enumerate(links)
        if any(mine & other for j, other in enumerate(links) if j != i)
    )


@dataclass(frozen=True)
class PlacedSubflow:
    address: str  # client address the subflow leaves from
    ports: tuple[int, ...]  # candidate source ports, same predicted path each
    path: tuple[str, ...]  # predicted data path, server -> client

    def spec(self) -> str:
        return f"{self.address}:{'/'.join(map(str, self.ports))}"


@dataclass(frozen=True)
class Placement:
    """Chooses subflow addresses and ports for one run (model + policy + count)."""

    model: PathModel
    policy: str
    subflows: int

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise PlacementError(f"hosts.subflow_paths {self.policy!r}: expected one of "
                                 f"{', '.join(POLICIES)}")

    @property
    def active(self) -> bool:
        """Whether pathdiv opens the subflows itself (userspace path manager)."""
        return self.policy != "hashed"

    def _data_path(self, client_addr: str, server: tuple[str, int], port: int
                   ) -> tuple[str, ...]:
        """The path of a subflow's data (server -> client_addr:port)."""
        return self.model.path(FiveTuple(server[0], client_addr, TCP, server[1], port))

    def _ack_path(self, client_addr: str, server: tuple[str, int], port: int
                  ) -> tuple[str, ...]:
        return self.model.path(FiveTuple(client_addr, server[0], TCP, port, server[1]))

    def place(self, client: str, server: tuple[str, int], rng: random.Random
              ) -> list[PlacedSubflow]:
        """The subflows of one connection from host `client` to (address, port), the
        initial one first; `eliminate` may return fewer than `subflows`."""
        addrs = self.model.topo.host_addresses(client)[: self.subflows]
        if len(addrs) < self.subflows:
            raise PlacementError(f"{client} has {len(addrs)} addresses for "
                                 f"{self.subflows} subflows")
        if self.policy == "disjoint":
            return self._disjoint(client, addrs, server, rng)
        return self._eliminate(addrs, server, rng)

    def _disjoint(self, client: str, addrs: list[str], server: tuple[str, int],
                  rng: random.Random) -> list[PlacedSubflow]:
        topo = self.model.topo
        server_host = self.model.host_of(server[0])
        paths = topo.paths(server_host, client)
        offset = rng.randrange(len(paths))
        lo, hi = PORT_RANGE
        out = []
        for i, addr in enumerate(addrs):
            want = paths[(offset + i) % len(paths)]
            start = rng.randrange(lo, hi + 1)
            ports: list[int] = []
            for step in range(hi - lo + 1):
                port = lo + (start - lo + step) % (hi - lo + 1)
                if (self._data_path(addr, server, port) == want
                        and self._ack_path(addr, server, port) == tuple(reversed(want))):
                    ports.append(port)
                    if len(ports) == CANDIDATES:
                        break
            if not ports:
                raise PlacementError(f"no source port in {lo}..{hi} puts {addr} -> "
                                     f"{server[0]}:{server[1]} on path {'-'.join(want)}")
            out.append(PlacedSubflow(addr, tuple(ports), want))
        return out

    def _eliminate(self, addrs: list[str], server: tuple[str, int],
                   rng: random.Random) -> list[PlacedSubflow]:
        topo = self.model.topo
        lo, hi = PORT_RANGE
        kept: list[PlacedSubflow] = []
        taken: set[DirectedLink] = set()
        for addr in addrs:
            port = rng.randrange(lo, hi + 1)
            data = self._data_path(addr, server, port)
            links = fabric_links(topo, data)
            if kept and links & taken:
                continue
            ports = [port]  # then same-path alternatives, in case it is in use
            for alt in range(port + 1, hi + 1):
                if len(ports) == CANDIDATES:
                    break
                if self._data_path(addr, server, alt) == data:
                    ports.append(alt)
            kept.append(PlacedSubflow(addr, tuple(ports), data))
            taken |= links
        return kept


def place_argv(placement: Placement | None, client: str, servers: Sequence[tuple[str, int]],
               rng: random.Random) -> list[str]:
    """`--place` options of one fetch, one per target in target order (none for hashed)."""
    if placement is None or not placement.active:
        return []
    argv = []
    for server in servers:
        subs = placement.place(client, server, rng)
        argv += ["--place", ",".join(s.spec() for s in subs)]
    return argv
