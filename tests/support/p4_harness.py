"""One bmv2 switch outside Mininet, for packet-level tests and benchmarks.

`OneSwitch` is a context manager that creates a named network namespace
`<prefix>sw` holding ports `<prefix>s<i>` (bmv2 port i), veth-paired with peers
`<prefix>p<i>` that stay in the caller's namespace (scapy sends and sniffs there)
or each move into a namespace `<prefix>h<i>` (to run real TCP through the switch).
It starts `simple_switch` on the ports, installs entries through simple_switch_CLI,
reads them back, and deletes everything it made on exit, also after a failure.
Names start with the prefix (default `pd4`), so leftovers of a killed run are
recognisable; a stale namespace of the same name is removed before starting.
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

from pathdiv.experiments.dataplane.bmv2.cli import (
    CounterValue,
    cli_errors,
    parse_counters,
    readback_commands,
    readback_differences,
)
from pathdiv.experiments.dataplane.bmv2.switch import (
    offload_argv,
    simple_switch_argv,
    stop_process,
    wait_ready,
)
from pathdiv.experiments.dataplane.bmv2.tools import P4Tools
from pathdiv.experiments.dataplane.p4.entries import C_PORT_RX, C_PORT_TX, SwitchEntries
from pathdiv.experiments.fabric.environment import mark_namespace_argv
from pathdiv.experiments.fabric.lifecycle import StartStop

THRIFT_PORT = 9090
CLI_TIMEOUT_S = 60.0


class OneSwitchError(RuntimeError):
    """The one-switch network could not be built or configured."""


def _run(argv: list[str], what: str) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise OneSwitchError(
            f"{what}: `{' '.join(argv)}` failed (exit {proc.returncode}): "
            f"{(proc.stderr or proc.stdout).strip()[-500:]}"
        )
    return proc.stdout


class OneSwitch(StartStop):
    def __init__(
        self,
        tools: P4Tools,
        program_json: Path,
        ports: int,
        workdir: Path,
        prefix: str = "pd4",
        peer_namespaces: bool = False,
    ) -> None:
        if not 1 <= ports <= 16:
            raise OneSwitchError(f"ports must be in 1..16, got {ports}")
        self.tools = tools
        self.program_json = program_json
        self.ports = ports
        self.workdir = workdir
        self.prefix = prefix
        self.peer_namespaces = peer_namespaces
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / "simple_switch.log"
        self._cli_runs = 0

    # ---- names -------------------------------------------------------------------
    @property
    def switch_ns(self) -> str:
        return f"{self.prefix}sw"

    def switch_intf(self, i: int) -> str:
        return f"{self.prefix}s{i}"

    def peer_intf(self, i: int) -> str:
        return f"{self.prefix}p{i}"

    def peer_ns(self, i: int) -> str | None:
        return f"{self.prefix}h{i}" if self.peer_namespaces else None

    def in_ns(self, ns: str | None, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", ns, *argv] if ns else argv

    # ---- lifecycle (StartStop: `with OneSwitch(...)` starts, and stops on failure) --
    def _namespaces(self) -> list[str]:
        peers = [self.peer_ns(i) for i in range(self.ports)]
        return [self.switch_ns] + [ns for ns in peers if ns]

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.stop()  # a stale copy of our own names
        for ns in self._namespaces():
            _run(["ip", "netns", "add", ns], "namespace")
            _run(mark_namespace_argv(ns), "namespace")  # `pathdiv clean` may delete it
            _run(["ip", "-n", ns, "link", "set", "lo", "up"], "namespace")
        _run(self.in_ns(self.switch_ns, ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                                         "net.ipv6.conf.default.disable_ipv6=1"]), "sysctl")
        for i in range(self.ports):
            sw, peer, pns = self.switch_intf(i), self.peer_intf(i), self.peer_ns(i)
            _run(["ip", "link", "add", sw, "type", "veth", "peer", "name", peer], "veth")
            if pns is None:  # the caller's namespace: keep its IPv6 stack quiet
                _run(["sysctl", "-qw", f"net.ipv6.conf.{peer}.disable_ipv6=1"], "sysctl")
            _run(["ip", "link", "set", sw, "netns", self.switch_ns], "veth")
            if pns is not None:
                _run(["ip", "link", "set", peer, "netns", pns], "veth")
            for ns, intf in ((self.switch_ns, sw), (pns, peer)):
                _run(self.in_ns(ns, ["ip", "link", "set", intf, "up"]), "veth")
                _run(self.in_ns(ns, offload_argv(intf)), "offloads")
        argv = simple_switch_argv(
            self.tools, 0, THRIFT_PORT,
            [(i, self.switch_intf(i)) for i in range(self.ports)], self.program_json,
        )
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.in_ns(self.switch_ns, argv), stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_ready(self.proc, THRIFT_PORT, "one-switch bmv2", self.log)

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None
        for ns in self._namespaces():
            with contextlib.suppress(OneSwitchError):
                _run(["ip", "netns", "del", ns], "cleanup")
        for i in range(self.ports):  # peers left in our namespace die with their pair
            if Path(f"/sys/class/net/{self.peer_intf(i)}").exists():
                with contextlib.suppress(OneSwitchError):
                    _run(["ip", "link", "del", self.peer_intf(i)], "cleanup")

    # ---- inspection --------------------------------------------------------------
    def mac(self, ns: str | None, intf: str) -> str:
        return _run(self.in_ns(ns, ["cat", f"/sys/class/net/{intf}/address"]), "mac").strip()

    def port_macs(self) -> dict[int, tuple[str, str]]:
        """Port -> (switch port MAC, peer MAC), as `switch_entries` wants them."""
        return {
            i: (self.mac(self.switch_ns, self.switch_intf(i)),
                self.mac(self.peer_ns(i), self.peer_intf(i)))
            for i in range(self.ports)
        }

    # ---- control plane -----------------------------------------------------------
    def cli(self, commands: list[str], label: str = "cli") -> str:
        """Run simple_switch_CLI commands in the switch namespace; raise on any error."""
        self._cli_runs += 1
        out_file = self.workdir / f"{self._cli_runs:02d}.{label}.out"
        proc = subprocess.run(
            self.in_ns(self.switch_ns, self.tools.cli_argv(THRIFT_PORT)),
            input="\n".join(commands) + "\n", capture_output=True, text=True,
            timeout=CLI_TIMEOUT_S,
        )
        text = proc.stdout + proc.stderr
        out_file.write_text(text)
        errors = cli_errors(text)
        if proc.returncode != 0 or errors:
            raise OneSwitchError(f"simple_switch_CLI {label} failed "
                                 f"({'; '.join(errors[:3]) or proc.returncode}); read {out_file}")
        return text

    def install(self, entries: SwitchEntries) -> None:
        self.cli(entries.commands(), "entries")
        problems = readback_differences(entries, self.cli(readback_commands(entries), "readback"))
        if problems:
            raise OneSwitchError(f"read-back differs: {'; '.join(problems[:5])}")

    def counters(self) -> dict[int, tuple[CounterValue, CounterValue]]:
        """Port -> (received, sent) as counted by the program."""
        cmds = [f"counter_read {c} {i}" for i in range(self.ports) for c in (C_PORT_RX, C_PORT_TX)]
        values = parse_counters(self.cli(cmds, "counters"))
        return {i: (values[(C_PORT_RX, i)], values[(C_PORT_TX, i)]) for i in range(self.ports)}
