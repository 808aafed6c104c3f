"""Table IV's candidate causes, each measured: all 24 cells under each candidate.

    python -m pathdiv.analysis.report.table4_candidates measure RESULTS_DIR --out CSV
    python -m pathdiv.analysis.report.table4_candidates table FOLDER... [--write PAGE]

The study's excess traffic (seed 001, V.B, Table IV: bytes beyond the payload, % of the
payload) grows with flow size and load; ours does not. A candidate cause is either a
definition (how the study may have counted) or a setting (how it may have run):

- definitions, re-measured from one run's captures (`measure`: one row per transfer
  group, written as a compact CSV that is committed beside the run's metrics):
  `every hop` (each frame counted on every link it crossed, not divided by the hops),
  `both ends` (a switch-to-switch link counted at both of its ports, as captures on
  every switch interface do), `no ACKs` (frames without payload left out), `offloads
  on` (data segments of one subflow that follow each other on a link merged into
  super-frames of up to 64 KB, as captures with segmentation offloads on show them: the
  most header bytes offloads could hide), and from the groups' throughput and goodput
  `ratio of means` (mean throughput over mean goodput, per response group) and `per-flow
  throughput` (mean over flows of each flow's throughput, over the group's goodput);
- settings, from runs made with them (`table`: their metrics.csv): 1000-packet queues
  (Mininet's default txqueuelen where `TCLink` has no `max_queue_size`; ours are 100),
  bmv2 on the wall clock.

`table` reads folders (FOLDER=SETTING names the setting they were run with) holding
metrics.csv (a setting's runs) or table4_candidates.csv (definitions) and writes one row
per cell: the paper's figure, ours, and each
candidate's mean excess, then per candidate the cells within 3 points of the paper's,
the median gap, and how far it moves the cells (its effect). Written between
`<!-- table4-candidates:begin -->` and `<!-- table4-candidates:end -->` of the page.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pathdiv.analysis.capture.flows import (
    group_connections,
    match_transfers,
    read_link_captures,
    split_subflows,
)
from pathdiv.analysis.capture.pcap import ip_to_int
from pathdiv.analysis.metrics.table import load_manifest, load_transfers
from pathdiv.analysis.metrics.transfer import PairGeometry, measure_transfer
from pathdiv.analysis.report.generated import write_or_print
from pathdiv.analysis.stats.claims import load_reference
from pathdiv.topologies.conditions import topology_of
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.model import Tier

BEGIN = "<!-- table4-candidates:begin -->"
END = "<!-- table4-candidates:end -->"
SUPER_FRAME = 65536  # the largest segment an offloading stack hands down
TOLERANCE = 3.0
CELL = ["condition", "flow_type", "switching"]
# per-group wire-byte definitions: column -> label
DEFINITIONS = {"ours": "ours", "every_hop": "every hop", "both_ends": "both ends",
               "no_acks": "no ACKs", "offloads": "offloads on"}
GROUP_KEYS = ["run_id", "repetition", "condition", "flow_type", "switching", "host",
              "group_id"]


def _super_frame_savings(pk: pd.DataFrame) -> float:
    """Header bytes that merging each run of contiguous data segments (one subflow, one
    link, one direction) into super-frames of up to 64 KB would hide."""
    data = pk[pk["payload"].to_numpy() > 0]
    if data.empty:
        return 0.0
    saved = 0.0
    keys = ["link", "subflow", "src"]
    for _, rows in data.groupby(keys, sort=False):
        seq = rows["seq"].to_numpy().astype(np.int64)
        size = rows["payload"].to_numpy().astype(np.int64)
        header = rows["wire_len"].to_numpy().astype(np.int64) - size
        follows = np.zeros(len(rows), dtype=bool)
        follows[1:] = (seq[1:] - seq[:-1]) % (1 << 32) == size[:-1]
        run_bytes = 0
        for i in range(len(rows)):
            if follows[i] and run_bytes + size[i] <= SUPER_FRAME:
                saved += header[i]  # folded into the super-frame before it
                run_bytes += size[i]
            else:
                run_bytes = size[i]
    return saved


def measure_run(run_dir: Path) -> pd.DataFrame:
    """One row per transfer of one run: payload, FCT and each definition's wire bytes
    (`ours` and `fct_s` are pathdiv.analysis.metrics.transfer's)."""
    manifest = load_manifest(run_dir)
    topo = topology_of(manifest.get("config", {}))
    if not isinstance(topo, FatTree):
        raise ValueError(f"{run_dir}: Table IV cells are fat-tree runs, not "
                         f"{type(topo).__name__}")
    transfers = load_transfers(run_dir)
    pk, table = split_subflows(read_link_captures(run_dir / "captures", topo))
    table = group_connections(table)
    members = match_transfers(transfers, table, topo)
    index = pk.groupby("subflow").indices
    fabric = np.array([lk.tier is not Tier.HOST for lk in topo.links])
    rows = []
    for tr in transfers.itertuples(index=False):
        client, server = str(tr.client), str(tr.server)
        geo = PairGeometry.of(topo, client, server)
        sfs = [s for s in members.get(int(tr.transfer_id), []) if s in index]
        tp = pk.iloc[np.sort(np.concatenate([index[s] for s in sfs]))] if sfs else pk.iloc[0:0]
        server_addrs = {ip_to_int(a) for a in topo.host_addresses(server)}
        initiators = set(table.loc[sfs, "init_addr"].astype(int)) - server_addrs
        client_addrs = np.array(sorted({ip_to_int(a) for a in topo.host_addresses(client)}
                                       | initiators), dtype=np.uint32)
        measured = measure_transfer(tp, geo, client_addrs, int(tr.size_bytes))
        wire = tp["wire_len"].to_numpy().astype(np.int64)
        on_fabric = fabric[tp["link"].to_numpy()] if len(tp) else np.zeros(0, dtype=bool)
        total = float(wire.sum())
        rows.append({
            "transfer_id": int(tr.transfer_id), "group_id": getattr(tr, "group_id", 0),
            "flow_type": getattr(tr, "flow_type", manifest.get("flow_type")),
            "payload": float(tr.size_bytes), "fct_s": measured["fct_s"],
            "measured": bool(sfs) and bool(np.isfinite(measured["fct_s"])),
            "ours": measured["wire_bytes"], "every_hop": total,
            "both_ends": (total + float(wire[on_fabric].sum())) / geo.hops,
            "no_acks": float(wire[tp["payload"].to_numpy() > 0].sum()) / geo.hops,
            "offloads": (total - _super_frame_savings(tp)) / geo.hops})
    out = pd.DataFrame(rows)
    out.insert(0, "run_id", manifest.get("run_id", run_dir.name))
    for name, level in (manifest.get("factors") or {}).items():
        out[name] = level
    out["repetition"] = manifest.get("repetition")
    out["condition"] = (manifest.get("config", {}).get("workload") or {}).get("pattern")
    return out


def group_rows(per_transfer: pd.DataFrame) -> pd.DataFrame:
    """Per transfer group: payload, each definition's excess, and the group's and its
    flows' throughput and goodput (Mbit/s)."""
    keys = [k for k in GROUP_KEYS if k in per_transfer.columns]
    rows = []
    for key, g in per_transfer.groupby(keys, sort=False, dropna=False):
        payload = g["payload"].sum()
        fct = g["fct_s"].max()
        row: dict[str, Any] = dict(zip(keys, key if isinstance(key, tuple) else (key,),
                                       strict=True))
        row.update(transfers=len(g), measured=bool(g["measured"].all()), payload=payload,
                   fct_s=fct)
        for column in DEFINITIONS:
            row[f"excess_{column}_pct"] = 100.0 * (g[column].sum() - payload) / payload
        row["throughput_mbps"] = g["ours"].sum() * 8 / fct / 1e6 if fct > 0 else np.nan
        row["goodput_mbps"] = payload * 8 / fct / 1e6 if fct > 0 else np.nan
        per_flow = g["ours"] * 8 / g["fct_s"] / 1e6
        row["flow_throughput_mbps"] = float(per_flow[g["fct_s"] > 0].mean())
        rows.append(row)
    return pd.DataFrame(rows)


def measure(results_dir: Path) -> pd.DataFrame:
    """Every complete run of a results folder, one row per transfer group."""
    frames = []
    for manifest in sorted((results_dir / "runs").glob("*/manifest.json")):
        run = manifest.parent
        if load_manifest(run).get("status") != "complete" or not (run / "captures").is_dir():
            continue
        frames.append(group_rows(measure_run(run)))
    if not frames:
        raise ValueError(f"{results_dir}: no complete run with captures under runs/")
    return pd.concat(frames, ignore_index=True)


# ---- the table --------------------------------------------------------------------------

def _paper() -> pd.DataFrame:
    ref = load_reference("seed001")
    cells = [c for c in ref.claims if c.kind == "excess"]
    return pd.DataFrame([{"condition": c.where[0]["condition"][0],
                          "flow_type": c.where[0]["flow_type"][0],
                          "switching": c.compare[0][0]["switching"],
                          "paper": c.paper_pct} for c in cells])


def _cells(frame: pd.DataFrame, column: str) -> pd.Series:
    return frame.groupby(CELL)[column].mean()


def folder_setting(text: str) -> tuple[Path, str]:
    """FOLDER or FOLDER=SETTING: the setting names the folder's columns; folders with
    one setting (a noisy and a silent one) fill the same columns."""
    folder, sep, setting = text.partition("=")
    return Path(folder), setting if sep else ""


def columns_of(folder: Path, setting: str = "") -> dict[str, pd.Series]:
    """The candidate columns one folder gives: {label: mean excess per cell}. A folder
    with table4_candidates.csv gives one column per definition, else its metrics.csv's
    excess (every run, the fidelity verdict aside: the wall-clock runs are the evidence
    of what the switches' CPU does)."""
    tag = f", {setting}" if setting else ""
    out: dict[str, pd.Series] = {}
    defs = folder / "table4_candidates.csv"
    if defs.is_file():
        g = pd.read_csv(defs)
        g = g[g["measured"].astype(bool)]
        for column, label in DEFINITIONS.items():
            out[f"{label}{tag}"] = _cells(g, f"excess_{column}_pct")
        means = g.groupby(CELL)[["throughput_mbps", "goodput_mbps",
                                 "flow_throughput_mbps"]].mean()
        out[f"ratio of means{tag}"] = 100 * (means.throughput_mbps / means.goodput_mbps - 1)
        out[f"per-flow throughput{tag}"] = 100 * (means.flow_throughput_mbps
                                                  / means.goodput_mbps - 1)
    elif (folder / "metrics.csv").is_file():
        m = pd.read_csv(folder / "metrics.csv")
        out[setting or folder.name] = _cells(m, "excess_pct")
    return out


def build(sources: Sequence[str]) -> pd.DataFrame:
    table = _paper().set_index(CELL)
    for text in sources:
        for label, series in columns_of(*folder_setting(text)).items():
            series = series.reindex(table.index)
            table[label] = (series if label not in table.columns
                            else table[label].combine_first(series))
    return table.reset_index()


def _fmt(x: float, paper: float) -> str:
    if not np.isfinite(x):
        return ""
    mark = " ✓" if abs(x - paper) <= TOLERANCE else ""
    return f"{x:.1f}{mark}"


def markdown(table: pd.DataFrame, baseline: str) -> str:
    """The cells under each candidate, then per candidate: cells within 3 points, median
    gap, and its effect against `baseline` (mean over the cells it measured)."""
    labels = [c for c in table.columns if c not in (*CELL, "paper")]
    lines = ["| cell | paper | " + " | ".join(labels) + " |",
             "| --- | --- | " + " | ".join("---" for _ in labels) + " |"]
    for _, row in table.iterrows():
        cell = f"{row['condition']} / {row['flow_type']} / {row['switching']}"
        lines.append(f"| {cell} | {row['paper']:.2f} | "
                     + " | ".join(_fmt(row[lab], row["paper"]) for lab in labels) + " |")
    lines += ["", "| candidate | cells measured | within 3 points | median gap (points) | "
              f"effect against {baseline} (points, mean over its cells) |",
              "| --- | --- | --- | --- | --- |"]
    for lab in labels:
        values = table[lab]
        measured = values.notna()
        gap = (values - table["paper"])[measured]
        effect = (values - table[baseline])[measured & table[baseline].notna()]
        lines.append(f"| {lab} | {int(measured.sum())} | {int((gap.abs() <= TOLERANCE).sum())}"
                     f" | {gap.median():+.1f} | "
                     + ("" if lab == baseline or effect.empty else f"{effect.mean():+.1f}")
                     + " |")
    return "\n".join(lines) + "\n"


def render(folders: Sequence[str], baseline: str | None = None) -> str:
    table = build(folders)
    labels = [c for c in table.columns if c not in (*CELL, "paper")]
    base = baseline or next((lab for lab in labels if lab.startswith("ours")), labels[0])
    return (f"Generated by `python -m pathdiv.analysis.report.table4_candidates table "
            f"{shlex.join(map(str, folders))}`; do not edit by hand. ✓: within "
            f"{TOLERANCE:g} points of the paper's figure.\n\n" + markdown(table, base))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="re-measure a results folder's captures")
    m.add_argument("results", type=Path)
    m.add_argument("--out", type=Path, required=True, help="the CSV to write")
    t = sub.add_parser("table", help="the cells under each candidate")
    t.add_argument("folders", nargs="+", help="FOLDER or FOLDER=SETTING (the setting "
                   "names its columns, e.g. results=1000-packet queues)")
    t.add_argument("--write", type=Path, help="the Markdown page to fill")
    args = parser.parse_args(argv)
    if args.command == "measure":
        frame = measure(args.results)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(frame.to_csv(index=False))
        print(f"wrote {args.out} ({len(frame)} groups)")
        return
    write_or_print(render(args.folders), args.write, "Table IV candidates", BEGIN, END)


if __name__ == "__main__":
    main()
