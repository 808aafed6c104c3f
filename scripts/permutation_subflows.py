"""Where an MPTCP permutation run's throughput went, subflow by subflow, from its captures:
when the subflows were established, how the sender spread the bytes over them, and
whether the subflows on busier paths carried less (what the coupled increase is for).
Prints Markdown, one row per run.

    python scripts/permutation_subflows.py docs/reproduction/permutation/k4/runs/*mptcp*

Per MPTCP transfer (transfers.csv, matched to its subflows as the analysis matches them):
  joined_ms    when the last subflow's SYN left, after the initial subflow's
  first_data   share of the transfer's time before the last subflow carried data
  top_share    the largest share of the payload one subflow carried (1/n: even)
  paths        distinct fabric paths the subflows took (all links captured only)
  busy_corr    Spearman correlation, over a transfer's subflows, of the bytes a subflow
               carried with how busy its busiest fabric link was (bytes of every flow
               over the transfer's time at the link rate); strongly negative when
               traffic moved off busy paths (all links captured only)
Each printed as the median over the run's MPTCP transfers.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from pathdiv.analysis.capture.flows import (
    group_connections,
    match_transfers,
    read_link_captures,
    split_subflows,
)
from pathdiv.analysis.capture.pcap import TCP_SYN, ip_to_int
from pathdiv.analysis.metrics.table import load_transfers
from pathdiv.topologies.conditions import topology_of
from pathdiv.topologies.model import Tier


def run_row(run_dir: Path) -> dict[str, object]:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    cfg = manifest["config"]
    topo = topology_of(cfg)
    rate_bps = float(cfg["topology"]["links"]["core"]["bw_mbps"]) * 1e6
    transfers = load_transfers(run_dir)
    packets = read_link_captures(run_dir / "captures", topo)
    pk, table = split_subflows(packets)
    table = group_connections(table)
    members = match_transfers(transfers, table, topo)
    fabric = {i for i, lk in enumerate(topo.links) if lk.tier is not Tier.HOST}
    captured_fabric = bool(set(np.unique(pk["link"])) & fabric)
    by_sub = pk.groupby("subflow").indices
    rows = []
    for tr in transfers.itertuples(index=False):
        sfs = [s for s in members.get(int(tr.transfer_id), []) if s in by_sub]
        if len(sfs) < 2:
            continue
        client = {ip_to_int(a) for a in topo.host_addresses(str(tr.client))}
        duration = float(tr.end_s - tr.start_s)
        syns, firsts, sent, links = [], [], {}, {}
        for s in sfs:
            p = pk.iloc[by_sub[s]]
            syn = p[(p["flags"] & TCP_SYN) != 0]
            syns.append(float(syn["ts"].min()) if len(syn) else float(p["ts"].min()))
            data = p[(p["payload"] > 0) & p["dst"].isin(client)]
            if len(data):
                firsts.append(float(data["ts"].min()))
            sent[s] = float(data["payload"].sum())
            links[s] = set(np.unique(data["link"])) & fabric
        total = sum(sent.values())
        row = {"joined_ms": 1000 * (max(syns) - min(syns)),
               "first_data": (max(firsts) - min(syns)) / duration if firsts else np.nan,
               "top_share": max(sent.values()) / total if total else np.nan,
               "paths": np.nan, "busy_corr": np.nan}
        if captured_fabric:
            row["paths"] = float(len({frozenset(v) for v in links.values() if v}))
            window = pk[(pk["ts"] >= tr.start_s) & (pk["ts"] <= tr.end_s)]
            load = window.groupby("link")["wire_len"].sum() * 8 / (rate_bps * duration)
            busy = [max((load.get(lk, 0.0) for lk in links[s]), default=np.nan) for s in sfs]
            bytes_ = [sent[s] for s in sfs]
            if len(set(busy)) > 1 and np.all(np.isfinite(busy)):
                row["busy_corr"] = float(stats.spearmanr(bytes_, busy).statistic)
        rows.append(row)
    frame = pd.DataFrame(rows)
    out: dict[str, object] = {"run": run_dir.name, "transfers": len(frame)}
    for col in ("joined_ms", "first_data", "top_share", "paths", "busy_corr"):
        out[col] = float(frame[col].median()) if len(frame) else np.nan
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    args = ap.parse_args()
    rows = [run_row(r) for r in args.runs]
    print("| run | MPTCP transfers | joined ms | before all carried data | top subflow's "
          "share | distinct paths | bytes vs busiest link (Spearman) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    def num(value: object, spec: str) -> str:
        return "-" if not np.isfinite(float(value)) else format(float(value), spec)

    for r in rows:
        print(f"| {r['run']} | {r['transfers']} | {num(r['joined_ms'], '.2f')} | "
              f"{num(r['first_data'], '.1%')} | {num(r['top_share'], '.2f')} | "
              f"{num(r['paths'], '.1f')} | {num(r['busy_corr'], '+.2f')} |")


if __name__ == "__main__":
    main()
