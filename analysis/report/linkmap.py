"""The fat tree as a picture: each link coloured by the bytes it carried (pure, SVG text).

`link_map_svg(topo, link_bytes)` draws the topology object's nodes in four rows (core,
aggregation, edge, hosts; pods side by side) and every link once. A link's load is its
bytes in both directions together; its colour and width say which load bucket it falls
in (idle, then quarters of the busiest link's load), its label says its share of all
bytes the fabric carried, and hovering shows each direction's bytes. `paths` (node-name
tuples, e.g. the paths a transfer took) are drawn over the links as dashed lines.

The SVG is self-contained text: the report inlines it, `results.draw(...)` returns it.
Every link is a `<line class="link" data-bucket=...>` so a browser (and the tests) can
check that one bucket has one colour.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.model import Role

Direction = tuple[str, str]

# One row per run and link direction: bytes/packets that left `src` towards `dst`.
LINK_COLUMNS = ["run_id", "link", "tier", "src", "dst", "bytes", "packets"]


@dataclass(frozen=True)
class Bucket:
    name: str
    upto: float  # upper bound of the load, as a fraction of the busiest link's
    colour: str
    width: float


# Load buckets, lightest first: a link is in the first whose `upto` its load reaches.
BUCKETS: tuple[Bucket, ...] = (
    Bucket("idle", 0.0, "#c8c8c8", 1.5),
    Bucket("0-25%", 0.25, "#fdd49e", 3.0),
    Bucket("25-50%", 0.50, "#fc8d59", 4.5),
    Bucket("50-75%", 0.75, "#d7301f", 6.0),
    Bucket("75-100%", 1.0, "#7f0000", 7.5),
)
PATH_COLOURS = ("#1f5fbf", "#119a8a", "#8a3fbf", "#bf8a1f")

ROW_Y = {Role.CORE: 70, Role.AGG: 190, Role.EDGE: 310, Role.HOST: 430}
NODE_FILL = {Role.CORE: "#e8eef8", Role.AGG: "#e8f4ea", Role.EDGE: "#fbf3e4",
             Role.HOST: "#ffffff"}


def bucket_of(load: float, busiest: float) -> Bucket:
    """The bucket of a link carrying `load` bytes when the busiest carries `busiest`."""
    if load <= 0 or busiest <= 0:
        return BUCKETS[0]
    fraction = load / busiest
    for bucket in BUCKETS[1:]:
        if fraction <= bucket.upto + 1e-12:
            return bucket
    return BUCKETS[-1]


def positions(topo: FatTree, width: float) -> dict[str, tuple[float, float]]:
    """(x, y) per node: hosts evenly spread, each switch above the middle of what it serves."""
    hosts = topo.hosts
    step = width / (len(hosts) + 1)
    pos = {h: (step * (i + 1), float(ROW_Y[Role.HOST])) for i, h in enumerate(hosts)}
    for edge in topo.edges:
        xs = [pos[h][0] for h in topo.hosts if topo.edge_of(h) == edge]
        pos[edge] = (sum(xs) / len(xs), float(ROW_Y[Role.EDGE]))
    for pod in range(topo.pods):
        edges = [e for e in topo.edges if topo.nodes[e].pod == pod]
        aggs = [a for a in topo.aggs if topo.nodes[a].pod == pod]
        left, right = pos[edges[0]][0] - step / 2, pos[edges[-1]][0] + step / 2
        gap = (right - left) / (len(aggs) + 1)
        for i, agg in enumerate(aggs):
            pos[agg] = (left + gap * (i + 1), float(ROW_Y[Role.AGG]))
    cores = topo.cores
    gap = width / (len(cores) + 1)
    for i, core in enumerate(cores):
        pos[core] = (gap * (i + 1), float(ROW_Y[Role.CORE]))
    return pos


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def link_map_svg(topo: FatTree, link_bytes: Mapping[Direction, float],
                 paths: Sequence[Sequence[str]] = (), title: str = "",
                 width: float = 960) -> str:
    """The SVG picture (text) of `topo` with `link_bytes` ((src, dst) -> bytes) and
    `paths` drawn over it. Directions not in `link_bytes` count as 0 bytes."""
    pos = positions(topo, width)
    loads = {link.name: float(link_bytes.get((link.a.node, link.b.node), 0))
             + float(link_bytes.get((link.b.node, link.a.node), 0)) for link in topo.links}
    busiest = max(loads.values(), default=0.0)
    total = sum(loads.values())
    height = ROW_Y[Role.HOST] + 110
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="linkmap" width="{width:.0f}" '
           f'height="{height}" viewBox="0 0 {width:.0f} {height}" role="img" '
           f'aria-label="{html.escape(title or "fat tree link load")}" '
           'font-family="system-ui, sans-serif">']
    out.append(f'<rect width="{width:.0f}" height="{height}" fill="#ffffff"/>')
    if title:
        out.append(f'<text x="12" y="22" font-size="14" font-weight="600">'
                   f'{html.escape(title)}</text>')
    labels = []
    for link in topo.links:
        a, b = link.a.node, link.b.node
        (x1, y1), (x2, y2) = pos[a], pos[b]
        load = loads[link.name]
        bucket = bucket_of(load, busiest)
        up = float(link_bytes.get((a, b), 0))
        down = float(link_bytes.get((b, a), 0))
        share = 100 * load / total if total else 0.0
        tip = (f"{link.name}: {a}\u2192{b} {_fmt_bytes(up)}, {b}\u2192{a} {_fmt_bytes(down)}"
               f" ({share:.1f}% of all bytes)")
        out.append(f'<line class="link" data-link="{link.name}" data-bucket="{bucket.name}" '
                   f'data-bytes="{load:.0f}" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" '
                   f'y2="{y2:.1f}" stroke="{bucket.colour}" stroke-width="{bucket.width}" '
                   f'stroke-linecap="round"><title>{html.escape(tip)}</title></line>')
        if load > 0:
            share_text = f"{share:.0f}%" if share >= 0.5 else "&lt;1%"
            mx, my = x1 + (x2 - x1) * 0.55, y1 + (y2 - y1) * 0.55
            labels.append(f'<text x="{mx:.1f}" y="{my + 3:.1f}" font-size="9" '
                          'text-anchor="middle" paint-order="stroke" stroke="#ffffff" '
                          f'stroke-width="3">{share_text}</text>')
    for i, path in enumerate(paths):
        pts = " ".join(f"{pos[n][0]:.1f},{pos[n][1]:.1f}" for n in path if n in pos)
        colour = PATH_COLOURS[i % len(PATH_COLOURS)]
        out.append(f'<polyline class="path" data-path="{html.escape(" ".join(path))}" '
                   f'points="{pts}" fill="none" stroke="{colour}" stroke-width="2.5" '
                   'stroke-dasharray="6 4" opacity="0.9"/>')
    out += labels
    for name, node in topo.nodes.items():
        x, y = pos[name]
        if node.role is Role.HOST:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="11" fill="#ffffff" '
                       'stroke="#444"/>')
        else:
            out.append(f'<rect x="{x - 17:.1f}" y="{y - 11:.1f}" width="34" height="22" rx="4" '
                       f'fill="{NODE_FILL[node.role]}" stroke="#444"/>')
        out.append(f'<text x="{x:.1f}" y="{y + 4:.1f}" font-size="10" '
                   f'text-anchor="middle">{name}</text>')
    ly = ROW_Y[Role.HOST] + 45
    out.append(f'<text x="12" y="{ly}" font-size="11">Colour: a link\u2019s bytes (both '
               f'directions) as a share of the busiest link\u2019s {_fmt_bytes(busiest)}; '
               f'labels: its share of all {_fmt_bytes(total)} the links carried</text>')
    x = 12.0
    for bucket in BUCKETS:
        out.append(f'<line class="legend" data-bucket="{bucket.name}" x1="{x:.0f}" '
                   f'y1="{ly + 22}" x2="{x + 30:.0f}" y2="{ly + 22}" stroke="{bucket.colour}" '
                   f'stroke-width="{bucket.width}"/>')
        out.append(f'<text x="{x + 36:.0f}" y="{ly + 26}" font-size="11">'
                   f'{html.escape(bucket.name)}</text>')
        x += 46 + 6.2 * len(bucket.name)
    out.append("</svg>")
    return "\n".join(out)


def link_table(manifests: Sequence[Mapping[str, Any]], topo: FatTree) -> pd.DataFrame:
    """Per-link counters of each run from its manifest's `interface_counters`.

    A switch interface's counters say what the link carried both ways: its `tx_*` left
    the switch towards the peer, its `rx_*` arrived from the peer. When both ends of a
    link were counted, a direction is read from the sending end (its tx)."""
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for manifest in manifests:
        run_id = str(manifest.get("run_id", ""))
        counters = manifest.get("interface_counters") or {}
        for intf, c in counters.items():
            try:
                link = topo.link_of_intf(intf)
            except KeyError:
                continue
            node = intf.split("-", 1)[0]
            peer = link.peer_of(node).node
            for src, dst, b, p, sender in ((node, peer, "tx_bytes", "tx_packets", True),
                                           (peer, node, "rx_bytes", "rx_packets", False)):
                key = (run_id, src, dst)
                if key in rows and (rows[key]["_sender"] or not sender):
                    continue
                rows[key] = {"run_id": run_id, "link": link.name, "tier": str(link.tier),
                             "src": src, "dst": dst, "bytes": int(c.get(b, 0)),
                             "packets": int(c.get(p, 0)), "_sender": sender}
    frame = pd.DataFrame(list(rows.values()), columns=[*LINK_COLUMNS, "_sender"])
    return frame.drop(columns="_sender").sort_values(
        ["run_id", "link", "src"], ignore_index=True)


def configuration_maps(manifests: Sequence[Mapping[str, Any]], topo: FatTree,
                       factors: Sequence[str]) -> list[tuple[str, str]]:
    """(label, SVG) per configuration (one combination of `factors`' levels, all its runs
    and flow types together), for the runs whose manifests hold interface counters."""
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for manifest in manifests:
        if not manifest.get("interface_counters"):
            continue
        levels = manifest.get("factors") or {}
        groups.setdefault(tuple(str(levels.get(f, "")) for f in factors), []).append(manifest)
    out = []
    for key, members in groups.items():
        table = link_table(members, topo)
        per_dir = table.groupby(["src", "dst"])["bytes"].sum()
        label = ", ".join(f"{f}={v}" for f, v in zip(factors, key, strict=True)) or "all runs"
        title = f"Bytes per link: {label} ({len(members)} run(s))"
        out.append((label, link_map_svg(topo, {(str(s), str(d)): float(b)
                                               for (s, d), b in per_dir.items()}, (), title)))
    return out
