"""Did a change move the results? Two metrics.csv of the same config, compared cell by
cell (no emulation).

    python benchmarks/metrics_shift.py docs/reproduction/noisy/metrics.csv NEW/metrics.csv

A cell is a (flow type, switching, host) combination; per cell and metric it prints both
means, the new one as a percentage of the reference, and a two-sided Mann-Whitney U
test's p over the cell's rows (transfer groups: 8 per cell in the reference noisy plan:
2 groups x 2 iterations x 2 repetitions). Then, per metric, how many cells differ at
p < 0.05: with 21 cells about one such flag per metric is expected by chance alone.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
from scipy.stats import mannwhitneyu

METRICS = ("fct_s", "goodput_mbps", "throughput_mbps", "utilization", "retrans_pct")
CELL = ["flow_type", "switching", "host"]


def compare(ref: pd.DataFrame, new: pd.DataFrame, metrics: tuple[str, ...] = METRICS
            ) -> pd.DataFrame:
    """One row per cell and metric: means, new/ref, Mann-Whitney p (pure)."""
    rows = []
    for cell, r in ref.groupby(CELL):
        n = new
        for col, value in zip(CELL, cell, strict=True):
            n = n[n[col] == value]
        for m in metrics:
            a, b = r[m].dropna(), n[m].dropna()
            if a.empty or b.empty:
                continue
            p = mannwhitneyu(a, b).pvalue if a.nunique() + b.nunique() > 2 else 1.0
            rows.append({**dict(zip(CELL, cell, strict=True)), "metric": m,
                         "ref_n": len(a), "new_n": len(b), "ref_mean": a.mean(),
                         "new_mean": b.mean(),
                         "new_pct": 100 * b.mean() / a.mean() if a.mean() else float("nan"),
                         "p": p})
    return pd.DataFrame(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reference", type=Path)
    ap.add_argument("new", type=Path)
    args = ap.parse_args()
    table = compare(pd.read_csv(args.reference), pd.read_csv(args.new))
    if table.empty:
        print("no cell in common", file=sys.stderr)
        return 1
    with pd.option_context("display.width", 160, "display.max_rows", 500):
        print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    print()
    for m, g in table.groupby("metric"):
        flagged = g[g["p"] < 0.05]
        print(f"{m}: {len(flagged)} of {len(g)} cells differ at p < 0.05"
              + (f" ({', '.join('/'.join(map(str, r[CELL])) for _, r in flagged.iterrows())})"
                 if len(flagged) else "")
              + f"; new/ref of the means, median over cells {g['new_pct'].median():.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
