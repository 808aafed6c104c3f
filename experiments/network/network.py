"""The running network: Mininet namespaces for every node of the topology object.

`Network` is a context manager. `start()` creates the nodes and links, shapes every link,
configures hosts (addresses, routes, TCP/MPTCP) and hands the switches to the data
plane; `stop()` (always reached, also on Ctrl-C) ends every process the network started,
stops Mininet and sweeps anything still carrying this process's owner mark. Every process
it starts inherits PATHDIV_OWNER=<owner pid>, which is how `pathdiv clean` finds the
leftovers of a killed run and nothing else.

Beside the network itself: its link captures (`network.captures`, captures.py), and the
reference state, check and reset that let the next run use it (reuse.py, held by the
run's keeper).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pathdiv.experiments.config.load import Config
from pathdiv.experiments.dataplane.base import DataPlane, DataPlaneError
from pathdiv.experiments.fabric.conditions import node_commands, program_queues
from pathdiv.experiments.fabric.cpuacct import HostCgroups
from pathdiv.experiments.fabric.environment import (
    allow_cc,
    restore_allowed_cc,
    set_mptcp_d_parameters,
)
from pathdiv.experiments.fabric.hostsetup import host_commands, receive_commands
from pathdiv.experiments.fabric.lifecycle import StartStop
from pathdiv.experiments.fabric.netstate import host_spec
from pathdiv.experiments.fabric.nftlib import LOW_FDS
from pathdiv.experiments.fabric.nodeprocs import few_descriptors, terminate
from pathdiv.experiments.fabric.nodescript import ScriptError, failure_message, render, run_scripts
from pathdiv.experiments.fabric.reach import ReachReport, check_reach
from pathdiv.experiments.fabric.veths import RecordedLink, veth_batch
from pathdiv.experiments.network.captures import LinkCaptures
from pathdiv.experiments.running import Emulator, NetworkError, NodeShell
from pathdiv.kernels.processes import OWNER_ENV, owner_mark, sweep
from pathdiv.topologies.forwarding import forwarding_tables

# Run by path (standard library only), so it needs no installed package in the node.
TRANSFER_TOOL = Path(__file__).resolve().parents[1] / "traffic" / "transfer.py"

log = logging.getLogger("pathdiv")


class Network(StartStop):
    """One emulated network built from `cfg.topology()` with the given data plane."""

    def __init__(self, cfg: Config, dataplane: type[DataPlane], workdir: Path) -> None:
        self.cfg = cfg
        self.topo = cfg.fat_tree("this network")
        self.tables = forwarding_tables(self.topo, cfg.seed)
        self.workdir = workdir
        self.plane = dataplane(self.topo, self.tables, workdir)
        self.plane.switching = dict(cfg.data["switching"])
        self.link_conditions = cfg.link_conditions()  # per direction; events change it
        # ECN marking: in the switch program (bmv2) or in the switches' egress qdiscs
        self.plane.set_ecn(cfg.ecn_threshold_pkts, program_queues(self.topo, self.link_conditions))
        self.qdisc_ecn_pkts = None if self.plane.marks_in_program else cfg.ecn_threshold_pkts
        self.mininet: Emulator | None = None
        self.procs: list[subprocess.Popen[str]] = []
        self.captures = LinkCaptures(self, cfg.captured_links)
        # CPU time per host: a cgroup each for its shell and what pathdiv starts in it
        self.host_cpu = HostCgroups(list(self.topo.hosts))
        self.build_s = 0.0
        self.reach = ReachReport()  # the last reachability check's figures
        self._cc_restore: str | None = None

    # ---- lifecycle (StartStop: `with Network(...)` starts, and stops even on failure) ----
    def start(self) -> None:
        t0 = time.monotonic()
        os.environ[OWNER_ENV] = owner_mark()
        from mininet.log import setLogLevel
        from mininet.net import Mininet

        setLogLevel("warning")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._cc_restore = allow_cc(self.cfg.cc)
        if self.cfg.cc == "mptcp-d":
            set_mptcp_d_parameters(*self.cfg.mptcp_d)
        mininet = Mininet(topo=None, build=False, controller=None, autoSetMacs=False)
        self.mininet = mininet
        LOW_FDS.fill()  # low numbers for libnftables, before the nodes' shells take them
        with few_descriptors(len(self.topo.nodes)):
            for name in self.topo.switches:
                mininet.addSwitch(name, cls=self.plane.switch_class(), inNamespace=True)
            for name in self.topo.hosts:
                mininet.addHost(name, ip=None)
        if self.host_cpu.create():
            for name in self.topo.hosts:
                self.host_cpu.attach(name, self.node(name).pid)
        self._add_links(mininet)
        spec = host_spec(self.cfg)
        self.run_scripts("setup", {
            name: (host_commands(self.topo, name, spec) if name in self.topo.hosts else [])
            + self.link_commands(name)
            + (receive_commands(self.topo, name, spec) if name in self.topo.hosts else [])
            for name in self.topo.nodes
        })
        self.plane.start(mininet, self.cfg.mode, self.cfg.spray)
        self.build_s = time.monotonic() - t0
        log.info("network up: k=%d, %d nodes, %d links, %s data plane, %s mode (%.1f s)",
                 self.topo.k, len(self.topo.nodes), len(self.topo.links), self.plane.name,
                 self.cfg.mode, self.build_s)

    def _add_links(self, mininet: Any) -> None:
        """Create every veth pair with one `ip -batch` (ends straight into the nodes'
        namespaces), then record them as Mininet links (see `pathdiv.experiments.fabric.veths`)."""

        pids = {name: self.node(name).pid for name in self.topo.nodes}
        path = self.workdir / "nodes" / "links.ip"
        path.parent.mkdir(parents=True, exist_ok=True)
        batch = veth_batch(self.topo, pids)
        path.write_text(batch)
        argv = ["ip", "-batch", str(path)]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            raise NetworkError(failure_message("root namespace", done.stderr,
                                               str(done.returncode), {str(path): batch},
                                               shlex.join(argv)))
        for link in self.topo.links:
            mininet.addLink(
                link.a.node, link.b.node, port1=link.a.number, port2=link.b.number,
                intfName1=link.a.intf, intfName2=link.b.intf,
                addr1=self.topo.mac(link.a), addr2=self.topo.mac(link.b), cls=RecordedLink,
            )

    def link_commands(self, node: str) -> list[list[str]]:
        """The commands that shape `node`'s links under the current conditions."""
        return node_commands(self.topo, node, self.link_conditions, self.qdisc_ecn_pkts)

    def reconfigure(self, cfg: Config, workdir: Path) -> None:
        """Take `cfg` (a config this network may serve: reuse.py) as the network's own,
        writing from now on into `workdir`; nothing in the nodes changes here."""
        self.cfg, self.workdir = cfg, workdir
        self.plane.workdir = workdir
        self.plane.switching = dict(cfg.data["switching"])
        self.link_conditions = cfg.link_conditions()
        workdir.mkdir(parents=True, exist_ok=True)

    def stop(self) -> None:
        """Idempotent teardown in reverse start order; never raises."""
        with contextlib.suppress(NetworkError):
            self.captures.stop()
        self.end_tracked()
        with contextlib.suppress(Exception):
            self.plane.stop()
        if self.mininet is not None:
            with contextlib.suppress(Exception):
                self.mininet.stop()
            self.mininet = None
        sweep(os.getpid())
        self.host_cpu.remove()
        os.environ.pop(OWNER_ENV, None)
        with contextlib.suppress(OSError):
            restore_allowed_cc(self._cc_restore)
        self._cc_restore = None

    # ---- running things in nodes -------------------------------------------------
    def node(self, name: str) -> NodeShell:
        if self.mininet is None:
            raise NetworkError("the network is not running")
        return self.mininet[name]

    def cmd(self, name: str, argv: list[str], check: bool = True) -> str:
        out = self.node(name).cmd(shlex.join(argv) + " 2>&1; echo __rc=$?")
        body, _, rc = out.rpartition("__rc=")
        if check and rc.strip() != "0":
            raise NetworkError(f"{name}: `{shlex.join(argv)}` failed (exit {rc.strip()}): "
                               f"{body.strip()[-800:]}")
        return body

    def run_scripts(self, label: str, commands: dict[str, list[list[str]]]) -> None:
        """Run each node's commands as one node script (`fabric/nodescript.py`), all
        nodes at once; files go to <workdir>/nodes/<node>.<label>.*."""
        scripts = []
        for name, cmds in commands.items():
            stem = self.workdir / "nodes" / f"{name}.{label}"
            rendered = render(cmds, str(stem), f"{name} {label}")
            scripts.append((name, self.node(name), Path(f"{stem}.sh"), rendered))
        try:
            run_scripts(scripts)
        except ScriptError as exc:
            raise NetworkError(str(exc)) from exc

    def popen(self, name: str, argv: list[str], **kw: Any) -> subprocess.Popen[str]:
        """Start a process in node `name`'s namespace; the network stops it at teardown."""
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        proc = self.node(name).popen(argv, text=True, **kw)
        self.host_cpu.attach(name, proc.pid)
        self.procs.append(proc)
        return proc

    def end(self, proc: subprocess.Popen[Any]) -> None:
        """Stop one process started with `popen` (terminate, then kill)."""
        terminate(proc)
        if proc in self.procs:
            self.procs.remove(proc)

    def end_tracked(self) -> None:
        """Stop every process started with `popen` or `transfer_here`."""
        for proc in self.procs:
            terminate(proc)
        self.procs.clear()

    def transfer_here(self, args: list[str], **kw: Any) -> subprocess.Popen[str]:
        """Run the transfer tool in this kernel's own namespace (it enters the nodes'
        namespaces itself: `serve --namespace`); stopped with the network, as `popen`."""
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        proc = subprocess.Popen([sys.executable, "-S", "-u", str(TRANSFER_TOOL), *args],
                                text=True, **kw)
        self.procs.append(proc)
        return proc

    def transfer(self, name: str, args: list[str], **kw: Any) -> subprocess.Popen[str]:
        """Run the transfer tool (`experiments/traffic/transfer.py`) inside node `name`.

        It uses only the standard library, so it starts as a script with `-S`: skipping
        site-packages saves about a fifth of each start, paid once per transfer.
        """
        return self.popen(name, [sys.executable, "-S", "-u", str(TRANSFER_TOOL), *args], **kw)

    # ---- measurements ------------------------------------------------------------
    def counters(self, switch: str) -> dict[str, Any]:
        """The switch's port counters, as its data plane reads them (the nftables and
        p4-ebpf planes: the namespace's interfaces, read from /proc without a process)."""
        return self.counters_of([switch])[switch]

    def counters_of(self, switches: list[str]) -> dict[str, dict[str, Any]]:
        """Switch -> `counters` of each of `switches`, read at once where the plane can
        (bmv2: one CLI process per switch, all started together)."""
        try:
            return dict(self.plane.ports_counters(list(switches)))
        except OSError as exc:
            raise NetworkError(f"{', '.join(switches)}: cannot read their interface counters: "
                               f"{exc}") from exc
        except DataPlaneError as exc:
            raise NetworkError(str(exc)) from exc

    def wait_quiet(self, nodes: list[str] | None = None, quiet_s: float = 0.3,
                   timeout_s: float = 10.0) -> bool:
        """Wait until the nodes' packet counters stop moving (closing handshakes done).

        Returns False when traffic still flowed after timeout_s."""
        names = nodes or self.topo.switches

        def snapshot() -> dict[str, tuple[int, int]]:
            return {f"{n}:{i}": (c.rx_packets, c.tx_packets)
                    for n, ports in self.counters_of(names).items() for i, c in ports.items()}

        deadline = time.monotonic() + timeout_s
        last = snapshot()
        while time.monotonic() < deadline:
            time.sleep(quiet_s)
            now = snapshot()
            if now == last:
                return True
            last = now
        return False

    def ping_all(self, timeout_s: float = 2.0) -> list[str]:
        """The reachability check (`fabric/reach.py`): echoes between hosts until every
        host answered and every link carried an answered echo both ways; what failed
        ([] when nothing did). The echoes are sent from this process through a raw
        socket in each host's namespace; which links they crossed is read from the
        switches' port counters. Its figures stay in `reach` (the manifest's)."""
        hosts = self.topo.hosts
        self.reach = check_reach(
            self.topo, {h: int(self.node(h).pid) for h in hosts},
            {h: self.topo.nodes[h].address for h in hosts},
            lambda: {s: {i: (c.rx_packets, c.tx_packets) for i, c in ports.items()}
                     for s, ports in self.counters_of(self.topo.switches).items()},
            timeout_s, self.cfg.seed)
        log.info("reachability: %d echoes in %d round(s) (+%d aimed), %d links both ways",
                 self.reach.echoes, self.reach.rounds, self.reach.topup_rounds,
                 self.reach.links)
        return self.reach.problems()
