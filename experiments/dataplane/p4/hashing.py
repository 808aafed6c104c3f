"""The member choice of p4src/ecmp.p4, computed in Python (pure), on both P4 planes.

bmv2 computes CRC-32 (the zlib polynomial, reflected, init and final XOR
0xFFFFFFFF) over the 13 bytes (src, dst, protocol, sport, dport); ecmp.p4 XORs the
switch's seed in, multiplies by an odd constant and takes the high 16 bits modulo
the group size. This model lets tests check the switch's choice packet by packet
and lets analysis predict which path a 5-tuple takes. The PSA version of ecmp.p4 (the
p4-ebpf plane) computes the same member (docs/p4.md).
"""

from __future__ import annotations

import ipaddress
import struct
import zlib

from pathdiv.experiments.dataplane.flows import FiveTuple

MIX_MULTIPLIER = 0x9E3779B1  # as in p4src/include/headers.p4
MASK32 = 0xFFFFFFFF


def flow_hash(src: str, dst: str, proto: int, sport: int, dport: int) -> int:
    data = struct.pack(
        "!IIBHH",
        int(ipaddress.IPv4Address(src)),
        int(ipaddress.IPv4Address(dst)),
        proto,
        sport,
        dport,
    )
    return zlib.crc32(data) & MASK32


def ecmp_member(
    src: str, dst: str, proto: int, sport: int, dport: int, seed: int, members: int
) -> int:
    """Index of the group member ecmp.p4 picks for this 5-tuple at a switch with `seed`."""
    if members <= 0:
        raise ValueError(f"a group needs at least one member, got {members}")
    mixed = ((flow_hash(src, dst, proto, sport, dport) ^ seed) * MIX_MULTIPLIER) & MASK32
    return (mixed >> 16) % members


def p4_member(t: FiveTuple, seed: int, members: int) -> int:
    """`ecmp_member` of a 5-tuple: both P4 planes' member function."""
    return ecmp_member(t.src, t.dst, t.proto, t.sport, t.dport, seed, members)
