"""The P4 data plane at kernel cost (`dataplane: p4-ebpf`): PSA programs attached at tc.

The same programs as the bmv2 plane (p4src/<mode>.p4, PSA top level, compiled by
p4c-ebpf; `p4ebpf/programs.py`) run as eBPF in the kernel of each switch's network
namespace: one program per switch and mode, attached at tc ingress of every port, which
parses, looks up the tables, rewrites the MACs and redirects the packet to its port
(`bpf_redirect`), where the port's egress qdiscs (shaping, RED marking) take it as on
the nftables plane. No process runs per switch and no packet leaves the kernel, so on the
lab kernel's virtual clock a P4 switch costs what a nftables-plane switch costs
(docs/p4.md), where bmv2 costs about 11x.

Per switch: the object is loaded through libbpf with its maps pinned under
/sys/fs/bpf/pathdiv/<network>/<switch>/<program>/ (one set of maps per switch), the
compiler's map initializer runs once (default actions, CRC table), the bmv2 plane's
entries are written with ifindexes for ports (`p4ebpf/entries.py`) and read back; then
one script per switch adds a clsact qdisc and two tc filters per port: the cb scrubber
(`p4ebpf/scrub.py`) and the program. That script runs in the switch's network namespace
but in pathdiv's own mount namespace (`nsenter --net`): a Mininet node has a mount
namespace of its own whose /sys is a fresh sysfs, where the BPF file system holding the
pins is not mounted. Changing mode loads the other program and
replaces the filter (`tc filter replace`); changing only the spray policy writes one
register. Port counters are the interfaces' own (the PSA programs keep none).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from mininet.node import Node

from pathdiv.experiments.config.planes import PLANES
from pathdiv.experiments.config.switching import MODES as MODE_REGISTRY
from pathdiv.experiments.dataplane.base import (
    DataPlane,
    DataPlaneError,
    PlaneImplementation,
    PortCounters,
    check_mode,
    namespace_counters,
)
from pathdiv.experiments.dataplane.p4.entries import (
    SELECT,
    EntryError,
    EntryOptions,
    port_macs,
    switch_ports,
)
from pathdiv.experiments.dataplane.p4.hashing import p4_member
from pathdiv.experiments.dataplane.p4ebpf.entries import (
    MapWrite,
    map_writes,
    psa_entries,
    register_write,
)
from pathdiv.experiments.dataplane.p4ebpf.layout import LayoutError
from pathdiv.experiments.dataplane.p4ebpf.libbpf import Libbpf, LibbpfError, Loaded
from pathdiv.experiments.dataplane.p4ebpf.programs import (
    INITIALIZER,
    MODE_PROGRAMS,
    TC_PROGRAM,
    CompiledEbpf,
    EbpfCompileError,
    compile_program,
    compile_programs,
)
from pathdiv.experiments.dataplane.p4ebpf.scrub import NAME as SCRUB_NAME
from pathdiv.experiments.dataplane.p4ebpf.scrub import clear_cb_program
from pathdiv.experiments.dataplane.p4ebpf.tools import (
    EbpfTools,
    EbpfToolsError,
    find_ebpf_tools,
    require_ebpf_tools,
)
from pathdiv.experiments.fabric.nodescript import NodeScript, failure_message, render, write

__all__ = ["IMPLEMENTATION", "EbpfDataPlane", "EbpfSwitch", "find_ebpf_tools",
           "parse_ip_links"]

NAME = "p4-ebpf"

BPFFS = Path("/sys/fs/bpf")
PIN_ROOT = BPFFS / "pathdiv"
# the map initializer is a tc program too; it runs once on any frame
INIT_FRAME = bytes(64)
SCRUB_PREF, PROGRAM_PREF = "1", "2"
_IP_LINK = re.compile(r"^(\d+):\s+([^:@\s]+)(?:@\S+)?:", re.M)


def parse_ip_links(text: str) -> dict[str, int]:
    """Interface name -> ifindex, from `ip -o link show` in one namespace."""
    return {m.group(2): int(m.group(1)) for m in _IP_LINK.finditer(text)}


def attach_commands(intf: str, scrub: Path, program: Path, first: bool) -> list[list[str]]:
    """tc commands that (re)attach a switch's program to one port (after the scrubber)."""
    cmds = []
    if first:
        cmds.append(["tc", "qdisc", "replace", "dev", intf, "clsact"])
        cmds.append(["tc", "filter", "replace", "dev", intf, "ingress", "protocol", "all",
                     "pref", SCRUB_PREF, "handle", "1", "bpf", "direct-action",
                     "object-pinned", str(scrub)])
    cmds.append(["tc", "filter", "replace", "dev", intf, "ingress", "protocol", "all",
                 "pref", PROGRAM_PREF, "handle", "1", "bpf", "direct-action",
                 "object-pinned", str(program)])
    return cmds


class EbpfSwitch(Node):
    """A network namespace whose ports a tc program forwards between; the namespace's own
    IP stack stays out of the way (no addresses, no forwarding, IPv6 off)."""


SWITCH_SYSCTLS = ["net.ipv4.ip_forward=0", "net.ipv6.conf.all.disable_ipv6=1",
                  "net.ipv6.conf.default.disable_ipv6=1"]


class EbpfDataPlane(DataPlane):
    name = NAME

    def __init__(self, topo: Any, tables: dict[str, Any], workdir: Path,
                 tools: EbpfTools | None = None, options: EntryOptions | None = None) -> None:
        super().__init__(topo, tables, workdir)
        if tools is None:
            found, reason = find_ebpf_tools()
            if found is None:
                raise DataPlaneError(f"the p4-ebpf data plane cannot run: {reason}; install: "
                                     f"{PLANES[NAME].install}")
            tools = found
        self.tools = tools
        self.options = options or EntryOptions()
        self.net: Any = None
        self.bpf: Libbpf | None = None
        self.compiled: dict[str, CompiledEbpf] = {}
        self.program: str | None = None
        self.ifindex: dict[str, dict[str, int]] = {}
        self.loaded: dict[str, Loaded] = {}
        self.writes: dict[str, list[MapWrite]] = {}
        tag = hashlib.sha1(str(workdir).encode()).hexdigest()[:8]
        self.pin_root = PIN_ROOT / f"{os.getpid()}-{tag}"
        self._versions: dict[str, str] | None = None

    def switch_class(self) -> type:
        return EbpfSwitch

    @property
    def switch_dir(self) -> Path:
        return self.workdir / "switches"

    def _program(self, mode: str) -> CompiledEbpf:
        if mode not in MODE_PROGRAMS:
            why = PLANES[NAME].refused_modes.get(mode, "it has no PSA program")
            raise DataPlaneError(f"switching mode {mode!r} cannot run on {NAME}: {why}")
        name = MODE_PROGRAMS[mode]
        if name not in self.compiled:
            try:
                self.compiled[name] = compile_program(name, self.tools)
            except EbpfCompileError as exc:
                raise DataPlaneError(f"the PSA program {name} could not be compiled: {exc}") \
                    from exc
        return self.compiled[name]

    # ---- lifecycle -----------------------------------------------------------------
    def start(self, net: Any, mode: str, spray: str) -> None:
        check_mode(mode, spray)
        program = self._program(mode)
        self.net = net
        try:
            self.bpf = Libbpf(self.tools.libbpf)
        except LibbpfError as exc:
            raise DataPlaneError(f"the p4-ebpf data plane cannot load programs: {exc}") from exc
        _mount_bpffs()
        remove_stale_pins(PIN_ROOT)
        shutil.rmtree(self.pin_root, ignore_errors=True)
        self.ifindex = self._read_ifindexes()
        scrub = self._guard(lambda: self.bpf_.load_instructions(
            SCRUB_NAME, clear_cb_program(), self.pin_root / SCRUB_NAME), "the cb scrubber")
        self.loaded = {sw: self._load(sw, program, spray) for sw in self.topo.switches}
        self._attach(scrub, first=True)
        self.program = program.name
        self.mode, self.spray = mode, spray

    def set_mode(self, mode: str, spray: str) -> None:
        check_mode(mode, spray)
        if self.net is None:
            raise DataPlaneError("set_mode before start: the p4-ebpf switches are not running")
        program = self._program(mode)
        if program.name != self.program:
            old = dict(self.loaded)
            self.loaded = {sw: self._load(sw, program, spray) for sw in self.topo.switches}
            self._attach(None, first=False)
            for loaded in old.values():
                shutil.rmtree(loaded.pin_dir, ignore_errors=True)
            self.program = program.name
        else:
            self._rewrite_registers(mode, spray)
        self.mode, self.spray = mode, spray

    def stop(self) -> None:
        if self.net is None:
            return
        self.net = None
        self.loaded = {}
        # the filters hold the programs until the namespaces go; the pins hold the rest
        shutil.rmtree(self.pin_root, ignore_errors=True)

    # ---- loading and filling ---------------------------------------------------------
    @property
    def bpf_(self) -> Libbpf:
        assert self.bpf is not None
        return self.bpf

    def _guard(self, fn: Any, what: str) -> Any:
        try:
            return fn()
        except (LibbpfError, LayoutError, EntryError) as exc:
            raise DataPlaneError(f"p4-ebpf: {what}: {exc}") from exc

    def _read_ifindexes(self) -> dict[str, dict[str, int]]:
        out = {}
        for sw in self.topo.switches:
            text = self.net[sw].cmd("ip -o link show")
            found = parse_ip_links(text)
            wanted = [h.intf for h in switch_ports(self.tables[sw])]
            missing = [i for i in wanted if i not in found]
            if missing:
                raise DataPlaneError(f"switch {sw}: interfaces {', '.join(missing)} not found "
                                     f"in its namespace (`ip -o link show` said: "
                                     f"{text.strip()[-300:]})")
            out[sw] = {i: found[i] for i in wanted}
        return out

    def _entries_options(self, spray: str) -> EntryOptions:
        gap = int(self.switching.get("flowlet_gap_us", self.options.flowlet_gap_us))
        return EntryOptions(spray, gap, 0)

    def _load(self, sw: str, program: CompiledEbpf, spray: str) -> Loaded:
        """Load `program` for switch `sw`, initialise and fill its maps, read them back."""
        layout = program.layout()
        pin_dir = self.pin_root / sw / program.name
        loaded = self._guard(lambda: self.bpf_.load(program.obj, pin_dir,
                                                    (TC_PROGRAM, INITIALIZER)),
                             f"switch {sw}")
        self._guard(lambda: self.bpf_.run_once(loaded.programs[INITIALIZER], INIT_FRAME),
                    f"switch {sw}: the map initializer")
        entries = self._guard(lambda: psa_entries(
            self.tables[sw], port_macs(self.topo, sw), self.ifindex[sw], program.name,
            self._entries_options(spray)), f"switch {sw}: entries")
        writes = self._guard(lambda: map_writes(layout, entries), f"switch {sw}: entries")
        self._write(sw, loaded, writes)
        self.writes[sw] = writes
        self._record(sw, program.name, writes)
        return loaded

    def _write(self, sw: str, loaded: Loaded, writes: list[MapWrite]) -> None:
        """Write every entry, then read every one back and compare (bytes)."""
        fds: dict[str, int] = {}
        try:
            for w in writes:
                if w.map_name not in fds:
                    if w.map_name not in loaded.maps:
                        raise DataPlaneError(f"switch {sw}: map {w.map_name} was not pinned "
                                             f"(pinned: {', '.join(sorted(loaded.maps))})")
                    fds[w.map_name] = self._guard(
                        lambda n=w.map_name: self.bpf_.open_pinned(loaded.maps[n]),
                        f"switch {sw}: map {w.map_name}")
                self._guard(lambda w=w: self.bpf_.update(fds[w.map_name], w.key, w.value,
                                                         w.what), f"switch {sw}")
            wrong = self._differing(fds, writes)
            if wrong:
                shown = "; ".join(wrong[:5]) + (f" (and {len(wrong) - 5} more)"
                                                if len(wrong) > 5 else "")
                raise DataPlaneError(f"switch {sw}: the maps read back differ from what was "
                                     f"written: {shown}; the entries are in "
                                     f"{self.switch_dir / f'{sw}.ebpf-entries.txt'}")
        finally:
            for fd in fds.values():
                os.close(fd)

    def _differing(self, fds: dict[str, int], writes: list[MapWrite]) -> list[str]:
        """What of `writes` the maps (open as `fds`) do not hold, byte for byte."""
        return [w.what for w in writes
                if self.bpf_.lookup(fds[w.map_name], w.key, len(w.value)) != w.value]

    def state_problems(self) -> dict[str, list[str]]:
        """Every switch's maps read back against every entry and register this plane
        wrote for its current program and spray policy (a reused network's check)."""
        out: dict[str, list[str]] = {}
        for sw, loaded in self.loaded.items():
            fds: dict[str, int] = {}
            try:
                for w in self.writes.get(sw, []):
                    if w.map_name not in fds:
                        fds[w.map_name] = self.bpf_.open_pinned(loaded.maps[w.map_name])
                wrong = self._differing(fds, self.writes.get(sw, []))
            except (LibbpfError, KeyError, OSError) as exc:
                wrong = [f"its maps cannot be read ({exc})"]
            finally:
                for fd in fds.values():
                    os.close(fd)
            if wrong:
                out[sw] = [f"{len(wrong)} map entr(y/ies) differ from what was written: "
                           + "; ".join(wrong[:3])]
        return out

    def _record(self, sw: str, program: str, writes: list[MapWrite]) -> None:
        self.switch_dir.mkdir(parents=True, exist_ok=True)
        lines = [f"# switch {sw}, PSA program {program}: map <- key / value (hex)"]
        lines += [f"{w.map_name} <- {w.key.hex()} / {w.value.hex()}  # {w.what}" for w in writes]
        (self.switch_dir / f"{sw}.ebpf-entries.txt").write_text("\n".join(lines) + "\n")

    def _rewrite_registers(self, mode: str, spray: str) -> None:
        entry = MODE_REGISTRY[mode]
        old = entry.registers({**self.switching, "spray": self.spray})
        new = entry.registers({**self.switching, "spray": spray})
        if new == old:
            return
        assert self.program is not None
        layout = self.compiled[self.program].layout()
        for sw, loaded in self.loaded.items():
            writes = [self._guard(lambda n=n, v=v: register_write(layout, f"{SELECT}.{n}", 0, v),
                                  f"switch {sw}") for n, v in new.items()]
            self._write(sw, loaded, writes)
            written = {(w.map_name, w.key) for w in writes}  # what the maps now hold
            self.writes[sw] = [w for w in self.writes.get(sw, [])
                               if (w.map_name, w.key) not in written] + writes

    def _attach(self, scrub: Path | None, first: bool) -> None:
        scripts = []
        for sw, loaded in self.loaded.items():
            cmds: list[list[str]] = [["sysctl", "-qw", *SWITCH_SYSCTLS]] if first else []
            for intf in self.ifindex[sw]:
                cmds += attach_commands(intf, scrub or Path(), loaded.programs[TC_PROGRAM],
                                        first)
            stem = self.switch_dir / f"{sw}.{'attach' if first else 'mode'}"
            scripts.append((f"switch {sw}", self.net[sw], Path(f"{stem}.sh"),
                            render(cmds, str(stem), f"switch {sw} p4-ebpf")))
        run_in_netns(scripts)

    # ---- measurements ----------------------------------------------------------------
    def port_counters(self, switch: str) -> dict[str, PortCounters]:
        if self.net is None:
            raise DataPlaneError(f"switch {switch}: counters asked for, but the p4-ebpf "
                                 "plane is not running")
        return namespace_counters(self.net[switch].pid)  # the PSA programs keep none

    def describe(self) -> dict[str, Any]:
        if self._versions is None:
            self._versions = self.tools.versions()
        return {
            **super().describe(),
            "program": self.program,
            "programs": {n: {"sha": p.digest, "object": str(p.obj)}
                         for n, p in self.compiled.items()},
            "tools": self._versions,
            "runtime": str(self.tools.runtime),
        }


def netns_argv(pid: int, script: Path) -> list[str]:
    """Run `script` in the network namespace of process `pid`, in our mount namespace."""
    return ["nsenter", f"--net=/proc/{pid}/ns/net", "sh", str(script)]


def run_in_netns(scripts: list[tuple[str, Any, Path, NodeScript]]) -> None:
    """Run each (name, node, script path, rendered) in its node's network namespace, all
    at once; DataPlaneError naming the first that failed (and how many did)."""
    running = []
    for name, node, path, rendered in scripts:
        write(rendered, path)
        running.append((name, rendered, subprocess.Popen(
            netns_argv(node.pid, path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)))
    failures = []
    for name, rendered, proc in running:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            failures.append(failure_message(name, out, str(proc.returncode), rendered.files))
    if failures:
        more = f" (and {len(failures) - 1} more switch(es) failed)" if len(failures) > 1 else ""
        raise DataPlaneError(failures[0] + more)


def remove_stale_pins(root: Path) -> list[Path]:
    """Remove the pins of networks whose pathdiv process is gone (killed before its
    teardown): `<root>/<pid>-<tag>` with no process `pid`. Returns what it removed."""
    removed = []
    for folder in root.glob("*-*") if root.is_dir() else []:
        pid = folder.name.split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _mount_bpffs() -> None:
    """Make sure /sys/fs/bpf is a BPF file system (the lab kernel's init mounts one)."""
    with open("/proc/mounts") as mounts:
        if any(line.split()[1:3] == [str(BPFFS), "bpf"] for line in mounts):
            return
    done = subprocess.run(["mount", "-t", "bpf", "bpf", str(BPFFS)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise DataPlaneError(f"p4-ebpf: {BPFFS} is not a BPF file system and mounting one "
                             f"failed: {done.stderr.strip()}")


def prepare_for_lab_kernel() -> str:
    """Every PSA program compiled for eBPF into the cache on the host (the guest reads it)."""
    try:
        psa = compile_programs(require_ebpf_tools())
    except (EbpfCompileError, EbpfToolsError) as exc:
        raise DataPlaneError(f"the PSA programs could not be compiled on the host: "
                             f"{exc}") from exc
    where = {str(p.obj.parent.parent) for p in psa.values()}
    return (f"PSA programs {', '.join(psa)} compiled for eBPF on the host "
            f"(cache {', '.join(sorted(where))})")


IMPLEMENTATION = PlaneImplementation(EbpfDataPlane, find_ebpf_tools, p4_member,
                                     prepare_for_lab_kernel)
