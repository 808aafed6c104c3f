"""Seed 004's per-cell tables beside ours: Table IV (RTT and throughput per subflow count,
and the RTT ratios D_i/D_j) from seed004-sweep's metrics.csv, Tables V-VI (extra subflow
elimination: how often the windows it should close were closed, and how often it closed
one it should not have) from seed004-ese's. Prints Markdown.

    python scripts/seed004_tables.py --sweep docs/reproduction/seed004/sweep/metrics.csv \
        --ese docs/reproduction/seed004/ese/metrics.csv

ESE per transfer, from open_subflows (analysis/metrics/transfer.py): the subflows that
should stay open are one per path the connection's subflows were given (one-path: 1;
disjoint: min(subflows, paths)). A transfer with that many open is a success; with fewer,
a window was closed that should not have been (a false positive where the paths did
not share a bottleneck); with more, an extra subflow stayed open (a miss).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

REFERENCE = Path(__file__).resolve().parents[1] / "analysis" / "references" / "seed004.yaml"


def table_iv(metrics: pd.DataFrame, paper: list[list[float]]) -> str:
    ours = metrics[metrics["ok"]].groupby("subflow_count")
    rows = ["| subflows | paper RTT ms | ours RTT ms (n, sd) | paper Mbit/s | ours Mbit/s |",
            "| --- | --- | --- | --- | --- |"]
    mean_rtt = {}
    for n, tput, rtt in paper:
        level = f"sf{int(n)}"
        g = ours.get_group(level) if level in ours.groups else metrics.iloc[0:0]
        mean_rtt[int(n)] = (rtt, g["rtt_ms"].mean())
        rows.append(f"| {int(n)} | {rtt:.3f} | {g['rtt_ms'].mean():.3f} ({len(g)}, "
                    f"{g['rtt_ms'].std():.3f}) | {tput:.1f} | {g['throughput_mbps'].mean():.2f} |")
    rows += ["", "| ratio | paper | ours |", "| --- | --- | --- |"]
    for a, b in ((2, 1), (4, 1), (8, 1), (4, 2), (8, 2), (8, 4)):
        (pa, oa), (pb, ob) = mean_rtt[a], mean_rtt[b]
        rows.append(f"| D{a}/D{b} | {pa / pb:.2f} | {oa / ob:.2f} |")
    return "\n".join(rows)


def ese_outcomes(metrics: pd.DataFrame) -> pd.DataFrame:
    m = metrics[metrics["ok"]].copy()
    n = m["subflow_count"].str[2:].astype(int)
    m["expected_open"] = np.where(m["placement"] == "one-path", 1,
                                  np.minimum(n, m["paths"].round().astype(int)))
    m["outcome"] = np.select([m["open_subflows"] == m["expected_open"],
                              m["open_subflows"] < m["expected_open"]],
                             ["success", "closed too many"], "extra left open")
    return m


def table_v(metrics: pd.DataFrame, reference: dict) -> str:
    m = ese_outcomes(metrics)
    paper = {r["num_subflows"]: r["rate"][1] for r in reference["table_v"]["rows"]}
    rows = ["| subflows | placement | paper (alpha 1.3) | ours: success | closed too many "
            "| extra left open | n |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for (level, placement), g in m.groupby(["subflow_count", "placement"], sort=True):
        share = g["outcome"].value_counts(normalize=True)
        n = int(level[2:])
        where = (f"{paper.get(n, float('nan')):.3f}" if placement == "one-path" else
                 f"FP {reference['table_vi']['false_positive']:.3f} (Table VI)")
        rows.append(f"| {n} | {placement} | {where} | {share.get('success', 0):.3f} | "
                    f"{share.get('closed too many', 0):.3f} | "
                    f"{share.get('extra left open', 0):.3f} | {len(g)} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sweep", type=Path, help="seed004-sweep's metrics.csv")
    ap.add_argument("--ese", type=Path, help="seed004-ese's metrics.csv")
    args = ap.parse_args()
    tables = yaml.safe_load(REFERENCE.read_text())["tables"]
    if args.sweep:
        print("Table IV (V.A) beside seed004-sweep\n")
        print(table_iv(pd.read_csv(args.sweep), tables["table_iv"]["values"]))
        print()
    if args.ese:
        print("Tables V-VI (V.A, V.C) beside seed004-ese\n")
        print(table_v(pd.read_csv(args.ese), tables))


if __name__ == "__main__":
    main()
