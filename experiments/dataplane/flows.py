"""A flow's 5-tuple: what an ECMP member function hashes and a path model walks (pure)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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


# (5-tuple, switch seed, up-group size) -> index of the member a plane's switch picks
MemberFn = Callable[[FiveTuple, int, int], int]
