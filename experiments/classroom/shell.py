"""The classroom CLI: Mininet's CLI plus pathdiv's `paths`, `counters`, `mode`, `flow`,
`draw` (the fat tree's bytes per link as an SVG file) and `p4` (a command for one switch's
own command line, on a plane that has one: bmv2's simple_switch_CLI).

Commands read the running `Network` (its topology object, data plane and counters) and
print what `classroom/views.py` formats; a bad argument prints one line and the CLI
carries on. Transfers use the transfer tool (`traffic/transfer.py`) as `pathdiv probe` does.
"""

from __future__ import annotations

import time
from typing import Any

from mininet.cli import CLI
from mininet.log import lg, setLogLevel

from pathdiv.experiments.classroom.probe import PORT, ProbePlan, probe_fetch
from pathdiv.experiments.classroom.views import (
    LinkTraffic,
    carried,
    flow_summary,
    format_counters,
    format_paths,
    heat_map,
    link_traffic,
    traffic_bytes,
)
from pathdiv.experiments.config.checks import parse_size
from pathdiv.experiments.config.switching import SPRAYS
from pathdiv.experiments.dataplane.base import MODES, DataPlaneError, PortCounters
from pathdiv.experiments.fabric.nodeprocs import wait_for_line
from pathdiv.experiments.network.network import Network
from pathdiv.experiments.running import NetworkError

FLOW_PORT = PORT  # the server `pathdiv probe` uses; probe_fetch targets it


class ShellCommandError(ValueError):
    """A classroom shell command was given something it cannot use."""


def snapshot(net: Network) -> dict[str, PortCounters]:
    """Counters of every switch port, keyed by interface name."""
    out: dict[str, PortCounters] = {}
    for switch in net.topo.switches:
        out.update(net.counters(switch))
    return out


def settled_snapshot(net: Network, quiet_s: float = 0.3, timeout_s: float = 10.0
                     ) -> dict[str, PortCounters]:
    """A snapshot once the counters stop moving (closing handshakes included)."""
    deadline = time.monotonic() + timeout_s
    last = snapshot(net)
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = snapshot(net)
        if now == last:
            break
        last = now
    return last


class PathdivCLI(CLI):  # type: ignore[misc]
    """Mininet's CLI with pathdiv's commands; runs until `exit` or end of input."""

    prompt = "pathdiv> "

    def __init__(self, net: Network, **kwargs: Any) -> None:
        self.net = net
        self.mark = snapshot(net)
        self.last_flow: tuple[str, str, list[LinkTraffic]] | None = None
        setLogLevel("output")  # the network builds quietly; node commands must print here
        lg.propagate = False  # Mininet prints node output itself (stderr); not twice
        super().__init__(net.mininet, **kwargs)

    # ---- helpers -------------------------------------------------------------
    def _host(self, name: str) -> str:
        if name not in self.net.topo.hosts:
            hosts = self.net.topo.hosts
            raise ShellCommandError(f"unknown host {name!r}; hosts are {hosts[0]}..{hosts[-1]}")
        return name

    def _guard(self, fn: Any, line: str) -> None:
        try:
            fn(line.split())
        except (ShellCommandError, NetworkError, DataPlaneError, ValueError) as exc:
            print(f"error: {exc}")

    # ---- commands ------------------------------------------------------------
    def do_paths(self, line: str) -> None:
        """paths SRC DST: the equal-cost paths and which carried the last flow."""
        self._guard(self._paths, line)

    def _paths(self, args: list[str]) -> None:
        if len(args) != 2:
            raise ShellCommandError("usage: paths SRC DST, e.g. paths h1 h16")
        src, dst = self._host(args[0]), self._host(args[1])
        print(format_paths(self.net.topo, src, dst, self.last_flow))

    def do_counters(self, line: str) -> None:
        """counters: per-link bytes/packets since the last `counters`, and a heat map."""
        self._guard(self._counters, line)

    def _counters(self, args: list[str]) -> None:
        now = snapshot(self.net)
        traffic = link_traffic(self.net.topo, self.mark, now)
        self.mark = now
        print(format_counters(traffic))
        print(heat_map(self.net.topo, traffic))

    def do_draw(self, line: str) -> None:
        """draw FILE.svg: the fat tree with each link's bytes of the last flow (its paths
        dashed), or of everything since the network started when there was none."""
        self._guard(self._draw, line)

    def _draw(self, args: list[str]) -> None:
        if len(args) != 1 or not args[0].endswith(".svg"):
            raise ShellCommandError("usage: draw FILE.svg, e.g. draw /tmp/flow.svg")
        from pathdiv.analysis.report.linkmap import link_map_svg  # plotting, on demand

        topo = self.net.topo
        if self.last_flow is None:
            zero = {intf: PortCounters(0, 0, 0, 0) for intf in self.mark}
            traffic, paths = link_traffic(topo, zero, snapshot(self.net)), []
            title = "Bytes per link since the network started"
        else:
            src, dst, traffic = self.last_flow
            paths = [p for p, _, used in carried(topo, topo.paths(src, dst), traffic) if used]
            title = f"Bytes per link of the last flow {src} -> {dst}"
        with open(args[0], "w", encoding="utf-8") as fh:
            fh.write(link_map_svg(topo, traffic_bytes(traffic), paths, title))
        print(f"wrote {args[0]} ({len(paths)} path(s) drawn)")

    def do_mode(self, line: str) -> None:
        """mode [static|ecmp|spray [random|roundrobin]]: show or switch forwarding live."""
        self._guard(self._mode, line)

    def _mode(self, args: list[str]) -> None:
        dp = self.net.plane
        if args:
            mode = args[0]
            spray = args[1] if len(args) > 1 else dp.spray
            if mode not in MODES or spray not in SPRAYS or len(args) > 2:
                raise ShellCommandError(f"bad mode {' '.join(args)!r}; expected one of "
                                      f"{', '.join(MODES)} (spray takes random|roundrobin)")
            dp.set_mode(mode, spray)
        extra = f" ({dp.spray})" if dp.mode == "spray" else ""
        print(f"mode: {dp.mode}{extra} on the {dp.name} data plane")

    def do_p4(self, line: str) -> None:
        """p4 SWITCH COMMAND: the switch's own command line (bmv2: simple_switch_CLI), e.g.
        p4 e1 table_dump PathdivIngress.ipv4_lpm"""
        self._guard(self._p4, line)

    def _p4(self, args: list[str]) -> None:
        if len(args) < 2:
            raise ShellCommandError("usage: p4 SWITCH COMMAND, e.g. p4 e1 table_dump "
                                    "PathdivIngress.ipv4_lpm (p4 e1 help lists them)")
        print(self.net.plane.switch_cli(args[0], " ".join(args[1:])))

    def do_flow(self, line: str) -> None:
        """flow SRC DST SIZE [tcp|mptcp]: SRC sends SIZE (e.g. 2MB) to DST; prints FCT,
        goodput and the paths used."""
        self._guard(self._flow, line)

    def _flow(self, args: list[str]) -> None:
        if len(args) not in (3, 4):
            raise ShellCommandError("usage: flow SRC DST SIZE [tcp|mptcp], e.g. "
                                  "flow h1 h16 2MB tcp")
        src, dst = self._host(args[0]), self._host(args[1])
        if src == dst:
            raise ShellCommandError(f"SRC and DST are both {src}; pick two hosts")
        try:
            size = parse_size(args[2])
        except ValueError:
            raise ShellCommandError(f"bad size {args[2]!r}; expected e.g. 500KB, 2MB, "
                                  "1MiB") from None
        net_transport = self.net.cfg.transport
        transport = args[3] if len(args) == 4 else net_transport
        if transport not in ("tcp", "mptcp"):
            raise ShellCommandError(f"bad transport {transport!r}; expected tcp or mptcp")
        if transport == "mptcp" and net_transport != "mptcp":
            raise ShellCommandError("this network's hosts run TCP only (hosts.transport: tcp); "
                                  "restart with --set hosts.transport=mptcp")
        result, traffic = run_flow(self.net, src, dst, size, transport == "mptcp")
        self.last_flow = (src, dst, traffic)
        print(flow_summary(src, dst, size, transport, result, self.net.topo, traffic))


def run_flow(net: Network, src: str, dst: str, size: int, mptcp: bool
             ) -> tuple[dict[str, Any], list[LinkTraffic]]:
    """`src` serves `size` bytes, `dst` fetches them; returns the transfer's record
    and the per-link traffic while it ran."""
    serve = ["serve", "--port", str(FLOW_PORT)]
    if net.cfg.transport == "mptcp":
        serve.append("--mptcp")  # an MPTCP listener also accepts plain TCP
    server = net.transfer(src, serve)
    try:
        wait_for_line(server, server.stdout, "ready", 15, f"transfer server on {src}")
        before = settled_snapshot(net)
        plan = ProbePlan(client=dst, server=src)
        results = probe_fetch(net, plan, [size], mptcp)
        after = settled_snapshot(net)
    finally:
        net.end(server)
    return results[0], link_traffic(net.topo, before, after)

