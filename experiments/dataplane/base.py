"""The interface every data plane implements, so workloads never know which one runs.

A data plane is given the topology and its forwarding tables (computed once in
`pathdiv.topologies.forwarding`), provides the Mininet node class for switches, configures
every switch after the links exist, switches forwarding mode live, reads per-port
counters, and stops. It raises `DataPlaneError` naming the switch and the log to read.

Each plane's module also holds its `PlaneImplementation`: the switches' class, where its
tools are, what the host prepares before a lab kernel boots, and its ECMP member function.
The plane registry (`config/planes.py`) names that module; `select.py` reads it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pathdiv.experiments.config.planes import PLANES
from pathdiv.experiments.config.switching import MODES as MODE_REGISTRY
from pathdiv.experiments.config.switching import SPRAYS, SwitchingMode
from pathdiv.experiments.dataplane.flows import MemberFn
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.forwarding import SwitchTable

MODES = tuple(MODE_REGISTRY)


class DataPlaneError(RuntimeError):
    """A switch could not be configured or does not forward as asked."""


@dataclass(frozen=True)
class PortCounters:
    rx_packets: int
    rx_bytes: int
    tx_packets: int
    tx_bytes: int


def check_mode(mode: str, spray: str) -> SwitchingMode:
    """The registry entry of `mode`; DataPlaneError when the mode or spray is unknown."""
    if mode not in MODE_REGISTRY:
        raise DataPlaneError(f"switching mode {mode!r} is not one of {', '.join(MODES)}")
    if spray not in SPRAYS:
        raise DataPlaneError(f"spray choice {spray!r} is not one of {', '.join(SPRAYS)}")
    return MODE_REGISTRY[mode]


class DataPlane(ABC):
    """One backend instance drives every switch of one network."""

    name: str = "abstract"  # the plane's registry name (config/planes.py)

    def __init__(self, topo: FatTree, tables: dict[str, SwitchTable], workdir: Path) -> None:
        self.topo = topo
        self.tables = tables
        self.workdir = workdir
        self.mode = "static"
        self.spray = "random"
        # the config's switching section: the keys a mode reads (switching.<key>)
        self.switching: dict[str, Any] = {}
        self.ecn_threshold_pkts: int | None = None

    def set_ecn(self, threshold_pkts: int | None,
                queues: dict[str, list[tuple[int, int, int]]]) -> None:
        """Before `start`: mark from `threshold_pkts` queued packets; `queues` is switch ->
        (port, rate in full frames per second, depth in packets) of every egress queue.
        Only a data plane that `marks_in_program` uses them."""
        self.ecn_threshold_pkts = threshold_pkts
        self.ecn_queues = queues

    @property
    def marks_in_program(self) -> bool:
        """Where switches mark ECN (switching.ecn_threshold_pkts), as the plane's registry
        entry says: False = the egress qdiscs the network sets up (RED,
        `pathdiv.experiments.fabric.shaping`); True = the switch program itself, which is
        then given the threshold and its egress queues."""
        plane = PLANES.get(self.name)
        return plane is not None and plane.marks_ecn_in_program

    @abstractmethod
    def switch_class(self) -> type:
        """The Mininet Node subclass to instantiate for each switch."""

    @abstractmethod
    def start(self, net: Any, mode: str, spray: str) -> None:
        """Configure every switch of the built Mininet `net` and start forwarding."""

    @abstractmethod
    def set_mode(self, mode: str, spray: str) -> None:
        """Switch every switch to `mode` (static|ecmp|spray) without rebuilding."""

    @abstractmethod
    def port_counters(self, switch: str) -> dict[str, PortCounters]:
        """Interface name -> counters, for every port of `switch`."""

    def ports_counters(self, switches: list[str]) -> dict[str, dict[str, PortCounters]]:
        """Switch -> `port_counters` of each of `switches`: one switch after another here;
        a plane that asks each switch through a process of its own asks them all at once."""
        return {sw: self.port_counters(sw) for sw in switches}

    @abstractmethod
    def stop(self) -> None:
        """Stop whatever `start` started; idempotent."""

    def state_problems(self) -> dict[str, list[str]]:
        """Switch -> how its program's state differs from what this plane wrote into it
        (empty: as written). The check of a network reused for another run reads it
        beside each node's own state; a plane whose entry says its networks are reused
        keeps its state where this can read it."""
        return {}

    def switch_cli(self, switch: str, command: str) -> str:
        """What the switch's own command line answers to `command` (the classroom shell's
        `p4`); a plane without one says so."""
        raise DataPlaneError(f"the {self.name} plane has no switch command line; open the "
                             "lab on bmv2 to look inside a switch (--set dataplane=bmv2)")

    def first_in_first_out(self) -> int:
        """On the virtual clock, before a TCP run's traffic (rounds.at_instant): put the
        processes that forward its packets under SCHED_FIFO beside the transfers; return
        how many threads. None here: the kernel forwards in softirq context."""
        return 0

    def describe(self) -> dict[str, Any]:
        """What ran, for the manifest (backend, versions, program hashes)."""
        return {"dataplane": self.name, "mode": self.mode, "spray": self.spray}


def namespace_counters(pid: int) -> dict[str, PortCounters]:
    """Every interface's counters in the network namespace of process `pid` (a switch
    node's shell), read from /proc/<pid>/net/dev by this process: no process started in
    the switch (wait_quiet asks every switch several times per run, and a process start
    costs tens of milliseconds in the lab kernel). OSError when the process is gone."""
    return parse_proc_net_dev(Path(f"/proc/{pid}/net/dev").read_text())


def parse_proc_net_dev(text: str) -> dict[str, PortCounters]:
    """Counters of every interface in a /proc/net/dev dump (the reader's namespace)."""
    out: dict[str, PortCounters] = {}
    for line in text.splitlines():
        if ":" not in line or "|" in line:
            continue
        name, _, rest = line.partition(":")
        fields = rest.split()
        if len(fields) < 16:
            continue
        rx_b, rx_p, tx_b, tx_p = int(fields[0]), int(fields[1]), int(fields[8]), int(fields[9])
        out[name.strip()] = PortCounters(rx_p, rx_b, tx_p, tx_b)
    return out


# the environment to search -> (the tools found, or None; one sentence: where, or what is
# missing and how to get it)
ToolFinder = Callable[[Mapping[str, str]], tuple[Any, str]]


@dataclass(frozen=True)
class PlaneImplementation:
    """What a plane's module gives the registry entry that names it (`config/planes.py`)."""

    switches: type[DataPlane]  # drives the switches of one network
    find_tools: ToolFinder  # no side effects: `dataplane: auto` asks it for every run
    member: MemberFn  # the up-group member a switch picks for a 5-tuple (ECMP)
    # before a lab kernel boots, on the host (whose files the guest sees read-only): what
    # the guest will need and cannot write (compiled programs); one line saying what was
    # done; DataPlaneError naming what failed. None: nothing to do.
    prepare_for_lab_kernel: Callable[[], str] | None = None
