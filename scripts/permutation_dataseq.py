"""MPTCP's connection-level window in a permutation run, from its access-link captures:
how much data a sender had sent (data sequence, DSS option) beyond the receiver's data
acknowledgement, against the receive window the receiver advertised, while the sender
stalled and while it sent. Prints one Markdown row per run.

    python scripts/permutation_dataseq.py RESULTS/runs/long_mptcp-8_rep1 ...

MPTCP's receive window applies to the data sequence: a sender may have at most the
advertised window beyond the last DATA_ACK, whatever its subflows' own windows say. Data
that arrives on a fast subflow beyond a gap (a segment still on a slow or lossy subflow)
waits at the receiver, unacknowledged at the connection level, and fills that window:
head-of-line blocking across subflows.

Per transfer, in the window of scripts/permutation_figs.py, on the server's access link,
at the start of every 10 ms bin: `outstanding` = highest data sequence sent (plus its
length) - last DATA_ACK seen; `rwnd` = the receiver's last advertised window, scaled by
the window scale of its SYN on that subflow. A bin is a stall when the server put none of
the transfer's data on the link in it (scripts/permutation_causes.py's `idle`). Columns
(means over the run's MPTCP transfers): stalled share of bins, median outstanding KB in
stalled and in sending bins, median rwnd KB, and the share of stalled and of sending bins
with outstanding >= 90 % of rwnd (window full). Sequence numbers are compared in their
low 32 bits (8 MB transfers).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from pathdiv.analysis.capture.dss import MASK, dss_fields
from pathdiv.analysis.capture.flows import (
    capture_files,
    group_connections,
    match_transfers,
    split_subflows,
)
from pathdiv.analysis.capture.pcap import ip_to_int, read_pcap
from pathdiv.analysis.metrics.table import load_transfers
from pathdiv.topologies.conditions import topology_of
from pathdiv.topologies.fattree import FatTree

WARMUP_S = 0.5
BIN_S = 0.01


def access_packets(run_dir: Path, topo: FatTree) -> pd.DataFrame:
    """Every packet of the hosts' access links with the option fields, in time order."""
    files = capture_files(run_dir / "captures")
    index = {lk.name: i for i, lk in enumerate(topo.links)}
    tables = []
    for host in topo.hosts:
        link = topo.links_of(host)[0]
        intf = link.b.intf if link.b.intf in files else link.a.intf
        for path in files.get(intf, []):
            t = read_pcap(path)
            t = pd.concat([t, dss_fields(path)], axis=1)
            t["link"] = np.int16(index[link.name])
            tables.append(t)
    out = pd.concat(tables, ignore_index=True)
    return out.iloc[np.argsort(out["ts"].to_numpy(), kind="stable")].reset_index(drop=True)


def run_row(run_dir: Path) -> dict[str, object]:
    cfg = json.loads((run_dir / "manifest.json").read_text())["config"]
    topo = topology_of(cfg)
    pk, table = split_subflows(access_packets(run_dir, topo))
    table = group_connections(table)
    transfers = load_transfers(run_dir)
    members = match_transfers(transfers, table, topo)
    t0, t1 = transfers["start_s"].max() + WARMUP_S, transfers["end_s"].min()
    grid = np.arange(t0, t1, BIN_S)
    index = {lk.name: i for i, lk in enumerate(topo.links)}
    rows = []
    for tr in transfers.itertuples(index=False):
        caddr = {ip_to_int(a) for a in topo.host_addresses(str(tr.client))}
        mine = pk[pk["subflow"].isin(members.get(int(tr.transfer_id), []))]
        scale = (mine[mine["src"].isin(caddr) & (mine["wscale"] >= 0)]
                 .groupby("subflow")["wscale"].first())
        at = mine[mine["link"] == index[topo.links_of(str(tr.server))[0].name]]
        data = at[(at["payload"] > 0) & at["dst"].isin(caddr) & (at["dsn"] >= 0)]
        acks = at[at["src"].isin(caddr) & (at["dack"] >= 0)]
        if data.empty or acks.empty or len(grid) == 0:
            continue
        base = int(data["dsn"].iloc[0])
        sent = (data["dsn"] + data["dlen"] - base) & MASK
        sent = sent.where(sent < 2**31, 0).cummax().to_numpy()
        acked = (acks["dack"] - base) & MASK
        acked = acked.where(acked < 2**31, 0).cummax().to_numpy()
        rwnd = acks["win"].to_numpy() * 2.0 ** acks["subflow"].map(scale).fillna(0).to_numpy()
        i_d = np.searchsorted(data["ts"].to_numpy(), grid, side="right") - 1
        i_a = np.searchsorted(acks["ts"].to_numpy(), grid, side="right") - 1
        out = (np.where(i_d >= 0, sent[np.maximum(i_d, 0)], 0)
               - np.where(i_a >= 0, acked[np.maximum(i_a, 0)], 0))
        window = np.where(i_a >= 0, rwnd[np.maximum(i_a, 0)], np.nan)
        stalled = np.histogram(data["ts"].to_numpy(), bins=np.append(grid, t1))[0] == 0
        full = out >= 0.9 * window
        rows.append({
            "stalled": stalled.mean(),
            "out_stalled_kb": np.median(out[stalled]) / 1e3 if stalled.any() else np.nan,
            "out_sending_kb": np.median(out[~stalled]) / 1e3,
            "rwnd_kb": np.nanmedian(window) / 1e3,
            "full_stalled": full[stalled].mean() if stalled.any() else np.nan,
            "full_sending": full[~stalled].mean()})
    frame = pd.DataFrame(rows)
    return {"run": f"{run_dir.parent.parent.name}/{run_dir.name}", "transfers": len(frame),
            **{c: float(frame[c].mean()) for c in frame.columns}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--csv", type=Path, help="also write the per-run table here")
    args = ap.parse_args()
    table = pd.DataFrame([run_row(r) for r in args.runs])
    if args.csv:
        table.to_csv(args.csv, index=False, float_format="%.4f")
    cols = list(table.columns)
    print("| " + " | ".join(cols) + " |")
    print("|" + " --- |" * len(cols))
    for row in table.itertuples(index=False):
        print("| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v)
                                for v in row) + " |")


if __name__ == "__main__":
    main()
