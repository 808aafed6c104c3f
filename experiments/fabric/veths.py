"""Every veth pair of a topology in one `ip -batch`, and Mininet links that only record them.

Mininet's own links cost one `ip link add` per link (run in a node's shell), one
`ifconfig up` per interface and, at teardown, one `ip link del` per interface. Here all
pairs are created by one `ip -batch` in the root namespace, each end directly in its
node's namespace (`netns <pid of the node's shell>`), with its name and MAC; nothing
is ever created in the root namespace. `RecordedLink` then gives Mininet the same
`Link`/`Intf` objects (names, ports, MACs in `node.intfs`) without running a command:
the interfaces come up as they are made, and teardown deletes nothing, because when
a node's last process exits the kernel removes its namespace and, with it, both ends
of every veth pair that had an end there.
"""

from __future__ import annotations

from typing import Any

from mininet.link import Intf, Link

from pathdiv.topologies.fattree import FatTree


def veth_batch(topo: FatTree, pids: dict[str, int]) -> str:
    """`ip -batch` lines creating every link of `topo` between the nodes' namespaces.

    Both ends come up at once (as Mininet's `ifconfig up` did), so the carrier, and
    with it the qdisc, is live long before the build ends."""
    lines = []
    for link in topo.links:
        a, b = link.a, link.b
        lines.append(
            f"link add name {a.intf} address {topo.mac(a)} netns {pids[a.node]} up "
            f"type veth peer name {b.intf} address {topo.mac(b)} netns {pids[b.node]}"
        )
    return "\n".join(lines) + "\n"


class RecordedIntf(Intf):
    """An interface that exists already: construction configures nothing."""

    def config(self, **_params: Any) -> dict[str, Any]:
        return {}


class RecordedLink(Link):
    """A veth pair made by `veth_batch`: Mininet bookkeeping only, no commands."""

    def __init__(self, node1: Any, node2: Any, **params: Any) -> None:
        params["intf"] = RecordedIntf  # Mininet.addLink passes its own Intf class
        super().__init__(node1, node2, fast=True, **params)

    @classmethod
    def makeIntfPair(cls, *_args: Any, **_kwargs: Any) -> None:
        """The pair was created by the batch already."""

    def stop(self) -> None:
        """Nothing to delete: the pair goes with the namespaces (see the module doc)."""
        for intf in (self.intf1, self.intf2):
            if intf is not None and intf.node is not None:
                intf.node.delIntf(intf)
