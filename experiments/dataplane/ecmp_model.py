"""Which path a 5-tuple takes under `switching.mode: ecmp`, computed in Python (pure).

Both data planes hash the 5-tuple with a per-switch seed (`topologies/forwarding.py`) at
every switch that has an up group, and take the member the hash selects:

  kernel  nftables `jhash ip saddr . ip daddr . meta l4proto . th sport . th dport
          mod n seed S offset 1` (experiments/dataplane/nftables.py). nft concatenates
          the fields into 32-bit registers, each field zero-padded to 4 bytes (net/
          netfilter/nft_payload.c and nft_meta.c zero the register before storing), so
          the kernel's `jhash()` (include/linux/jhash.h, lookup3, words read in CPU
          byte order, i.e. little-endian on x86) runs over 20 bytes:
            saddr(4) daddr(4) proto,0,0,0 sport(2, network order),0,0 dport(2),0,0
          and net/netfilter/nft_hash.c scales it: member = (hash * n) >> 32
          (`reciprocal_scale`); the mark is member + 1.
  bmv2    CRC-32 of the 13 packed bytes, XOR seed, times an odd constant, high 16 bits
          mod n (experiments/dataplane/p4/hashing.py, p4src/ecmp.p4).

`predict_path` walks a packet from its source host to its destination host with those
choices; the core it crosses is what `pathdiv probe` counts per core switch.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pathdiv.experiments.dataplane.p4.hashing import ecmp_member as p4_member_of
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.forwarding import SwitchTable
from pathdiv.topologies.model import Role

MASK32 = 0xFFFFFFFF
JHASH_INITVAL = 0xDEADBEEF
TCP = 6
UDP = 17


@dataclass(frozen=True)
class FiveTuple:
    src: str
    dst: str
    proto: int
    sport: int
    dport: int

    def reversed(self) -> FiveTuple:
        return FiveTuple(self.dst, self.src, self.proto, self.dport, self.sport)


def _rol32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & MASK32


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    a = (a - c) & MASK32; a ^= _rol32(c, 4);  c = (c + b) & MASK32  # noqa: E702
    b = (b - a) & MASK32; b ^= _rol32(a, 6);  a = (a + c) & MASK32  # noqa: E702
    c = (c - b) & MASK32; c ^= _rol32(b, 8);  b = (b + a) & MASK32  # noqa: E702
    a = (a - c) & MASK32; a ^= _rol32(c, 16); c = (c + b) & MASK32  # noqa: E702
    b = (b - a) & MASK32; b ^= _rol32(a, 19); a = (a + c) & MASK32  # noqa: E702
    c = (c - b) & MASK32; c ^= _rol32(b, 4);  b = (b + a) & MASK32  # noqa: E702
    return a, b, c


def _final(a: int, b: int, c: int) -> int:
    c ^= b; c = (c - _rol32(b, 14)) & MASK32  # noqa: E702
    a ^= c; a = (a - _rol32(c, 11)) & MASK32  # noqa: E702
    b ^= a; b = (b - _rol32(a, 25)) & MASK32  # noqa: E702
    c ^= b; c = (c - _rol32(b, 16)) & MASK32  # noqa: E702
    a ^= c; a = (a - _rol32(c, 4)) & MASK32  # noqa: E702
    b ^= a; b = (b - _rol32(a, 14)) & MASK32  # noqa: E702
    c ^= b; c = (c - _rol32(b, 24)) & MASK32  # noqa: E702
    return c


def jhash(key: bytes, initval: int) -> int:
    """Linux `jhash(key, len(key), initval)` on a little-endian CPU."""
    length = len(key)
    a = b = c = (JHASH_INITVAL + length + initval) & MASK32
    k = 0
    while length > 12:
        wa, wb, wc = struct.unpack_from("<III", key, k)
        a, b, c = _mix((a + wa) & MASK32, (b + wb) & MASK32, (c + wc) & MASK32)
        length -= 12
        k += 12
    if length == 0:
        return c
    tail = key[k:] + bytes(12 - length)
    wa, wb, wc = struct.unpack("<III", tail)
    return _final((a + wa) & MASK32, (b + wb) & MASK32, (c + wc) & MASK32)


def nft_key(t: FiveTuple) -> bytes:
    """The registers nft hashes for `ip saddr . ip daddr . meta l4proto . th sport .
    th dport`: each field zero-padded to 4 bytes, 20 bytes in all."""
    return struct.pack(
        "!IIB3xH2xH2x",
        int(ipaddress.IPv4Address(t.src)),
        int(ipaddress.IPv4Address(t.dst)),
        t.proto,
        t.sport,
        t.dport,
    )


def kernel_member(t: FiveTuple, seed: int, members: int) -> int:
    """Index of the up member the kernel plane's nftables rule picks (mark - 1)."""
    if members <= 0:
        raise ValueError(f"a group needs at least one member, got {members}")
    if t.proto in (TCP, UDP):
        key = nft_key(t)
    else:  # the second rule hashes the addresses only
        key = struct.pack("!II", int(ipaddress.IPv4Address(t.src)),
                          int(ipaddress.IPv4Address(t.dst)))
    return (jhash(key, seed) * members) >> 32


def p4_member(t: FiveTuple, seed: int, members: int) -> int:
    """Index of the up member ecmp.p4 picks."""
    return p4_member_of(t.src, t.dst, t.proto, t.sport, t.dport, seed, members)


MemberFn = Callable[[FiveTuple, int, int], int]
# both P4 planes run p4src/ecmp.p4 (v1model on bmv2, PSA on p4-ebpf): the same choice
MEMBER_FUNCTIONS: dict[str, MemberFn] = {"kernel": kernel_member, "bmv2": p4_member,
                                         "p4-ebpf": p4_member}


class ModelError(ValueError):
    """A path cannot be predicted (unknown plane, address not in the topology, ...)."""


@dataclass(frozen=True)
class PathModel:
    """Predicts ECMP paths on one fat tree with one run's switch seeds."""

    topo: FatTree
    tables: Mapping[str, SwitchTable]
    plane: str = "kernel"

    def __post_init__(self) -> None:
        if self.plane not in MEMBER_FUNCTIONS:
            raise ModelError(f"data plane {self.plane!r} has no hash model; expected one of "
                             f"{sorted(MEMBER_FUNCTIONS)}")

    def host_of(self, address: str) -> str:
        try:
            return self.topo.address_owner[address]
        except KeyError:
            raise ModelError(f"{address} is no host address of this k={self.topo.k} fat "
                             f"tree with {self.topo.aliases_per_host} aliases") from None

    def member(self, switch: str, t: FiveTuple) -> int:
        table = self.tables[switch]
        return MEMBER_FUNCTIONS[self.plane](t, table.seed, len(table.up))

    def path(self, t: FiveTuple) -> tuple[str, ...]:
        """The nodes a packet with this 5-tuple crosses, source host to destination."""
        topo = self.topo
        src, dst = self.host_of(t.src), self.host_of(t.dst)
        dst_edge, dst_pod = topo.edge_of(dst), topo.nodes[dst].pod
        path = [src]
        node = topo.edge_of(src)
        while node != dst:
            path.append(node)
            role = topo.nodes[node].role
            if role is Role.EDGE:
                node = dst if node == dst_edge else self._up(node, t)
            elif role is Role.AGG:
                node = dst_edge if topo.nodes[node].pod == dst_pod else self._up(node, t)
            else:  # a core reaches each pod through one aggregation switch
                node = next(n for n in topo.neighbors(node) if topo.nodes[n].pod == dst_pod)
        path.append(dst)
        return tuple(path)

    def _up(self, switch: str, t: FiveTuple) -> str:
        return self.tables[switch].up[self.member(switch, t)].node

    def core(self, t: FiveTuple) -> str | None:
        """The core switch the 5-tuple crosses (None within a pod)."""
        return self.topo.core_of_path(self.path(t))
