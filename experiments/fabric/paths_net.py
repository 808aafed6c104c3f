"""The commands that build a parallel-paths topology (topologies/paths.py) as named network
namespaces, and those that change a bottleneck while traffic runs.

Pure: every function returns (namespace, argv) pairs; `pathdiv.experiments.traffic.
paths_run` runs them. Each node is the namespace `NS_PREFIX + name`. A bottleneck
ra<i>-rb<i> is shaped at both egresses alike: netem (the one-way delay, the loss; its own
limit large enough never to drop) with a tbf child (the rate, a drop-tail queue of
queue_pkts full frames), so the rate's queue sits on a router, where TCP small queues do
not hold the senders back, and the data direction (rb -> ra) and the ACK direction have
the same conditions, as LinkParams promises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pathdiv.topologies.conditions import changed
from pathdiv.topologies.model import LinkParams
from pathdiv.topologies.paths import CLIENT, SERVER, SERVICE_ADDRESS, ParallelPaths

NS_PREFIX = "pdp-"
NETEM_LIMIT = 100_000  # packets netem may hold: never the queue that drops
FRAME_BYTES = 1514
Command = tuple[str | None, list[str]]  # namespace (None: the root one), argv


def ns(node: str) -> str:
    return NS_PREFIX + node


def namespaces(topo: ParallelPaths) -> list[str]:
    return [ns(n) for n in topo.nodes]


def build_commands(topo: ParallelPaths) -> list[Command]:
    """Links, addresses, routes, forwarding and the client's MPTCP subflow endpoints (the
    namespaces exist already: the caller adds them, marked as its own)."""
    out: list[Command] = []
    for node in topo.nodes:
        out.append((ns(node), ["ip", "link", "set", "lo", "up"]))
        for key in ("all", "default"):
            out.append((ns(node), ["sysctl", "-qw", f"net.ipv4.conf.{key}.rp_filter=0"]))
        out.append((ns(node), ["sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1"]))
        if node in topo.switches:
            out.append((ns(node), ["sysctl", "-qw", "net.ipv4.ip_forward=1"]))
    addrs = topo.interface_addresses()
    for link in topo.links:
        a, b = link.a, link.b
        out.append((None, ["ip", "link", "add", a.intf, "netns", ns(a.node), "type", "veth",
                           "peer", "name", b.intf, "netns", ns(b.node)]))
        for port in (a, b):
            out.append((ns(port.node), ["ip", "addr", "add", addrs[port.intf], "dev",
                                        port.intf]))
            out.append((ns(port.node), ["ip", "link", "set", port.intf, "up"]))
            # one segment per packet on the wire, as on a real link
            out.append((ns(port.node), ["ethtool", "-K", port.intf, "tso", "off", "gso",
                                        "off", "gro", "off"]))
    out.append((ns(SERVER), ["ip", "addr", "add", f"{SERVICE_ADDRESS}/32", "dev", "lo"]))
    for node, routes in topo.routes().items():
        for r in routes:
            via = ["via", r.via] if r.via else []
            if r.source is None:
                out.append((ns(node), ["ip", "route", "add", r.prefix, *via, "dev", r.dev]))
                continue
            table = str(100 + int(r.dev.rsplit("eth", 1)[1]))
            out.append((ns(node), ["ip", "route", "add", r.prefix, *via, "dev", r.dev,
                                   "table", table]))
            out.append((ns(node), ["ip", "rule", "add", "from", r.source, "table", table]))
    for host in (CLIENT, SERVER):
        out.append((ns(host), ["ip", "mptcp", "limits", "set", "subflow", "8",
                               "add_addr_accepted", "8"]))
    for addr, dev in topo.subflow_endpoints():
        out.append((ns(CLIENT), ["ip", "mptcp", "endpoint", "add", addr, "dev", dev,
                                 "subflow"]))
    for i in topo.path_numbers:
        out += shaping_commands(topo, i, topo.specs[i - 1].params, "add")
    return out


def _netem(params: LinkParams) -> list[str]:
    args = ["delay", f"{params.delay_ms:g}ms"]
    if params.jitter_ms:
        args.append(f"{params.jitter_ms:g}ms")
    if params.loss_pct:
        args += ["loss", f"{params.loss_pct:g}%"]
    return [*args, "limit", str(NETEM_LIMIT)]


def shaping_commands(topo: ParallelPaths, path: int, params: LinkParams, verb: str,
                     before: LinkParams | None = None) -> list[Command]:
    """`tc qdisc add|change` of both egresses of path `path`'s bottleneck; with `before`
    (a change), the rate's tbf is added, changed or deleted as the rate appears, stays or
    goes."""
    link = topo.bottleneck(path)
    out: list[Command] = []
    for port in (link.a, link.b):
        dev = ["dev", port.intf]
        out.append((ns(port.node), ["tc", "qdisc", verb, *dev, "root", "handle", "1:",
                                    "netem", *_netem(params)]))
        tbf = [*dev, "parent", "1:", "handle", "2:"]
        had_rate = bool(before.bw_mbps) if before is not None else verb == "change"
        if params.bw_mbps:
            out.append((ns(port.node), [
                "tc", "qdisc", "change" if had_rate else "add", *tbf, "tbf", "rate",
                f"{params.bw_mbps:g}mbit", "burst", str(2 * FRAME_BYTES), "limit",
                str(params.queue_pkts * FRAME_BYTES)]))
        elif had_rate:
            out.append((ns(port.node), ["tc", "qdisc", "del", *tbf]))
    return out


def event_commands(topo: ParallelPaths, current: dict[int, LinkParams],
                   event: Mapping[str, Any]) -> list[Command]:
    """One `events` entry on a bottleneck: `set` changes its conditions (both directions),
    `action: down` makes it lose every packet, `up` restores the conditions before that.
    `current` (path -> conditions in force, `down` aside) is updated."""
    link_name = str(event["link"])
    path = next((i for i in topo.path_numbers
                 if link_name in (f"ra{i}-rb{i}", f"rb{i}-ra{i}")), None)
    if path is None:
        raise KeyError(f"{link_name!r} is not a bottleneck (ra<i>-rb<i>) of the "
                       f"{topo.count}-path topology")
    before = current[path]
    if event.get("action") == "down":
        return shaping_commands(topo, path, changed(before, {"loss_pct": 100}), "change",
                                before)
    if event.get("action") == "up":
        return shaping_commands(topo, path, before, "change", before)
    current[path] = changed(before, event.get("set") or {})
    return shaping_commands(topo, path, current[path], "change", before)
