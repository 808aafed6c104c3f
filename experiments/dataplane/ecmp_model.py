"""Which path a 5-tuple takes under `switching.mode: ecmp`, computed in Python (pure).

Every data plane hashes the 5-tuple with a per-switch seed (`topologies/forwarding.py`) at
every switch that has an up group, and takes the member the hash selects; each plane's
implementation names its member function (`dataplane/base.py`, `PlaneImplementation`):
nftables' jhash (`nftables/hashing.py`), or ecmp.p4's CRC-32 on both P4 planes
(`p4/hashing.py`).

`PathModel.path` walks a packet from its source host to its destination host with those
choices; the core it crosses is what `pathdiv probe` counts per core switch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pathdiv.experiments.config.planes import UnknownPlane
from pathdiv.experiments.dataplane.flows import TCP, UDP, FiveTuple, MemberFn
from pathdiv.experiments.dataplane.select import implementation
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.forwarding import SwitchTable
from pathdiv.topologies.model import Role

__all__ = ["TCP", "UDP", "FiveTuple", "ModelError", "PathModel"]


class ModelError(ValueError):
    """A path cannot be predicted (unknown plane, address not in the topology, ...)."""


@dataclass(frozen=True)
class PathModel:
    """Predicts ECMP paths on one fat tree with one run's switch seeds."""

    topo: FatTree
    tables: Mapping[str, SwitchTable]
    plane: str = "nftables"
    member_of: MemberFn = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            member = implementation(self.plane).member
        except UnknownPlane as exc:
            raise ModelError(f"no hash model: {exc.args[0]}") from None
        object.__setattr__(self, "member_of", member)

    def host_of(self, address: str) -> str:
        try:
            return self.topo.address_owner[address]
        except KeyError:
            raise ModelError(f"{address} is no host address of this k={self.topo.k} fat "
                             f"tree with {self.topo.aliases_per_host} aliases") from None

    def member(self, switch: str, t: FiveTuple) -> int:
        table = self.tables[switch]
        return self.member_of(t, table.seed, len(table.up))

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
