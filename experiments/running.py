"""What the code that reads a running network may use of it (a Protocol, no behaviour).

`pathdiv.experiments.fabric.network.Network` is the one implementation; the manifest
helpers, the fidelity monitor and link events take any object with these members, so
they are typed without importing the network (and test doubles need only these).
"""

from __future__ import annotations

from typing import Any, Protocol

from pathdiv.topologies.fattree import FatTree


class RunningNetwork(Protocol):
    topo: FatTree

    def node(self, name: str) -> Any:
        """The node (its namespace's shell process: `.pid`, `.cmd`)."""

    def cmd(self, name: str, argv: list[str], check: bool = True) -> str:
        """Run `argv` on node `name`; its output (raises when it fails and `check`)."""

    def counters(self, switch: str) -> dict[str, Any]:
        """Interface name -> port counters of `switch`."""
