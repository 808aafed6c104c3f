"""The permutation experiment beside its references: per level, the mean goodput of the
flows as a share of the optimum (every flow at its access link's rate), with a 95 %
confidence interval over the runs (each run one permutation), beside the flow-level
model of the same permutations on the same topology (analysis/references/flowmodel.py)
and Raiciu et al.'s figure (analysis/references/raiciu2011.yaml). Prints Markdown.

    python scripts/permutation_figs.py docs/reproduction/permutation/k4 \
        docs/reproduction/permutation/k8 [--draws 5]

Two measures per run, both divided by the access link rate:
  share (FCT)     the mean over its transfers of payload / FCT (goodput_mbps of
                  transfer_metrics.csv): what a finite transfer of the workload gets;
  share (window)  the delivered goodput of all hosts together (timeline.csv, 0.25 s bins)
                  while every transfer is under way, from 0.5 s after the last one
                  started to the first one's end, over hosts x rate: the long-running
                  flows' throughput the paper plots.
A results folder needs transfer_metrics.csv (`pathdiv analyze`) and each run's manifest,
transfers.csv and timeline.csv; `--csv FILE` keeps the per-run table, and `--from FILE`
prints from such a table alone (what docs/reproduction/permutation/ keeps).
"""

from __future__ import annotations

import argparse
import json
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats

from pathdiv.analysis.references.flowmodel import mean_share
from pathdiv.topologies.fattree import FatTree

REFERENCE = Path(__file__).resolve().parents[1] / "analysis" / "references" / "raiciu2011.yaml"
WARMUP_S = 0.5


def ci95(values: list[float]) -> tuple[float, float, float]:
    """Mean and the 95 % t interval of `values` (NaN bounds with fewer than two)."""
    a = np.array([v for v in values if np.isfinite(v)])
    if len(a) == 0:
        return float("nan"), float("nan"), float("nan")
    if len(a) < 2:
        return float(a.mean()), float("nan"), float("nan")
    half = stats.t.ppf(0.975, len(a) - 1) * a.std(ddof=1) / np.sqrt(len(a))
    return float(a.mean()), float(a.mean() - half), float(a.mean() + half)


def level_kind(cfg: dict) -> tuple[str, int]:
    """The flow model's kind and subflows for a run's resolved config."""
    hosts, mode = cfg["hosts"], cfg["switching"]["mode"]
    if hosts["transport"] == "tcp":
        return ("spray", 1) if mode == "spray" else ("single", 1)
    return "multipath", int(hosts["subflows"])


def window_share(run_dir: Path, hosts: int, rate_mbps: float) -> float:
    """Delivered goodput while every transfer is under way, as a share of the optimum."""
    timeline = run_dir / "timeline.csv"
    if not timeline.exists():
        return float("nan")
    tl = pd.read_csv(timeline)
    tr = pd.read_csv(run_dir / "transfers.csv")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    t0 = float(manifest.get("workload_start_wall_s") or tr["start_s"].min())
    start, end = tr["start_s"].max() - t0 + WARMUP_S, tr["end_s"].min() - t0
    inside = tl[(tl["t_s"] >= start) & (tl["t_s"] + 0.25 <= end)]
    if inside.empty:
        return float("nan")
    return float(inside["measured_mbps"].mean() / (hosts * rate_mbps))


def folder_table(folder: Path, draws: int) -> pd.DataFrame:
    """One row per run: level, both shares and the model's share of its permutation."""
    metrics = pd.read_csv(folder / "transfer_metrics.csv")
    rows = []
    for run_id, g in metrics.groupby("run_id"):
        run_dir = folder / "runs" / str(run_id)
        cfg = json.loads((run_dir / "manifest.json").read_text())["config"]
        topo = FatTree(int(cfg["topology"]["k"]))
        rate = float(cfg["topology"]["links"]["host"]["bw_mbps"])
        kind, subflows = level_kind(cfg)
        pairs = list(zip(g["client"], g["server"], strict=True))
        # the factor levels between the flow type and the repetition: "mptcp-8" or, with
        # a second factor (configs/permutation-regime.yaml), "mptcp-8_q20"
        level = "_".join(str(run_id).split("_")[1:-1])
        rows.append({"k": topo.k, "level": level, "run_id": run_id,
                     "share_fct": float(g["goodput_mbps"].mean() / rate),
                     "share_window": window_share(run_dir, len(topo.hosts), rate),
                     "model": mean_share(topo, pairs, kind, subflows, draws,
                                         seed=zlib.crc32(str(run_id).encode())),
                     "subflows": float(g["subflows"].mean())})
    return pd.DataFrame(rows)


def paper_figures() -> dict[str, float]:
    if not REFERENCE.exists():
        return {}
    ref = yaml.safe_load(REFERENCE.read_text())
    return {str(k): float(v) for k, v in (ref.get("tables", {}).get("permutation", {})
                                          .get("share", {}) or {}).items()}


def fmt(mean: float, low: float, high: float) -> str:
    if not np.isfinite(mean):
        return "-"
    if not np.isfinite(low):
        return f"{mean:.3f}"
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def markdown(table: pd.DataFrame, paper: dict[str, float]) -> str:
    order = ["ecmp-tcp", "mptcp-1", "mptcp-2", "mptcp-4", "mptcp-8", "ps-tcp"]
    out = ["| k | level | runs | share (FCT) [95 % CI] | share (window) [95 % CI] | "
           "flow model | paper | subflows |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for k, by_k in table.groupby("k"):
        levels = sorted(by_k["level"].unique(),
                        key=lambda lv: order.index(lv) if lv in order else 99)
        for level in levels:
            g = by_k[by_k["level"] == level]
            out.append(f"| {k} | {level} | {len(g)} | {fmt(*ci95(list(g['share_fct'])))} | "
                       f"{fmt(*ci95(list(g['share_window'])))} | {g['model'].mean():.3f} | "
                       f"{paper.get(level, float('nan')):.2f} | "
                       f"{g['subflows'].mean():.1f} |".replace("| nan |", "| - |"))
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="*", type=Path)
    ap.add_argument("--draws", type=int, default=5, help="path draws per permutation")
    ap.add_argument("--csv", type=Path, help="also write the per-run table here")
    ap.add_argument("--from", dest="source", type=Path, help="a per-run table (--csv) to "
                    "print instead of results folders")
    args = ap.parse_args()
    if args.source:
        table = pd.read_csv(args.source)
    else:
        table = pd.concat([folder_table(f, args.draws) for f in args.folders],
                          ignore_index=True)
    if args.csv:
        table.to_csv(args.csv, index=False)
    print(markdown(table, paper_figures()))


if __name__ == "__main__":
    main()
