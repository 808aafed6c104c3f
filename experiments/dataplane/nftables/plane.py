"""The nftables plane: Linux IPv4 forwarding inside each switch's namespace.

Routes, policy rules and each mode's nftables ruleset are `rules.py`'s (pure). Everything
is applied as one node script per switch (`pathdiv.experiments.fabric.nodescript`):
sysctls written under /proc/sys, one `ip -batch` and one ruleset per switch, all switches
at once; the ruleset is loaded through libnftables from this process where it can be
(`fabric/nftlib.py`). `IMPLEMENTATION` is what the plane registry
(`config/planes.py`, entry `nftables`) finds here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mininet.node import Node

from pathdiv.experiments.dataplane.base import (
    DataPlane,
    DataPlaneError,
    PlaneImplementation,
    PortCounters,
    namespace_counters,
)
from pathdiv.experiments.dataplane.nftables.hashing import nft_member
from pathdiv.experiments.dataplane.nftables.rules import (
    NAME,
    mode_rules,
    nft_ruleset,
    route_batch,
)
from pathdiv.experiments.fabric.hostsetup import NO_IPV6
from pathdiv.experiments.fabric.nftlib import Nft, NftError
from pathdiv.experiments.fabric.nodescript import ScriptError, batch_commands, render, run_scripts
from pathdiv.topologies.forwarding import SwitchTable


class NftablesSwitch(Node):
    """A network namespace that forwards IPv4 in the kernel (configured by the plane)."""


SWITCH_SYSCTLS = [
    *NO_IPV6,
    "net.ipv4.ip_forward=1",
    "net.ipv4.conf.all.rp_filter=0",
    "net.ipv4.conf.default.rp_filter=0",
]


class NftablesDataPlane(DataPlane):
    name = NAME

    def __init__(self, topo: Any, tables: dict[str, SwitchTable], workdir: Path) -> None:
        super().__init__(topo, tables, workdir)
        self.net: Any = None
        self._nft = Nft.open()  # None: the node scripts run `nft -f`

    def switch_class(self) -> type:
        return NftablesSwitch

    def start(self, net: Any, mode: str, spray: str) -> None:
        """One node script per switch: sysctls, one `ip -batch` (addresses, links up,
        routes, rules), all switches at once; then the mode's ruleset (`_run_scripts`)."""
        mode_rules(mode, spray)
        self.net = net
        self._run_scripts("start", {
            name: self._switch_commands(name, table)
            + self._mode_commands(name, table, mode, spray, "start")
            for name, table in self.tables.items()
        })
        self.mode, self.spray = mode, spray

    def set_mode(self, mode: str, spray: str) -> None:
        mode_rules(mode, spray)
        self._run_scripts("mode", {
            name: self._mode_commands(name, table, mode, spray, "mode")
            for name, table in self.tables.items() if table.up  # cores only route down
        })
        self.mode, self.spray = mode, spray

    def _switch_commands(self, name: str, table: SwitchTable) -> list[list[str]]:
        cmds = [["sysctl", "-qw", *SWITCH_SYSCTLS]]
        for link in self.topo.links_of(name):
            intf = link.port_of(name).intf
            cmds.append(["ip", "addr", "replace", f"{table.address}/32", "dev", intf])
            cmds.append(["ip", "link", "set", intf, "up"])
        return cmds + batch_commands("ip", route_batch(table))

    def _mode_commands(
        self, name: str, table: SwitchTable, mode: str, spray: str, label: str
    ) -> list[list[str]]:
        """The mode's nftables file (written here): every mode, static too, is its marks."""
        if not table.up:
            return []
        path = self.workdir / "switches" / f"{name}.{label}.nft"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(nft_ruleset(table, mode, spray))
        return [["nft", "-f", str(path)]]

    def _run_scripts(self, label: str, commands: dict[str, list[list[str]]]) -> None:
        """Each switch's commands as one node script, all switches at once. A switch's
        last command, its mode's `nft -f FILE`, is loaded from this process instead
        where libnftables can be (fabric/nftlib.py: no process start per switch)."""
        loads: dict[str, Path] = {}
        nft = self._nft
        if nft is not None:
            for name, cmds in commands.items():
                if cmds and cmds[-1][:2] == ["nft", "-f"]:
                    loads[name] = Path(cmds[-1][2])
                    commands[name] = cmds[:-1]
        scripts = []
        for name, cmds in commands.items():
            if not cmds:
                continue
            stem = self.workdir / "switches" / f"{name}.{label}"
            scripts.append((f"switch {name}", self.net[name], Path(f"{stem}.sh"),
                            render(cmds, str(stem), f"switch {name} {label}")))
        try:
            run_scripts(scripts)
        except ScriptError as exc:
            raise DataPlaneError(str(exc)) from exc
        if nft is None:
            return
        for name, path in loads.items():
            try:
                nft.load(self.net[name].pid, path)
            except NftError as exc:
                raise DataPlaneError(f"switch {name} {label}: {exc}") from exc

    def port_counters(self, switch: str) -> dict[str, PortCounters]:
        """The switch's ports are its namespace's interfaces."""
        return namespace_counters(self.net[switch].pid)

    def stop(self) -> None:
        self.net = None  # state lives in the namespaces, which die with their nodes


def find_tools(env: Mapping[str, str]) -> tuple[Any, str]:
    """Nothing to find: Linux forwarding is the kernel's, nftables is loaded through
    libnftables where it can be and `nft -f` otherwise (scripts/install-deps.sh)."""
    return True, "Linux forwarding and nftables"


IMPLEMENTATION = PlaneImplementation(NftablesDataPlane, find_tools, nft_member)
