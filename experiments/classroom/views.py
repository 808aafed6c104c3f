"""What the classroom shell prints: per-link traffic, the paths that carried a flow, a heat map.

Pure formatting over the topology object and counter snapshots (no Mininet, no root),
so every table is unit-tested. A snapshot maps each link's upper-end interface (always
a switch port) to its PortCounters; `rx` there is the link's upward direction (towards
the core), `tx` the downward one.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pathdiv.experiments.dataplane.base import PortCounters
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.model import Link, Tier

SHADES = "_.:-=+*#%@"  # '_' = no traffic, '@' = the busiest link
CARRIED_SHARE = 0.1  # a path carried the flow if it saw >= 10% of the busiest path


@dataclass(frozen=True)
class LinkTraffic:
    """Bytes/packets on one link between two snapshots, per direction."""

    link: Link
    up_bytes: int
    up_packets: int
    down_bytes: int
    down_packets: int

    @property
    def bytes(self) -> int:
        return self.up_bytes + self.down_bytes

    @property
    def packets(self) -> int:
        return self.up_packets + self.down_packets

    def towards(self, node: str) -> int:
        """Bytes sent over the link towards `node` (one of its two ends)."""
        if node == self.link.b.node:
            return self.up_bytes
        if node == self.link.a.node:
            return self.down_bytes
        raise ValueError(f"{node!r} is not an end of link {self.link.name}; "
                         f"expected {self.link.a.node} or {self.link.b.node}")


def link_traffic(topo: FatTree, before: Mapping[str, PortCounters],
                 after: Mapping[str, PortCounters]) -> list[LinkTraffic]:
    """Per-link deltas; both snapshots must hold every link's upper-end interface."""
    out = []
    for link in topo.links:
        intf = link.b.intf
        if intf not in before or intf not in after:
            raise ValueError(f"no counters for {intf} (link {link.name}); a snapshot must "
                             "hold every switch port: read all switches' counters")
        b, a = before[intf], after[intf]
        out.append(LinkTraffic(link, a.rx_bytes - b.rx_bytes, a.rx_packets - b.rx_packets,
                               a.tx_bytes - b.tx_bytes, a.tx_packets - b.tx_packets))
    return out


def traffic_bytes(traffic: Sequence[LinkTraffic]) -> dict[tuple[str, str], int]:
    """Per link direction (from, to): the bytes of `traffic` (what the link map draws)."""
    out: dict[tuple[str, str], int] = {}
    for t in traffic:
        a, b = t.link.a.node, t.link.b.node
        out[(a, b)] = t.up_bytes
        out[(b, a)] = t.down_bytes
    return out


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover


def path_bytes(topo: FatTree, path: tuple[str, ...],
               traffic: Mapping[str, LinkTraffic]) -> int:
    """Bytes that went the whole way along `path` (least over its hops, in its direction)."""
    hops = [traffic[topo.link_between(u, v).name].towards(v)
            for u, v in itertools.pairwise(path)]
    return min(hops) if hops else 0


def carried(topo: FatTree, paths: list[tuple[str, ...]],
            traffic: list[LinkTraffic]) -> list[tuple[tuple[str, ...], int, bool]]:
    """(path, bytes along it, carried?) for each path; carried = >= 10% of the busiest."""
    by_name = {t.link.name: t for t in traffic}
    sizes = [path_bytes(topo, p, by_name) for p in paths]
    top = max(sizes, default=0)
    return [(p, n, top > 0 and n >= CARRIED_SHARE * top)
            for p, n in zip(paths, sizes, strict=True)]


def path_label(path: tuple[str, ...]) -> str:
    return " > ".join(path)


def format_paths(topo: FatTree, src: str, dst: str,
                 last_flow: tuple[str, str, list[LinkTraffic]] | None) -> str:
    """The equal-cost paths src -> dst; with a last flow between the same hosts, how
    many bytes of it went along each and which paths carried it."""
    paths = topo.paths(src, dst)
    lines = [f"{len(paths)} equal-cost path(s) {src} -> {dst}:"]
    if last_flow is None or {last_flow[0], last_flow[1]} != {src, dst}:
        lines += [f"  {i}. {path_label(p)}" for i, p in enumerate(paths, 1)]
        lines.append("  (run `flow SRC DST SIZE` between these hosts to see which carried it)")
        return "\n".join(lines)
    f_src, f_dst, traffic = last_flow
    data_paths = topo.paths(f_src, f_dst)
    rows = carried(topo, data_paths, traffic)
    for i, (p, n, used) in enumerate(rows, 1):
        mark = "carried" if used else "idle"
        lines.append(f"  {i}. {path_label(p):<40} {human_bytes(n):>10}  {mark}")
    count = sum(1 for _, _, u in rows if u)
    lines.append(f"last flow {f_src} -> {f_dst}: {count} of {len(rows)} path(s) carried it")
    return "\n".join(lines)


def format_counters(traffic: list[LinkTraffic], limit: int = 20) -> str:
    """Busiest links first (both directions); links without traffic are left out."""
    busy = sorted((t for t in traffic if t.packets), key=lambda t: -t.bytes)
    if not busy:
        return "no link carried traffic since the last `counters`"
    lines = [f"{'link':<10} {'tier':<5} {'bytes up':>11} {'bytes down':>11} {'packets':>9}"]
    for t in busy[:limit]:
        lines.append(f"{t.link.name:<10} {t.link.tier.value:<5} {t.up_bytes:>11} "
                     f"{t.down_bytes:>11} {t.packets:>9}")
    if len(busy) > limit:
        lines.append(f"... {len(busy) - limit} more link(s) with traffic")
    total = sum(t.bytes for t in busy)
    lines.append(f"{len(busy)} of {len(traffic)} links carried traffic, {human_bytes(total)} "
                 "in all (up = towards the core)")
    return "\n".join(lines)


def shade(value: int, top: int) -> str:
    if value <= 0 or top <= 0:
        return SHADES[0]
    step = -(-value * (len(SHADES) - 1) // top)  # ceil: any traffic is visible
    return SHADES[min(len(SHADES) - 1, max(1, step))]


def heat_map(topo: FatTree, traffic: list[LinkTraffic]) -> str:
    """One row per link tier, one column block per pod, one character per link."""
    by_name = {t.link.name: t for t in traffic}
    top = max((t.bytes for t in traffic), default=0)
    rows: list[tuple[str, Tier]] = [("core-agg ", Tier.CORE), ("agg-edge ", Tier.EDGE),
                                    ("edge-host", Tier.HOST)]
    blocks: dict[Tier, list[str]] = {tier: [] for _, tier in rows}
    for pod in range(topo.pods):
        for _, tier in rows:
            links = [lk for lk in topo.links
                     if lk.tier == tier and topo.nodes[lk.a.node].pod == pod]
            blocks[tier].append("".join(shade(by_name[lk.name].bytes, top) for lk in links))
    width = max(len(b) for bs in blocks.values() for b in bs)
    head = "         " + "".join(f"  {f'pod{p + 1}':<{width}}" for p in range(topo.pods))
    lines = [head]
    for label, tier in rows:
        lines.append(label + "".join(f"  {b:<{width}}" for b in blocks[tier]))
    lines.append(f"scale {SHADES!r}: '_' idle ... '@' busiest ({human_bytes(top)}); "
                 "links in `counters` order within each pod")
    return "\n".join(lines)


def flow_summary(src: str, dst: str, size: int, transport: str, result: Mapping[str, Any],
                 topo: FatTree, traffic: list[LinkTraffic]) -> str:
    """FCT, goodput, subflows and the paths (and cores) that carried one transfer."""
    fct = result["end_s"] - result["start_s"]
    goodput = result["received"] * 8 / fct / 1e6 if fct > 0 else 0.0
    rows = carried(topo, topo.paths(src, dst), traffic)
    used = [p for p, _, u in rows if u]
    cores = sorted({c for p in used if (c := topo.core_of_path(p)) is not None},
                   key=topo.cores.index)
    lines = [f"flow {src} -> {dst}: {human_bytes(size)} over {transport}: "
             f"FCT {fct:.3f} s, goodput {goodput:.2f} Mbit/s"
             + (f", {result.get('subflows', 1)} subflow(s)" if transport == "mptcp" else "")]
    lines.append(f"paths used: {len(used)} of {len(rows)}"
                 + (f"; cores {' '.join(cores)}" if cores else ""))
    lines += [f"  {path_label(p)}  {human_bytes(n)}" for p, n, u in rows if u]
    return "\n".join(lines)
