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
import struct
from pathlib import Path

import numpy as np
import pandas as pd

from pathdiv.analysis.capture.flows import (
    capture_files,
    group_connections,
    match_transfers,
    split_subflows,
)
from pathdiv.analysis.capture.pcap import RECORD_HEADER, ip_to_int, read_pcap, read_records
from pathdiv.analysis.metrics.table import load_transfers
from pathdiv.topologies.conditions import topology_of
from pathdiv.topologies.fattree import FatTree

WARMUP_S = 0.5
BIN_S = 0.01
MASK = 0xFFFFFFFF
TCPOPT_WSCALE, TCPOPT_MPTCP, MPTCP_DSS = 3, 30, 2


def option_fields(path: Path) -> pd.DataFrame:
    """Per frame of a pcap (in file order, as read_pcap returns them): TCP window, window
    scale (SYNs; -1 none), and from MPTCP's DSS option the data sequence (-1 none), its
    length and the DATA_ACK (-1 none), each in its low 32 bits."""
    buf, offsets, link_header = read_records(path)
    n = len(offsets)
    win, wscale = np.zeros(n, np.int64), np.full(n, -1, np.int64)
    dsn, dlen, dack = np.full(n, -1, np.int64), np.zeros(n, np.int64), np.full(n, -1, np.int64)
    for i, off in enumerate(offsets):
        frame = int(off) + RECORD_HEADER
        if link_header and buf[frame + 12:frame + 14] != b"\x08\x00":
            continue
        ip = frame + link_header
        if buf[ip] >> 4 != 4 or buf[ip + 9] != 6:
            continue
        tcp = ip + (buf[ip] & 15) * 4
        if tcp + 20 > len(buf):
            continue
        win[i] = struct.unpack_from(">H", buf, tcp + 14)[0]
        end = min(tcp + (buf[tcp + 12] >> 4) * 4, len(buf))
        j = tcp + 20
        while j + 1 < end:
            kind = buf[j]
            if kind == 0:
                break
            if kind == 1:
                j += 1
                continue
            length = buf[j + 1]
            if kind == TCPOPT_WSCALE and j + 2 < end:
                wscale[i] = buf[j + 2]
            elif kind == TCPOPT_MPTCP and length >= 4 and buf[j + 2] >> 4 == MPTCP_DSS:
                flags, p = buf[j + 3], j + 4
                if flags & 1:  # DATA_ACK present, 8 bytes when flag a
                    wide = bool(flags & 2)
                    dack[i] = struct.unpack_from(">Q" if wide else ">I", buf, p)[0] & MASK
                    p += 8 if wide else 4
                if flags & 4 and p + 4 <= end:  # mapping: DSN (8 bytes when m), SSN, length
                    wide = bool(flags & 8)
                    dsn[i] = struct.unpack_from(">Q" if wide else ">I", buf, p)[0] & MASK
                    p += (8 if wide else 4) + 4
                    if p + 2 <= end:
                        dlen[i] = struct.unpack_from(">H", buf, p)[0]
            j += max(length, 2)
    return pd.DataFrame({"win": win, "wscale": wscale, "dsn": dsn, "dlen": dlen,
                         "dack": dack})


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
            t = pd.concat([t, option_fields(path)], axis=1)
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
