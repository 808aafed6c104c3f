"""The running network: Mininet namespaces for every node of the topology object.

`Network` is a context manager. `start()` creates the nodes and links, shapes every link,
configures hosts (addresses, routes, TCP/MPTCP) and hands the switches to the data
plane; `stop()` (always reached, also on Ctrl-C) ends every process the lab started,
stops Mininet and sweeps anything still carrying this lab's marker. Every process the
lab starts inherits PATHDIV_OWNER=<owner pid>, which is how `pathdiv clean` finds the
leftovers of a killed run and nothing else.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import resource
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pathdiv.experiments.config.load import Config
from pathdiv.experiments.dataplane.base import DataPlane, DataPlaneError
from pathdiv.experiments.fabric.conditions import node_commands, program_queues
from pathdiv.experiments.fabric.cpuacct import HostCgroups
from pathdiv.experiments.fabric.environment import allow_cc, restore_allowed_cc, virtual_clock
from pathdiv.experiments.fabric.hostsetup import HostSpec, host_commands
from pathdiv.experiments.fabric.lifecycle import StartStop
from pathdiv.experiments.fabric.linkcap import (
    LinkcapError,
    LinkCapture,
    build_linkcap,
    choose_tool,
    linkcap_argv,
    parse_report,
)
from pathdiv.experiments.fabric.netstate import (
    REPAIRABLE,
    SWITCH_SYSCTL_KEYS,
    NodeState,
    host_spec,
    host_sysctl_keys,
    ip_batch,
    parse_snapshot,
    parse_tcp,
    problems,
    reset_host_commands,
    section,
    snapshot_script,
    unrepairable,
    variant_state,
)
from pathdiv.experiments.fabric.nftlib import Nft, NftError
from pathdiv.experiments.fabric.nodescript import ScriptError, failure_message, render, run_scripts
from pathdiv.experiments.fabric.reach import ping_pairs
from pathdiv.experiments.fabric.rtnl import RouteSocket
from pathdiv.experiments.fabric.veths import RecordedLink, veth_batch
from pathdiv.kernels.processes import OWNER_ENV, owner_mark, sweep
from pathdiv.topologies.forwarding import forwarding_tables

# Run by path (standard library only), so it needs no installed package in the node.
# libpcap's block timeout as tcpdump sets it is 1 s, and the kernel retires a block that
# was opened during one timer period only at the next: 2 periods plus a margin.
CAPTURE_SETTLE_S = 2.2
TRANSFER_TOOL = Path(__file__).resolve().parents[1] / "traffic" / "transfer.py"

log = logging.getLogger("pathdiv")


class NetworkError(RuntimeError):
    """The network could not be built or a node command failed."""


class NetworkDirty(NetworkError):
    """After a reset the network still differs from a clean one (the message says how)."""


# Sockets other than TIME_WAIT (orphans closing their connection) get this long to go
# after a run's processes ended; on the virtual clock the wait costs no wall time.
SOCKETS_GONE_S = 10.0
# On the virtual clock a reset waits until the last run's TIME_WAIT sockets are gone
# (TCP keeps them 60 s): waiting costs no wall time there, and a network built afresh
# has none (they would shift the next run's port choices and timers).
TIME_WAIT_GONE_S = 65.0
TIME_WAIT_POLL_S = 0.5  # past a timer's expiry, the socket's removal may take a moment


class Network(StartStop):
    """One emulated network built from `cfg.topology()` with the given data plane."""

    def __init__(self, cfg: Config, dataplane: type[DataPlane], workdir: Path) -> None:
        self.cfg = cfg
        self.topo = cfg.topology()
        self.tables = forwarding_tables(self.topo, cfg.seed)
        self.workdir = workdir
        self.dp = dataplane(self.topo, self.tables, workdir)
        self.dp.switching = dict(cfg.data["switching"])
        self.conditions = cfg.conditions()  # per direction; events change it
        # ECN marking: in the switch program (bmv2) or in the switches' egress qdiscs
        self.dp.set_ecn(cfg.ecn_threshold_pkts, program_queues(self.topo, self.conditions))
        self.qdisc_ecn_pkts = None if self.dp.marks_in_program else cfg.ecn_threshold_pkts
        self.net: Any = None
        self.procs: list[subprocess.Popen[str]] = []
        self.captures: list[tuple[str, subprocess.Popen[str], Path]] = []
        self.linkcap: subprocess.Popen[str] | None = None  # every link's capture at once
        self._nft_reader: Nft | None = None
        self._nft_opened = False  # libnftables tried (the reader stays None without it)
        # CPU time per host: a cgroup each for its shell and what pathdiv starts in it
        self.host_cpu = HostCgroups(list(self.topo.hosts))
        self.build_s = 0.0
        self._cc_restore: str | None = None
        # one network for several runs (`reset_for`): a fresh namespace's values, every
        # node's state after the build, each mode's switch tables as first loaded
        self.defaults: dict[str, Any] = {}
        self.reference: dict[str, NodeState] = {}
        self.mode_tables: dict[tuple[str, str], dict[str, Any]] = {}

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
        self.net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False)
        with few_descriptors(len(self.topo.nodes)):
            for name in self.topo.switches:
                self.net.addSwitch(name, cls=self.dp.switch_class(), inNamespace=True)
            for name in self.topo.hosts:
                self.net.addHost(name, ip=None)
        if self.host_cpu.create():
            for name in self.topo.hosts:
                self.host_cpu.attach(name, self.net[name].pid)
        self._add_links()
        spec = HostSpec(self.cfg.transport, self.cfg.subflows, self.cfg.cc, self.cfg.scheduler,
                        self.cfg.subflow_paths, self.cfg.reordering,
                        self.cfg.reorder_hold_us, ecn=self.cfg.ecn_threshold_pkts is not None)
        self.run_scripts("setup", {
            name: (host_commands(self.topo, name, spec) if name in self.topo.hosts else [])
            + self._link_commands(name)
            for name in self.topo.nodes
        })
        self.dp.start(self.net, self.cfg.mode, self.cfg.spray)
        self.build_s = time.monotonic() - t0
        log.info("network up: k=%d, %d nodes, %d links, %s data plane, %s mode (%.1f s)",
                 self.topo.k, len(self.topo.nodes), len(self.topo.links), self.dp.name,
                 self.cfg.mode, self.build_s)

    def _add_links(self) -> None:
        """Create every veth pair with one `ip -batch` (ends straight into the nodes'
        namespaces), then record them as Mininet links (see `pathdiv.experiments.fabric.veths`)."""

        pids = {name: self.net[name].pid for name in self.topo.nodes}
        path = self.workdir / "nodes" / "links.ip"
        path.parent.mkdir(parents=True, exist_ok=True)
        batch = veth_batch(self.topo, pids)
        path.write_text(batch)
        argv = ["ip", "-batch", str(path)]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            raise NetworkError(failure_message("root namespace", done.stderr, str(done.returncode),
                                           {str(path): batch}, shlex.join(argv)))
        for link in self.topo.links:
            self.net.addLink(
                link.a.node, link.b.node, port1=link.a.number, port2=link.b.number,
                intfName1=link.a.intf, intfName2=link.b.intf,
                addr1=self.topo.mac(link.a), addr2=self.topo.mac(link.b), cls=RecordedLink,
            )

    def _link_commands(self, node: str) -> list[list[str]]:
        return node_commands(self.topo, node, self.conditions, self.qdisc_ecn_pkts)

    def stop(self) -> None:
        """Idempotent teardown in reverse start order; never raises."""
        with contextlib.suppress(NetworkError):
            self.stop_capture()
        for proc in self.procs:
            _terminate(proc)
        self.procs.clear()
        with contextlib.suppress(Exception):
            self.dp.stop()
        if self.net is not None:
            with contextlib.suppress(Exception):
                self.net.stop()
            self.net = None
        sweep(os.getpid())
        self.host_cpu.remove()
        os.environ.pop(OWNER_ENV, None)
        with contextlib.suppress(OSError):
            restore_allowed_cc(self._cc_restore)
        self._cc_restore = None

    # ---- one network for several runs (pure parts: fabric/netstate.py) ----------
    def snapshot(self, names: list[str] | None = None, label: str = "snapshot",
                 as_host: bool = False) -> dict[str, NodeState]:
        """Every (or each named) node's state, read in all nodes at once: one execution
        per node (`ip -j -batch`), sysctls and sockets with shell builtins, and from this
        process, while the shells read, the qdiscs and classes (rtnetlink,
        fabric/rtnl.py) and the nftables ruleset (fabric/nftlib.py; where libnftables
        cannot be loaded, the node runs `nft`). `as_host` reads what a host's snapshot
        reads also in a switch."""
        names = list(self.topo.nodes) if names is None else names
        folder = self.workdir / "nodes"
        folder.mkdir(parents=True, exist_ok=True)
        ecn = self.cfg.ecn_threshold_pkts is not None
        if not self._nft_opened:
            self._nft_reader, self._nft_opened = Nft.open(), True
        reader = self._nft_reader
        sent = []
        for name in names:
            is_host = as_host or not self.topo.nodes[name].is_switch
            intfs = [lk.port_of(name).intf for lk in self.topo.links_of(name)]
            ip_file = folder / f"{name}.{label}.ip"
            ip_file.write_text(ip_batch(is_host))
            keys = host_sysctl_keys(intfs[0], self.cfg.cc, ecn) if is_host \
                else list(SWITCH_SYSCTL_KEYS)
            node = self.node(name)
            node.sendCmd(snapshot_script(str(ip_file), keys, nft=reader is None))
            sent.append((name, node, is_host, intfs))
        apart = {}
        for name, node, _, intfs in sent:  # while the nodes' shells read the rest
            try:
                with RouteSocket(node.pid) as rtnl:
                    text = section("tc", rtnl.tc(intfs))
            except OSError as exc:
                text = section("tc", f"rtnetlink: {exc}")  # parse_snapshot reports it
            if reader is not None:
                try:
                    text += section("nft", reader.ruleset(node.pid))
                except NftError as exc:
                    text += section("nft", str(exc))
            apart[name] = text
        return {name: parse_snapshot(node.waitOutput() + apart[name], is_host)
                for name, node, is_host, _ in sent}

    def leftover_processes(self) -> dict[str, list[str]]:
        """node -> 'pid comm' of every process in its namespace but its shell."""
        shells = {self.node(n).pid: n for n in self.topo.nodes}
        owner: dict[str, str] = {}
        for pid, name in shells.items():
            with contextlib.suppress(OSError):
                owner[os.readlink(f"/proc/{pid}/ns/net")] = name
        out: dict[str, list[str]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in shells:
                continue
            try:
                ns = os.readlink(f"/proc/{entry}/ns/net")
                comm = Path(f"/proc/{entry}/comm").read_text().strip()
            except OSError:
                continue  # gone, or a zombie
            if ns in owner:
                out.setdefault(owner[ns], []).append(f"{entry} {comm}")
        return out

    def end_processes(self) -> dict[str, list[str]]:
        """End what the last run started (tracked ones, then anything else left in a
        node); return what had to be killed untracked."""
        for proc in self.procs:
            _terminate(proc)
        self.procs.clear()
        left = self.leftover_processes()
        for items in left.values():
            for item in items:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(item.split()[0]), signal.SIGKILL)
        if left:
            deadline = time.monotonic() + 3
            while self.leftover_processes() and time.monotonic() < deadline:
                time.sleep(0.05)
        return left

    def expected(self, name: str) -> dict[str, Any]:
        """`name`'s sections a clean node has under the current config's variant."""
        table = self.tables.get(name)
        return variant_state(self.topo, name, host_spec(self.cfg), self.cfg.mode,
                             self.defaults, has_up=bool(table and table.up),
                             plane=self.dp.name)

    def take_reference(self) -> list[str]:
        """Snapshot every node of the network just built: what every reset is checked
        against. Returns what of it differs from the variant's expectations (none, when
        netstate's model of a clean node is right)."""
        # a fresh namespace's values of what host variants set: a switch's, which sets
        # none of them (what a reset restores when the next variant does not set a key)
        core = self.topo.switches[-1]
        fresh = self.snapshot([core], "fresh", as_host=True)[core]
        self.defaults = {"sysctl": dict(fresh.sections.get("sysctl", {})),
                         "mptcp_limits": fresh.sections.get("mptcp_limits", {})}
        self.reference = self.snapshot(label="reference")
        self.mode_tables = {(self.dp.mode, self.dp.spray): {
            n: s.sections.get("nft_pathdiv") for n, s in self.reference.items()}}
        found = {n: problems(s, s, self.expected(n)) for n, s in self.reference.items()}
        return unrepairable({n: p for n, p in found.items() if p})

    def check(self, names: list[str] | None = None) -> dict[str, dict[str, list[str]]]:
        """node -> section -> how it differs from a clean node (only nodes that differ)."""
        states = self.snapshot(names)
        procs = self.leftover_processes()
        tables = self.mode_tables.setdefault((self.dp.mode, self.dp.spray), {
            n: s.sections.get("nft_pathdiv") for n, s in states.items()})
        out = {}
        for name, state in states.items():
            found = problems(self.reference[name], state, self.expected(name),
                             procs.get(name, []))
            if name in tables and state.sections.get("nft_pathdiv") != tables[name]:
                found["nft_pathdiv"] = ["the mode's nftables table differs from the one "
                                        f"first loaded for mode {self.dp.mode}"]
            if found:
                out[name] = found
        for name, what in self.dp.state_problems().items():  # e.g. p4-ebpf's maps
            if names is None or name in names:
                out.setdefault(name, {})["program"] = what
        return out

    def reset_for(self, cfg: Config, workdir: Path) -> dict[str, Any]:
        """Make this network the clean network of `cfg` (a config with the same
        `netstate.reuse_key`) for a run writing into `workdir`, and verify it.

        Raises NetworkDirty naming what still differs from a clean network. Returns what
        was done, for the manifest."""
        if not self.reference:
            raise NetworkDirty("no reference state was taken after the build")
        t0 = time.monotonic()
        self.cfg, self.workdir = cfg, workdir
        self.dp.workdir = workdir
        self.dp.switching = dict(cfg.data["switching"])
        self.conditions = cfg.conditions()
        workdir.mkdir(parents=True, exist_ok=True)
        report: dict[str, Any] = {"killed": self.end_processes()}
        spec = host_spec(cfg)
        self.run_scripts("reset", {h: reset_host_commands(self.topo, h, spec, self.defaults)
                                   for h in self.topo.hosts})
        if (self.dp.mode, self.dp.spray) != (cfg.mode, cfg.spray):
            self.dp.set_mode(cfg.mode, cfg.spray)
        if virtual_clock():
            report["time_wait_left"] = self.wait_time_wait(TIME_WAIT_GONE_S)
        found = self.check()
        report["found"] = {n: sorted(p) for n, p in found.items()}
        if found and not unrepairable(found):
            self._repair(found)
            found = self.check(sorted(found))
        if found:
            raise NetworkDirty("; ".join(unrepairable(found)[:5]
                                         or [f"{n}: {', '.join(p)}" for n, p in found.items()]))
        report["reset_s"] = round(time.monotonic() - t0, 3)
        return report

    def time_wait(self) -> tuple[int, float]:
        """TIME_WAIT sockets in the hosts now (their /proc/<shell>/net/tcp, read here),
        and the seconds until the last one's timer expires."""
        count, expiry = 0, 0.0
        for host in self.topo.hosts:
            for table in ("tcp", "tcp6"):
                with contextlib.suppress(OSError):
                    text = Path(f"/proc/{self.node(host).pid}/net/{table}").read_text()
                    table = parse_tcp(text.splitlines())
                    count += table.time_wait
                    expiry = max(expiry, table.time_wait_expiry_s)
        return count, expiry

    def wait_time_wait(self, limit_s: float) -> int:
        """Sleep until the hosts hold no TIME_WAIT socket, at most `limit_s` (guest
        seconds); return how many are left. It sleeps until the last socket's timer
        expires rather than polling every second: each poll reads 32 files, which costs
        wall time even where the sleep does not."""
        deadline = time.monotonic() + limit_s
        left, expiry = self.time_wait()
        while left and time.monotonic() < deadline:
            time.sleep(max(TIME_WAIT_POLL_S, min(expiry + TIME_WAIT_POLL_S,
                                                 deadline - time.monotonic())))
            left, expiry = self.time_wait()
        return left

    def _repair(self, found: dict[str, dict[str, list[str]]]) -> None:
        """Set again what a reset may repair (REPAIRABLE, conntrack, sockets closing)."""
        links = [n for n, p in found.items() if set(p) & set(REPAIRABLE)]
        for name in links:
            dels = [f"tc qdisc del dev {lk.port_of(name).intf} root 2>/dev/null"
                    for lk in self.topo.links_of(name)]
            self.node(name).cmd("; ".join([*dels, "nft delete table netdev "
                                           "pathdiv_conditions 2>/dev/null", "true"]))
        if links:
            self.run_scripts("repair", {n: self._link_commands(n) for n in links})
        for name in [n for n, p in found.items() if "conntrack" in p]:
            self.cmd(name, ["conntrack", "-F"], check=False)
        waiting = [n for n, p in found.items() if "tcp" in p]
        deadline = time.monotonic() + SOCKETS_GONE_S
        while waiting and time.monotonic() < deadline:
            time.sleep(0.5)
            states = self.snapshot(waiting, "sockets")
            waiting = [n for n, s in states.items() if s.sections.get("tcp")]

    # ---- running things in nodes -------------------------------------------------
    def node(self, name: str) -> Any:
        if self.net is None:
            raise NetworkError("the network is not running")
        return self.net[name]

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
        """Start a process in node `name`'s namespace; the lab stops it at teardown."""
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        proc = self.node(name).popen(argv, text=True, **kw)
        self.host_cpu.attach(name, proc.pid)
        self.procs.append(proc)
        return proc

    def end(self, proc: subprocess.Popen[Any]) -> None:
        """Stop one process started with `popen` (terminate, then kill)."""
        _terminate(proc)
        if proc in self.procs:
            self.procs.remove(proc)

    def transfer_here(self, args: list[str], **kw: Any) -> subprocess.Popen[str]:
        """Run the transfer tool in this kernel's own namespace (it enters the nodes'
        namespaces itself: `serve --namespace`); stopped with the network, as `popen`."""
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        proc = subprocess.Popen([sys.executable, "-S", "-u", str(TRANSFER_TOOL), *args],
                                text=True, **kw)
        self.procs.append(proc)
        return proc

    def transfer(self, name: str, args: list[str], **kw: Any) -> subprocess.Popen:
        """Run the transfer tool (`experiments/traffic/transfer.py`) inside node `name`.

        It uses only the standard library, so it starts as a script with `-S`: skipping
        site-packages saves about a fifth of each start, paid once per transfer.
        """
        return self.popen(name, [sys.executable, "-S", "-u", str(TRANSFER_TOOL), *args], **kw)

    # ---- captures ----------------------------------------------------------------
    def start_capture(self, outdir: Path, snaplen: int, budget_mb: float,
                      caps: Mapping[str, int] | None = None, tool: str = "auto"
                      ) -> dict[str, Any]:
        """Capture every link's upper-end interface (both directions), headers only:
        one linkcap process for all links, or one tcpdump per link (`tool`, as
        `capture.tool`: fabric/linkcap.py).

        `caps` gives each file its packet cap by interface (sized from the plan's need:
        pathdiv.experiments.plan.budget); without it every file gets an equal share of
        budget_mb (snaplen + 16 bytes of record header per packet). Either way a run
        cannot fill the disk.
        """
        outdir.mkdir(parents=True, exist_ok=True)
        per_file = int(budget_mb * 1_000_000) // max(1, len(self.topo.links))
        equal = max(1000, per_file // (snaplen + 16))
        limits = {link.b.intf: (caps or {}).get(link.b.intf, equal) for link in self.topo.links}
        figures = {"snaplen": snaplen, "budget_mb": budget_mb,
                   "max_packets_per_file": max(limits.values()),
                   "max_packets": dict(sorted(limits.items()))}
        chosen, binary, why_not = capture_tool(tool)
        if chosen == "linkcap" and binary is not None:
            links = [LinkCapture(f"/proc/{self.node(link.b.node).pid}/ns/net", link.b.intf,
                                 limits[link.b.intf], outdir / f"{link.b.intf}.pcap")
                     for link in self.topo.links]
            argv = linkcap_argv(binary, snaplen, CAPTURE_BUFFER_KB, links)
            # in this process's namespace: it opens each link's socket in the link's own
            self.linkcap = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.PIPE, text=True)
            wait_for_line(self.linkcap, self.linkcap.stderr, "listening on", 15,
                          "the link captures (linkcap)")
            return {"files": len(links), "tool": "linkcap", "processes": 1, **figures}
        for link in self.topo.links:
            max_packets = limits[link.b.intf]
            intf = link.b.intf
            path = outdir / f"{intf}.pcap"
            # Buffered on both sides (no -U, no --immediate-mode): the kernel hands
            # packets over in blocks and tcpdump writes whole buffers, so a packet costs
            # no wake-up or write of its own (in UML each is a host context switch).
            # stop_capture waits out the block timeout so that nothing is left behind.
            # tcpdump writes the file through stdio, in pieces of the file's block size
            # (4 KB): with coreutils' stdbuf library preloaded it writes its standard
            # output through a CAPTURE_WRITE_BYTES buffer instead (one write per ~2,000
            # headers, flushed when tcpdump exits: its -c cap or the stop's SIGTERM).
            # The library, not the stdbuf program: that would be one more process start.
            argv = ["tcpdump", "-n", "-i", intf, "-s", str(snaplen), "-B",
                    str(CAPTURE_BUFFER_KB),
                    "-Z", "root", "-c", str(max_packets)]
            if STDBUF_LIBRARY.exists():
                with path.open("wb") as out:
                    proc = self.node(link.b.node).popen(
                        [*argv, "-w", "-", "tcp or icmp"], text=True, stdout=out,
                        stderr=subprocess.PIPE, env=capture_env(os.environ))
            else:
                proc = self.node(link.b.node).popen(
                    [*argv, "-w", str(path), "tcp or icmp"], text=True,
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            self.captures.append((intf, proc, path))
        for intf, proc, _ in self.captures:
            wait_for_line(proc, proc.stderr, "listening on", 15,
                          f"tcpdump on {intf}")
        why = {"linkcap_refused": why_not} if why_not else {}
        return {"files": len(self.captures), "tool": "tcpdump",
                "processes": len(self.captures), **why, **figures}

    def stop_capture(self) -> dict[str, Any]:
        """Stop the captures (linkcap, or every tcpdump) and sum what the kernel dropped;
        the files that reached their packet cap. NetworkError when linkcap failed.

        The kernel hands a block of packets to the capture when the block is full or
        after its timeout (1 s, both programs); a stop signal before that loses the
        block. So the stop
        first waits CAPTURE_SETTLE_S after the last packet (the caller's wait_quiet);
        on the virtual clock that wait costs no wall time.
        """
        stats: dict[str, Any] = {"dropped_by_kernel": 0, "files_full": []}
        if self.captures or self.linkcap is not None:
            time.sleep(CAPTURE_SETTLE_S)
        if self.linkcap is not None:
            proc, self.linkcap = self.linkcap, None
            err = _stop_reading(proc, 30)
            report = parse_report(err)
            if proc.returncode != 0 or report["errors"]:
                raise NetworkError(f"the link captures (linkcap) failed (exit "
                                   f"{proc.returncode}): "
                                   f"{' | '.join(report['errors']) or err[-500:]}")
            stats["dropped_by_kernel"] = report["dropped_by_kernel"]
            stats["files_full"] = report["files_full"]
        for intf, proc, _ in self.captures:
            if proc.poll() is not None and proc.returncode == 0:
                stats["files_full"].append(intf)  # exited by itself: hit its -c cap
            for line in _stop_reading(proc, 10).splitlines():
                if "dropped by kernel" in line:
                    stats["dropped_by_kernel"] += int(line.split()[0])
        self.captures.clear()
        return stats

    # ---- measurements ------------------------------------------------------------
    def counters(self, switch: str) -> dict[str, Any]:
        """The switch's port counters, as its data plane reads them (the nftables and
        p4-ebpf planes: the namespace's interfaces, read from /proc without a process)."""
        try:
            return self.dp.port_counters(switch)
        except OSError as exc:
            raise NetworkError(f"{switch}: cannot read its interface counters: {exc}") from exc
        except DataPlaneError as exc:
            raise NetworkError(str(exc)) from exc

    def wait_quiet(self, nodes: list[str] | None = None, quiet_s: float = 0.3,
                   timeout_s: float = 10.0) -> bool:
        """Wait until the nodes' packet counters stop moving (closing handshakes done).

        Returns False when traffic still flowed after timeout_s."""
        names = nodes or self.topo.switches

        def snapshot() -> dict[str, tuple[int, int]]:
            return {f"{n}:{i}": (c.rx_packets, c.tx_packets)
                    for n in names for i, c in self.counters(n).items()}

        deadline = time.monotonic() + timeout_s
        last = snapshot()
        while time.monotonic() < deadline:
            time.sleep(quiet_s)
            now = snapshot()
            if now == last:
                return True
            last = now
        return False

    def ping_all(self, timeout_s: float = 2.0) -> list[tuple[str, str]]:
        """Ping every ordered host pair; return the pairs that never answered (a lossy
        link may lose an echo: a pair is asked up to five more times). The echoes are
        sent from this process through a raw socket in each host's namespace
        (`fabric/reach.py`), not by a `ping` per pair."""
        hosts = self.topo.hosts
        return ping_pairs({h: int(self.node(h).pid) for h in hosts},
                          {h: self.topo.nodes[h].address for h in hosts}, timeout_s)


MPTCP_PARAMETERS = Path("/sys/module/mptcp/parameters")


def set_mptcp_d_parameters(alpha: float, beta: float) -> None:
    """hosts.mptcp_d_alpha/beta into the lab kernel's mptcp-d (module parameters in %;
    one kernel for every host of the network, so one setting)."""
    for name, value in (("mptcp_d_alpha_pct", alpha), ("mptcp_d_beta_pct", beta)):
        (MPTCP_PARAMETERS / name).write_text(f"{round(value * 100)}\n")


CAPTURE_WRITE_BYTES = 256 * 1024  # tcpdump's output buffer (start_capture)
CAPTURE_BUFFER_KB = 4096  # the kernel's buffer for each link's capture (tcpdump -B)


@functools.cache
def _built_linkcap() -> tuple[Path | None, str]:
    """linkcap's program, built on first use where it can be (not in the lab kernel's
    guest: the host built it before the boot), or None and why not; once per process."""
    try:
        return build_linkcap(), ""
    except LinkcapError as exc:
        log.info("captures: %s", exc)
        return None, str(exc)


def capture_tool(wanted: str) -> tuple[str, Path | None, str]:
    """The tool for `capture.tool: wanted` (fabric/linkcap.py), linkcap's program when
    it is built, and why it is not (NetworkError when linkcap is insisted on)."""
    if wanted == "tcpdump":
        return "tcpdump", None, ""
    built, why_not = _built_linkcap()
    try:
        return choose_tool(wanted, built, why_not), built, why_not
    except LinkcapError as exc:
        raise NetworkError(str(exc)) from exc


STDBUF_LIBRARY = Path("/usr/libexec/coreutils/libstdbuf.so")  # what `stdbuf` preloads


def capture_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of a capture: stdbuf's library preloaded, standard output
    buffered by CAPTURE_WRITE_BYTES (what `stdbuf -o N` sets before it executes)."""
    preload = " ".join(p for p in (str(STDBUF_LIBRARY), environ.get("LD_PRELOAD", "")) if p)
    return {**environ, "LD_PRELOAD": preload, "_STDBUF_O": str(CAPTURE_WRITE_BYTES)}


def shell_fd_limit(soft: int, highest_fd: int, nodes: int) -> int | None:
    """The open-file limit to start `nodes` node shells under, or None to keep `soft`.

    Mininet raises the soft limit to 16384, and `mnexec -c`, which starts every node's
    shell, closes each descriptor number below the limit: 16384 system calls per node,
    about 1 s in the lab kernel (User-Mode Linux; ~0.2 s per 16384 on the host kernel).
    A shell needs only the descriptors this process holds while the shells start (each
    shell adds a pty pair here), so the limit is that with room to spare, at least 1024.
    """
    need = max(1024, highest_fd + 1 + 4 * nodes + 64)
    return need if need < soft else None


@contextlib.contextmanager
def few_descriptors(nodes: int) -> Iterator[None]:
    """Start node shells under `shell_fd_limit` (they and their commands inherit it; the
    hard limit is kept, so a command may raise it), then restore this process's limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    highest = max((int(fd) for fd in os.listdir("/proc/self/fd") if fd.isdigit()),
                  default=2)
    limit = shell_fd_limit(soft, highest, nodes)
    if limit is not None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        yield
    finally:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def wait_for_line(
    proc: subprocess.Popen[str], stream: Any, marker: str, timeout_s: float, what: str
) -> str:
    """Read `stream` until a line containing `marker`; fail with what was read.

    Waits with poll(), not select(): a k=8 network holds more than 1024 descriptors
    (a capture per link, a server per host), beyond select()'s FD_SETSIZE."""
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    poller = select.poll()
    poller.register(stream, select.POLLIN)
    while time.monotonic() < deadline:
        ready = poller.poll(max(0.0, deadline - time.monotonic()) * 1000)
        if not ready:
            break
        line = stream.readline()
        if not line:
            break
        seen.append(line.rstrip())
        if marker in line:
            return line
    rc = proc.poll()
    raise NetworkError(f"{what} did not become ready within {timeout_s:g} s"
                   f"{'' if rc is None else f' (exited {rc})'}; it said: "
                   f"{' | '.join(seen[-5:]) or 'nothing'}")


def _stop_reading(proc: subprocess.Popen[str], timeout_s: float) -> str:
    """SIGTERM to a capture, then what it printed on stderr (killed after timeout_s).
    SIGTERM, not SIGINT: both programs flush their files on either, and a script's
    `pathdiv ... &` starts them with SIGINT ignored."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err or ""


def _terminate(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=3)
