"""One network for several runs: the state read right after the build (the reference),
the check of every node against it, and the reset that makes a used network the clean
network of the next run's config (pure parts: fabric/netstate.py; which network a run
gets: execute/keeper.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

from pathdiv.experiments.config.load import Config
from pathdiv.experiments.fabric.environment import virtual_clock
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
from pathdiv.experiments.fabric.rtnl import RouteSocket
from pathdiv.experiments.network.network import Network
from pathdiv.experiments.running import NetworkError

# Sockets other than TIME_WAIT (orphans closing their connection) get this long to go
# after a run's processes ended; on the virtual clock the wait costs no wall time.
SOCKETS_GONE_S = 10.0
# On the virtual clock a reset waits until the last run's TIME_WAIT sockets are gone
# (TCP keeps them 60 s): waiting costs no wall time there, and a network built afresh
# has none (they would shift the next run's port choices and timers).
TIME_WAIT_GONE_S = 65.0
TIME_WAIT_POLL_S = 0.5  # past a timer's expiry, the socket's removal may take a moment


class NetworkDirty(NetworkError):
    """After a reset the network still differs from a clean one (the message says how)."""


class NetworkReuse:
    """What lets `net` serve run after run: its reference state, the check, the reset."""

    def __init__(self, net: Network) -> None:
        self.net = net
        self._nft_reader: Nft | None = None
        self._nft_opened = False  # libnftables tried (the reader stays None without it)
        # a fresh namespace's values, every node's state after the build, each mode's
        # switch tables as first loaded
        self.defaults: dict[str, Any] = {}
        self.reference: dict[str, NodeState] = {}
        self.mode_tables: dict[tuple[str, str], dict[str, Any]] = {}

    def snapshot(self, names: list[str] | None = None, label: str = "snapshot",
                 as_host: bool = False) -> dict[str, NodeState]:
        """Every (or each named) node's state, read in all nodes at once: one execution
        per node (`ip -j -batch`), sysctls and sockets with shell builtins, and from this
        process, while the shells read, the qdiscs and classes (rtnetlink,
        fabric/rtnl.py) and the nftables ruleset (fabric/nftlib.py; where libnftables
        cannot be loaded, the node runs `nft`). `as_host` reads what a host's snapshot
        reads also in a switch."""
        net = self.net
        names = list(net.topo.nodes) if names is None else names
        folder = net.workdir / "nodes"
        folder.mkdir(parents=True, exist_ok=True)
        ecn = net.cfg.ecn_threshold_pkts is not None
        if not self._nft_opened:
            self._nft_reader, self._nft_opened = Nft.open(), True
        reader = self._nft_reader
        sent = []
        for name in names:
            is_host = as_host or not net.topo.nodes[name].is_switch
            intfs = [lk.port_of(name).intf for lk in net.topo.links_of(name)]
            ip_file = folder / f"{name}.{label}.ip"
            ip_file.write_text(ip_batch(is_host))
            keys = host_sysctl_keys(intfs[0], net.cfg.cc, ecn) if is_host \
                else list(SWITCH_SYSCTL_KEYS)
            node = net.node(name)
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
            # kept beside the node's batch file: what the reset was checked against, and
            # a sign of life for the lab kernel's watchdog (at k=16 these reads take
            # minutes of guest CPU in which the clock stands still)
            (folder / f"{name}.{label}.apart").write_text(text)
        return {name: parse_snapshot(node.waitOutput() + apart[name], is_host)
                for name, node, is_host, _ in sent}

    def leftover_processes(self) -> dict[str, list[str]]:
        """node -> 'pid comm' of every process in its namespace but its shell."""
        shells = {self.net.node(n).pid: n for n in self.net.topo.nodes}
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
        self.net.end_tracked()
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
        net = self.net
        return variant_state(net.topo, name, host_spec(net.cfg), self.defaults)

    def take_reference(self) -> list[str]:
        """Snapshot every node of the network just built: what every reset is checked
        against. Returns what of it differs from the variant's expectations (none, when
        netstate's model of a clean node is right)."""
        # a fresh namespace's values of what host variants set: a switch's, which sets
        # none of them (what a reset restores when the next variant does not set a key)
        core = self.net.topo.switches[-1]
        fresh = self.snapshot([core], "fresh", as_host=True)[core]
        self.defaults = {"sysctl": dict(fresh.sections.get("sysctl", {})),
                         "mptcp_limits": fresh.sections.get("mptcp_limits", {})}
        self.reference = self.snapshot(label="reference")
        plane = self.net.plane
        self.mode_tables = {(plane.mode, plane.spray): {
            n: s.sections.get("nft_pathdiv") for n, s in self.reference.items()}}
        found = {n: problems(s, s, self.expected(n)) for n, s in self.reference.items()}
        return unrepairable({n: p for n, p in found.items() if p})

    def check(self, names: list[str] | None = None) -> dict[str, dict[str, list[str]]]:
        """node -> section -> how it differs from a clean node (only nodes that differ)."""
        states = self.snapshot(names)
        procs = self.leftover_processes()
        plane = self.net.plane
        tables = self.mode_tables.setdefault((plane.mode, plane.spray), {
            n: s.sections.get("nft_pathdiv") for n, s in states.items()})
        out = {}
        for name, state in states.items():
            found = problems(self.reference[name], state, self.expected(name),
                             procs.get(name, []))
            if name in tables and state.sections.get("nft_pathdiv") != tables[name]:
                found["nft_pathdiv"] = ["the mode's nftables table differs from the one "
                                        f"first loaded for mode {plane.mode}"]
            if found:
                out[name] = found
        for name, what in plane.state_problems().items():  # e.g. p4-ebpf's maps
            if names is None or name in names:
                out.setdefault(name, {})["program"] = what
        return out

    def reset_for(self, cfg: Config, workdir: Path) -> dict[str, Any]:
        """Make the network the clean network of `cfg` (a config with the same
        `netstate.reuse_key`) for a run writing into `workdir`, and verify it.

        Raises NetworkDirty naming what still differs from a clean network. Returns what
        was done, for the manifest."""
        if not self.reference:
            raise NetworkDirty("no reference state was taken after the build")
        t0 = time.monotonic()
        net = self.net
        net.reconfigure(cfg, workdir)
        report: dict[str, Any] = {"killed": self.end_processes()}
        spec = host_spec(cfg)
        net.run_scripts("reset", {h: reset_host_commands(net.topo, h, spec, self.defaults)
                                  for h in net.topo.hosts})
        if (net.plane.mode, net.plane.spray) != (cfg.mode, cfg.spray):
            net.plane.set_mode(cfg.mode, cfg.spray)
        if virtual_clock():
            report["time_wait_left"] = self.wait_time_wait(TIME_WAIT_GONE_S)
        found = self.check()
        report["found"] = {n: sorted(p) for n, p in found.items()}
        if found and not unrepairable(found):
            self.repair(found)
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
        for host in self.net.topo.hosts:
            for name in ("tcp", "tcp6"):
                with contextlib.suppress(OSError):
                    text = Path(f"/proc/{self.net.node(host).pid}/net/{name}").read_text()
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

    def repair(self, found: dict[str, dict[str, list[str]]]) -> None:
        """Set again what a reset may repair (REPAIRABLE, conntrack, sockets closing)."""
        net = self.net
        links = [n for n, p in found.items() if set(p) & set(REPAIRABLE)]
        for name in links:
            dels = [f"tc qdisc del dev {lk.port_of(name).intf} root 2>/dev/null"
                    for lk in net.topo.links_of(name)]
            net.node(name).cmd("; ".join([*dels, "nft delete table netdev "
                                          "pathdiv_conditions 2>/dev/null", "true"]))
        if links:
            net.run_scripts("repair", {n: net.link_commands(n) for n in links})
        for name in [n for n, p in found.items() if "conntrack" in p]:
            net.cmd(name, ["conntrack", "-F"], check=False)
        waiting = [n for n, p in found.items() if "tcp" in p]
        deadline = time.monotonic() + SOCKETS_GONE_S
        while waiting and time.monotonic() < deadline:
            time.sleep(0.5)
            states = self.snapshot(waiting, "sockets")
            waiting = [n for n, s in states.items() if s.sections.get("tcp")]
