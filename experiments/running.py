"""What code that uses a running network may rely on (Protocols and the one error, no
behaviour).

`RunningNetwork` is what the manifest helpers, the fidelity monitor and link events take
of a network (`pathdiv.experiments.network.Network` is the one implementation), so they
are typed without importing it and test doubles need only these members. `Emulator` and
`NodeShell` are what pathdiv uses of Mininet: nodes by name, each its namespace's shell.
`NetworkError` is what a network, or any of its parts, raises when it cannot be built
or a node command fails.
"""

from __future__ import annotations

import subprocess
from typing import Any, Protocol

from pathdiv.topologies.fattree import FatTree


class NetworkError(RuntimeError):
    """The network could not be built or a node command failed."""


class NodeShell(Protocol):
    """One node of the emulator: the shell process of its namespace."""

    pid: int

    def cmd(self, *args: Any, **kwargs: Any) -> str:
        """Run a shell command line in the node; its output."""

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen[str]:
        """Start a process in the node's namespace."""

    def sendCmd(self, *args: Any, **kwargs: Any) -> None:  # Mininet's names
        """Start a shell command line without waiting for it."""

    def waitOutput(self, verbose: bool = False) -> str:
        """The output of the command `sendCmd` started, once it has ended."""


class Emulator(Protocol):
    """What pathdiv uses of Mininet once the network is built: its nodes by name."""

    def __getitem__(self, name: str) -> NodeShell:
        """The node `name`."""

    def stop(self) -> None:
        """End every node and link."""


class RunningNetwork(Protocol):
    topo: FatTree

    def node(self, name: str) -> Any:
        """The node (its namespace's shell process: `.pid`, `.cmd`)."""

    def cmd(self, name: str, argv: list[str], check: bool = True) -> str:
        """Run `argv` on node `name`; its output (raises when it fails and `check`)."""

    def counters(self, switch: str) -> dict[str, Any]:
        """Interface name -> port counters of `switch`."""
