"""A live network from Python: `with api.network(config) as net:` builds the fat tree,
yields a `LiveNetwork`, and tears everything down when the block ends, also on an
exception or Ctrl-C.

    with api.network("silent", {"hosts.kernel": "host", "hosts.transport": "tcp"}) as net:
        t = net.transfer("h1", "h16", 2_000_000)
        print(t.fct_s, t.goodput_mbps, t.paths)

On the host kernel (or inside the lab kernel's guest) the network runs on this
process's kernel: `KernelNetwork`, built by `local_network`. With `hosts.kernel: lab`
from the host, the lab kernel boots once and its guest builds the network and serves
this process's requests (experiments/api/lab.py): `LabNetwork`, the same methods.
`LiveNetwork` holds what both share: the topology, its paths, the checks on a transfer,
the picture. `api.network` (networks.py) chooses between the two.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pathdiv.experiments.classroom.shell import run_flow, settled_snapshot
from pathdiv.experiments.classroom.views import carried, link_traffic, traffic_bytes
from pathdiv.experiments.config.checks import parse_size
from pathdiv.experiments.config.load import Config
from pathdiv.experiments.dataplane.base import PortCounters
from pathdiv.experiments.dataplane.select import choose_for_config
from pathdiv.experiments.fabric.environment import preflight
from pathdiv.experiments.network.network import Network
from pathdiv.kernels.processes import scratch
from pathdiv.topologies.fattree import FatTree

Path_ = tuple[str, ...]


@dataclass(frozen=True)
class Transfer:
    """One transfer: `src` sent `size` bytes to `dst` (dst fetched them from src)."""

    src: str
    dst: str
    size: int
    transport: str
    fct_s: float
    goodput_mbps: float
    received: int
    paths: list[Path_]  # the equal-cost paths that carried it (>= 10% of the busiest)
    path_bytes: dict[Path_, int]  # bytes along each equal-cost path src -> dst
    link_bytes: dict[tuple[str, str], int] = field(repr=False)  # (from, to) -> bytes
    record: dict[str, Any] = field(repr=False)  # the transfer tool's own JSON line


class LiveNetwork:
    """The running fat tree: hosts and switches by name, transfers, paths, counters.
    (Built by `api.network`; a `KernelNetwork` or a `LabNetwork`.)"""

    def __init__(self, config: Config, topo: FatTree, dataplane: str) -> None:
        self.config = config
        self.topo = topo
        self.dataplane = dataplane  # which data plane runs and why
        self.last: Transfer | None = None

    @property
    def hosts(self) -> list[str]:
        return list(self.topo.hosts)

    @property
    def switches(self) -> list[str]:
        return list(self.topo.switches)

    def check_node(self, name: str) -> None:
        if name not in self.topo.nodes:
            raise KeyError(f"no node {name!r}; hosts are {self.hosts[0]}..{self.hosts[-1]}, "
                           f"switches {', '.join(self.switches)}")

    def cmd(self, name: str, argv: list[str], check: bool = True) -> str:
        """Run `argv` in node `name`'s namespace; its output."""
        raise NotImplementedError

    def paths(self, a: str, b: str) -> list[Path_]:
        """The equal-cost shortest paths a -> b, node names in order."""
        return self.topo.paths(a, b)

    def link_bytes(self) -> dict[tuple[str, str], int]:
        """Bytes each link direction (from, to) carried since the network started."""
        raise NotImplementedError

    def transfer(self, src: str, dst: str, size: int | str,
                 transport: str | None = None) -> Transfer:
        """`dst` fetches `size` bytes (an int or e.g. "2MB") from `src` over `transport`
        (tcp or mptcp; the config's by default); FCT, goodput and the paths it took."""
        nbytes, transport = self.check_transfer(src, dst, size, transport)
        self.last = self.run_transfer(src, dst, nbytes, transport)
        return self.last

    def check_transfer(self, src: str, dst: str, size: int | str,
                       transport: str | None) -> tuple[int, str]:
        """(bytes, transport) of a transfer request, or the error naming what is wrong."""
        for host in (src, dst):
            if host not in self.topo.hosts:
                raise KeyError(f"{host!r} is not a host; hosts are {', '.join(self.hosts)}")
        if src == dst:
            raise ValueError(f"src and dst are both {src}; pick two hosts")
        nbytes = parse_size(size) if isinstance(size, str) else int(size)
        transport = transport or self.config.transport
        if transport not in ("tcp", "mptcp"):
            raise ValueError(f"transport {transport!r}: expected tcp or mptcp")
        if transport == "mptcp" and self.config.transport != "mptcp":
            raise ValueError("this network's hosts run TCP only (hosts.transport: tcp); "
                             "build it with hosts.transport: mptcp")
        return nbytes, transport

    def run_transfer(self, src: str, dst: str, nbytes: int, transport: str) -> Transfer:
        raise NotImplementedError

    def capture(self, folder: str | Path, snaplen: int = 128,
                budget_mb: float = 200) -> AbstractContextManager[Path]:
        """Capture headers (tcpdump, `snaplen` bytes) on every link while the block runs:
        `folder/<interface>.pcap`, one per link at its upper end, both directions; the
        files together stay under `budget_mb`. `pathdiv.analysis.capture` reads them."""
        raise NotImplementedError

    def draw(self, transfer: Transfer | None = None, title: str = "") -> str:
        """SVG of the fat tree with a transfer's bytes per link and its paths (the last
        transfer by default; every byte since start when there was none)."""
        from pathdiv.analysis.report.linkmap import link_map_svg

        transfer = transfer or self.last
        if transfer is None:
            return link_map_svg(self.topo, self.link_bytes(), (), title or "Bytes per link")
        return link_map_svg(self.topo, transfer.link_bytes, transfer.paths, title or
                            f"{transfer.src} \u2192 {transfer.dst}, {transfer.size} B "
                            f"over {transfer.transport}")


class KernelNetwork(LiveNetwork):
    """The network on this process's kernel (the host's, or the guest's inside the lab
    kernel): `net` is the emulator's Network (internal; its methods may change)."""

    def __init__(self, net: Network, dataplane: str) -> None:
        assert isinstance(net.topo, FatTree), "api.network refuses other kinds before building"
        super().__init__(net.cfg, net.topo, dataplane)
        self.net = net

    def __getitem__(self, name: str) -> Any:
        """The node `name` (host or switch), as the emulator's handle."""
        self.check_node(name)
        return self.net.node(name)

    def cmd(self, name: str, argv: list[str], check: bool = True) -> str:
        self.check_node(name)
        return self.net.cmd(name, argv, check=check)

    def link_bytes(self) -> dict[tuple[str, str], int]:
        now = settled_snapshot(self.net)
        zero = {intf: PortCounters(0, 0, 0, 0) for intf in now}
        return traffic_bytes(link_traffic(self.topo, zero, now))

    def run_transfer(self, src: str, dst: str, nbytes: int, transport: str) -> Transfer:
        record, traffic = run_flow(self.net, src, dst, nbytes, transport == "mptcp")
        fct = float(record["end_s"]) - float(record["start_s"])
        received = int(record["received"])
        rows = carried(self.topo, self.topo.paths(src, dst), traffic)
        return Transfer(
            src, dst, nbytes, transport, fct, received * 8 / fct / 1e6 if fct > 0 else 0.0,
            received, [p for p, _, used in rows if used], {p: n for p, n, _ in rows},
            traffic_bytes(traffic), dict(record))

    @contextmanager
    def capture(self, folder: str | Path, snaplen: int = 128,
                budget_mb: float = 200) -> Iterator[Path]:
        out = Path(folder)
        self.net.captures.start(out, snaplen, budget_mb,
                               tool=str(self.net.cfg.data["capture"]["tool"]))
        try:
            yield out
        finally:
            self.net.wait_quiet()  # the last FINs and ACKs belong in the captures
            self.net.captures.stop()


@contextmanager
def local_network(cfg: Config, workdir: str | Path | None = None) -> Iterator[KernelNetwork]:
    """The network of `cfg` on this process's kernel (the CLI's `net` and `probe`, and the
    lab kernel's guest serving `api.network`)."""
    preflight(cfg)
    choice = choose_for_config(cfg)
    cls = choice.switches()  # DataPlaneError with the reason when none can run it
    with ExitStack() as stack:
        folder = Path(workdir) if workdir else stack.enter_context(scratch("net"))
        net = stack.enter_context(Network(cfg, cls, folder))
        yield KernelNetwork(net, choice.reason)
