"""The member the nftables plane's ECMP rule picks for a 5-tuple, computed in Python (pure).

The rule is `jhash ip saddr . ip daddr . meta l4proto . th sport . th dport mod n seed S
offset 1` (`rules.py`). nft concatenates the fields into 32-bit registers, each field
zero-padded to 4 bytes (net/netfilter/nft_payload.c and nft_meta.c zero the register
before storing), so the kernel's `jhash()` (include/linux/jhash.h, lookup3, words read in
CPU byte order, i.e. little-endian on x86) runs over 20 bytes:

    saddr(4) daddr(4) proto,0,0,0 sport(2, network order),0,0 dport(2),0,0

and net/netfilter/nft_hash.c scales it: member = (hash * n) >> 32 (`reciprocal_scale`);
the mark is member + 1. Packets that are neither TCP nor UDP hash their addresses only.
"""

from __future__ import annotations

import ipaddress
import struct

from pathdiv.experiments.dataplane.flows import TCP, UDP, FiveTuple

MASK32 = 0xFFFFFFFF
JHASH_INITVAL = 0xDEADBEEF


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


def nft_member(t: FiveTuple, seed: int, members: int) -> int:
    """Index of the up member the nftables plane's rule picks (mark - 1)."""
    if members <= 0:
        raise ValueError(f"a group needs at least one member, got {members}")
    if t.proto in (TCP, UDP):
        key = nft_key(t)
    else:  # the second rule hashes the addresses only
        key = struct.pack("!II", int(ipaddress.IPv4Address(t.src)),
                          int(ipaddress.IPv4Address(t.dst)))
    return (jhash(key, seed) * members) >> 32
