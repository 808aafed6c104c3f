"""The P4 data plane: one bmv2 `simple_switch` per switch namespace, tables from the topology.

Each switch node is a network namespace whose ports are driven by a `simple_switch`
process (bmv2 port N = interface <switch>-ethN, thrift port THRIFT_BASE + index),
running the program of the current mode (p4src/<mode>.p4, compiled once and cached
by content hash). Entries come from `dataplane/p4/entries.py` and are installed with
`simple_switch_CLI` inside the namespace, then read back and compared: any
difference stops the run with the switch, the difference and the files to read.

`set_mode` swaps the program on every running switch (`load_new_config_file` +
`swap_configs`, which bmv2 allows with `--enable-swap`) and reinstalls entries;
between spray policies only a register changes. Packets that arrive between a swap
and the end of the entry install are dropped, so change modes between runs.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import Any

from mininet.node import Node

from pathdiv.experiments.config.planes import PLANES
from pathdiv.experiments.config.switching import SwitchingMode
from pathdiv.experiments.dataplane.base import (
    DataPlane,
    DataPlaneError,
    PlaneImplementation,
    PortCounters,
    check_mode,
)
from pathdiv.experiments.dataplane.bmv2.cli import (
    clean_lines,
    cli_errors,
    dumped_table,
    parse_counters,
    parse_registers,
    readback_commands,
    readback_differences,
)
from pathdiv.experiments.dataplane.bmv2.programs import (
    MODE_PROGRAMS,
    CompiledProgram,
    P4CompileError,
    compile_program,
    compile_programs,
)
from pathdiv.experiments.dataplane.bmv2.switch import (
    READY_TIMEOUT_S,
    SwitchStartError,
    offload_argv,
    simple_switch_argv,
    stop_process,
    threads_first_in_first_out,
    wait_ready,
)
from pathdiv.experiments.dataplane.bmv2.tools import (
    P4Tools,
    P4ToolsError,
    find_p4_tools,
    require_p4_tools,
)
from pathdiv.experiments.dataplane.p4.entries import (
    C_PORT_RX,
    C_PORT_TX,
    SELECT,
    EntryOptions,
    SwitchEntries,
    egress_queue_commands,
    port_macs,
    switch_entries,
    switch_ports,
)
from pathdiv.experiments.dataplane.p4.hashing import p4_member
from pathdiv.experiments.dataplane.p4.sources import P4SourceError

__all__ = ["IMPLEMENTATION", "Bmv2DataPlane", "Bmv2Switch", "find_p4_tools"]

NAME = "bmv2"

THRIFT_BASE = 9090
CLI_TIMEOUT_S = 120.0
DEBUG_ENV = "PATHDIV_P4_DEBUG"


class Bmv2Switch(Node):
    """A network namespace whose ports one `simple_switch` process drives.

    The namespace's own IP stack stays out of the way: no IPv4 address on the ports,
    no forwarding, IPv6 off (so it sends no neighbour discovery of its own).
    """

    def __init__(self, name: str, **params: Any) -> None:
        super().__init__(name, **params)
        self.bmv2: subprocess.Popen[bytes] | None = None
        self.bmv2_log: Path | None = None
        self.thrift_port: int | None = None

    def prepare_namespace(self) -> None:
        """Loopback up (the CLI reaches thrift on 127.0.0.1); the namespace's own IP
        stack kept off the ports bmv2 drives."""
        self.cmd(
            "ip link set lo up; sysctl -qw net.ipv4.ip_forward=0 "
            "net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1"
        )
        for intf in self.intfNames():
            if intf != "lo":
                self.cmd(f"sysctl -qw net.ipv6.conf.{intf}.disable_ipv6=1")

    def start_bmv2(self, argv: list[str], log: Path, thrift_port: int) -> None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as out:
            self.bmv2 = self.popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT)
        self.bmv2_log, self.thrift_port = log, thrift_port

    def wait_bmv2(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Return once the thrift port listens; raise naming the log otherwise."""
        assert self.bmv2 is not None and self.thrift_port is not None and self.bmv2_log
        try:
            wait_ready(self.bmv2, self.thrift_port, f"switch {self.name}", self.bmv2_log,
                       timeout_s)
        except SwitchStartError as exc:
            raise DataPlaneError(str(exc)) from exc

    def stop_bmv2(self) -> None:
        proc, self.bmv2 = self.bmv2, None
        stop_process(proc)

    def stop(self, deleteIntfs: bool = False) -> None:
        self.stop_bmv2()
        super().stop(deleteIntfs)


class Bmv2DataPlane(DataPlane):
    name = NAME

    def __init__(
        self,
        topo: Any,
        tables: dict[str, Any],
        workdir: Path,
        tools: P4Tools | None = None,
        options: EntryOptions | None = None,
        debug: bool | None = None,
    ) -> None:
        super().__init__(topo, tables, workdir)
        if tools is None:
            found, reason = find_p4_tools()
            if found is None:
                raise DataPlaneError(f"the bmv2 data plane cannot run: {reason}; install: "
                                     f"{PLANES[NAME].install}")
            tools = found
        self.tools = tools
        self.options = options or EntryOptions()
        self.debug = os.environ.get(DEBUG_ENV) == "1" if debug is None else debug
        self.net: Any = None
        self.compiled: dict[str, CompiledProgram] = {}
        self.program: str | None = None
        self.entries: dict[str, SwitchEntries] = {}
        self._versions: dict[str, str] | None = None

    def switch_class(self) -> type:
        return Bmv2Switch

    @property
    def switch_dir(self) -> Path:
        return self.workdir / "switches"

    def thrift_port(self, switch: str) -> int:
        return THRIFT_BASE + self.topo.switches.index(switch)

    def _program(self, name: str) -> CompiledProgram:
        if name not in self.compiled:
            self.compiled[name] = compile_program(name, self.tools)
        return self.compiled[name]

    # ---- lifecycle ---------------------------------------------------------------
    def start(self, net: Any, mode: str, spray: str) -> None:
        check_mode(mode, spray)
        self.net = net
        program = self._program(MODE_PROGRAMS[mode])
        for sw in self.topo.switches:
            net[sw].prepare_namespace()
        self._offloads_off()
        for i, sw in enumerate(self.topo.switches):
            ports = [(hop.port, hop.intf) for hop in switch_ports(self.tables[sw])]
            debug_dir = self.switch_dir / f"{sw}.pcap" if self.debug else None
            if debug_dir is not None:
                debug_dir.mkdir(parents=True, exist_ok=True)
            argv = simple_switch_argv(
                self.tools, i, self.thrift_port(sw), ports, program.json, debug_dir
            )
            net[sw].start_bmv2(argv, self.switch_dir / f"{sw}.bmv2.log", self.thrift_port(sw))
        for sw in self.topo.switches:
            net[sw].wait_bmv2()
        self.program = program.name
        self._install(spray)
        if self.ecn_threshold_pkts is not None:
            self._cli_all({sw: egress_queue_commands(self.ecn_queues.get(sw, []))
                           for sw in self.topo.switches}, "queues")
        self.mode, self.spray = mode, spray

    def set_mode(self, mode: str, spray: str) -> None:
        entry = check_mode(mode, spray)
        if self.net is None:
            raise DataPlaneError("set_mode before start: the bmv2 switches are not running")
        wanted = MODE_PROGRAMS[mode]
        if wanted != self.program:
            program = self._program(wanted)
            self._cli_all(
                {sw: [f"load_new_config_file {program.json}", "swap_configs"]
                 for sw in self.topo.switches},
                "swap",
            )
            self.program = wanted
            self._install(spray)
        else:
            self._rewrite_registers(entry, spray)
        self.mode, self.spray = mode, spray

    def _rewrite_registers(self, entry: SwitchingMode, spray: str) -> None:
        """Same program, other parameters (the spray policy): the mode's registers
        written on every switch and read back."""
        old = entry.registers({**self.switching, "spray": self.spray})
        new = entry.registers({**self.switching, "spray": spray})
        if new == old:
            return
        writes = {f"{SELECT}.{name}": value for name, value in new.items()}
        self._cli_all({sw: [f"register_write {r} 0 {v}" for r, v in writes.items()]
                       for sw in self.topo.switches}, "spray")
        outputs = self._cli_all({sw: [f"register_read {r} 0" for r in writes]
                                 for sw in self.topo.switches}, "spray-readback")
        for sw, out in outputs.items():
            for register, value in writes.items():
                got = parse_registers(out).get((register, 0))
                if got != value:
                    raise DataPlaneError(
                        f"switch {sw}: register {register} reads {got}, expected {value} "
                        f"({spray}); read {self.switch_dir / f'{sw}.spray-readback.out'}"
                    )

    def stop(self) -> None:
        if self.net is None:
            return
        for sw in self.topo.switches:
            with contextlib.suppress(Exception):
                self.net[sw].stop_bmv2()
        self.net = None

    # ---- configuration -----------------------------------------------------------
    def _offloads_off(self) -> None:
        for sw in self.topo.switches:
            for link in self.topo.links_of(sw):
                for port in (link.port_of(sw), link.peer_of(sw)):
                    if port.node != sw and self.topo.nodes[port.node].is_switch:
                        continue  # that switch does its own ports
                    out = self.net[port.node].cmd(
                        " ".join(offload_argv(port.intf)) + " 2>&1; echo __rc=$?"
                    )
                    body, _, rc = out.rpartition("__rc=")
                    if rc.strip() != "0":
                        raise DataPlaneError(
                            f"{port.node}: could not turn offloads off on {port.intf} "
                            f"(exit {rc.strip()}): {body.strip()[-300:]}"
                        )

    def _install(self, spray: str) -> None:
        assert self.program is not None
        gap = int(self.switching.get("flowlet_gap_us", self.options.flowlet_gap_us))
        ecn = self.ecn_threshold_pkts or self.options.ecn_threshold_pkts
        options = EntryOptions(spray, gap, ecn)
        self.entries = {
            sw: switch_entries(
                self.tables[sw], port_macs(self.topo, sw), self.program, options
            )
            for sw in self.topo.switches
        }
        self._cli_all({sw: e.commands() for sw, e in self.entries.items()}, "entries")
        outputs = self._cli_all(
            {sw: readback_commands(e) for sw, e in self.entries.items()}, "readback"
        )
        for sw, out in outputs.items():
            problems = readback_differences(self.entries[sw], out)
            if problems:
                shown = "; ".join(problems[:5])
                more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
                raise DataPlaneError(
                    f"switch {sw}: the tables read back differ from what was installed: "
                    f"{shown}{more}; compare {self.switch_dir / f'{sw}.entries.cli'} with "
                    f"{self.switch_dir / f'{sw}.readback.out'}"
                )

    def _cli_all(self, commands: dict[str, list[str]], label: str) -> dict[str, str]:
        """Run one simple_switch_CLI batch per switch, all at once; return their outputs."""
        self.switch_dir.mkdir(parents=True, exist_ok=True)
        running = []
        for sw, cmds in commands.items():
            cmd_file = self.switch_dir / f"{sw}.{label}.cli"
            out_file = self.switch_dir / f"{sw}.{label}.out"
            cmd_file.write_text("\n".join(cmds) + "\n")
            with cmd_file.open("rb") as stdin, out_file.open("wb") as stdout:
                proc = self.net[sw].popen(
                    self.tools.cli_argv(self.thrift_port(sw)),
                    stdin=stdin, stdout=stdout, stderr=subprocess.STDOUT,
                )
            running.append((sw, proc, out_file))
        outputs: dict[str, str] = {}
        failures: list[str] = []
        for sw, proc, out_file in running:
            try:
                rc = proc.wait(timeout=CLI_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                rc = None
            text = out_file.read_text(errors="replace")
            outputs[sw] = text
            errors = cli_errors(text)
            if rc != 0 or errors:
                why = "; ".join(errors[:3]) or f"exit code {rc}"
                failures.append(f"switch {sw}: simple_switch_CLI {label} failed ({why}); "
                                f"read {out_file}")
        if failures:
            raise DataPlaneError(" | ".join(failures[:3]))
        return outputs

    def switch_cli(self, switch: str, command: str) -> str:
        """simple_switch_CLI's answer to one command on `switch` (`table_dump T`,
        `counter_read C INDEX`, `register_read R INDEX`, `help`, ...). A table dump is
        headed by the table's full name and the switch: the CLI prints the entries alone."""
        if self.net is None or switch not in self.tables:
            raise DataPlaneError(f"{switch!r} is not a running switch; switches are "
                                 f"{', '.join(self.topo.switches)}")
        out = self._cli_all({switch: [command]}, "shell")[switch]
        lines = [ln for ln in clean_lines(out)
                 if ln and not ln.startswith(("Obtaining JSON", "Control utility"))]
        table = dumped_table(command)
        if table is not None and "TABLE ENTRIES" in lines:
            lines.insert(0, f"table {table} on {switch}:")
        return "\n".join(lines)

    # ---- measurements ------------------------------------------------------------
    def port_counters(self, switch: str) -> dict[str, PortCounters]:
        return self.ports_counters([switch])[switch]

    def ports_counters(self, switches: list[str]) -> dict[str, dict[str, PortCounters]]:
        """One simple_switch_CLI per switch, all at once: a CLI's start-up (a Python
        process and its Thrift connection) is most of a read, and `Network.wait_quiet`
        reads every switch it watches several times."""
        if self.net is None:
            raise DataPlaneError(f"switches {', '.join(switches)}: counters asked for, but "
                                 "bmv2 is not running")
        commands = {sw: [f"counter_read {c} {h.port}" for h in switch_ports(self.tables[sw])
                         for c in (C_PORT_RX, C_PORT_TX)] for sw in switches}
        texts = self._cli_all(commands, "counters")
        return {sw: self._port_counters_of(sw, texts[sw]) for sw in switches}

    def _port_counters_of(self, switch: str, text: str) -> dict[str, PortCounters]:
        hops = switch_ports(self.tables[switch])
        values = parse_counters(text)
        out: dict[str, PortCounters] = {}
        for h in hops:
            rx, tx = values.get((C_PORT_RX, h.port)), values.get((C_PORT_TX, h.port))
            if rx is None or tx is None:
                raise DataPlaneError(
                    f"switch {switch}: no counter value for port {h.port} ({h.intf}) in the "
                    f"CLI output; read {self.switch_dir / f'{switch}.counters.out'}"
                )
            out[h.intf] = PortCounters(rx.packets, rx.bytes, tx.packets, tx.bytes)
        return out

    def first_in_first_out(self) -> int:
        """Every switch's threads under SCHED_FIFO: they forward the packets, and left to
        the fair scheduler they woke in an order that the runs before had shaped (the same
        static-TCP run first in its boot and after another gave FCTs up to 1.2 ms apart:
        docs/decisions/0008-network-reuse.md)."""
        return sum(threads_first_in_first_out(self.net[sw].bmv2.pid)
                   for sw in self.topo.switches if self.net[sw].bmv2 is not None)

    def describe(self) -> dict[str, Any]:
        if self._versions is None:
            self._versions = self.tools.versions()
        return {
            **super().describe(),
            "program": self.program,
            "programs": {
                n: {"sha": p.digest, "json": str(p.json)} for n, p in self.compiled.items()
            },
            "tools": self._versions,
            "thrift_base": THRIFT_BASE,
            "debug": self.debug,
            "options": {
                "flowlet_gap_us": self.options.flowlet_gap_us,
                "ecn_threshold_pkts": self.options.ecn_threshold_pkts,
            },
        }


def prepare_for_lab_kernel() -> str:
    """Every mode's program compiled into the cache on the host (the guest reads it)."""
    try:
        programs = compile_programs(require_p4_tools())
    except (P4CompileError, P4SourceError, P4ToolsError) as exc:
        raise DataPlaneError(f"the P4 programs could not be compiled on the host: "
                             f"{exc}") from exc
    where = {str(p.json.parent.parent) for p in programs.values()}
    return (f"P4 programs {', '.join(programs)} compiled for bmv2 on the host "
            f"(cache {', '.join(sorted(where))})")


IMPLEMENTATION = PlaneImplementation(Bmv2DataPlane, find_p4_tools, p4_member,
                                     prepare_for_lab_kernel)
