"""Report figures over time and by flow size: goodput per run with its link events, and
FCT slowdown by size bucket (DCTCP/pFabric/Homa style).

Reads what `pathdiv.analysis.metrics.table` wrote beside the metrics: each run's
`timeline.csv` and the folder's `slowdown.csv`; the events come from the manifests
(`events`, with the time each was applied). Missing files give no figure, not an error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

import pathdiv.analysis.readers as readers
from pathdiv.analysis.report.plots import Plot, _png

MAX_TIME_PANELS = 12
EVENT_COLORS = {"down": "red", "up": "green"}


def time_plot(folder: Path, manifests: list[dict[str, Any]]) -> Plot | None:
    """Delivered goodput over time, a panel per run (runs with events first), each
    event a vertical line labelled with its link and change."""
    runs = []
    for m in manifests:
        run_id = str(m.get("run_id"))
        if m.get("status") != "complete" or not readers.RUN_ID.fullmatch(run_id):
            continue
        try:  # a guest wrote the run's folder: read through no link, bounded
            runs.append((m, readers.read_table(folder / "runs" / run_id / "timeline.csv")))
        except (OSError, readers.FolderError):
            continue
    if not runs:
        return None
    runs.sort(key=lambda r: not r[0].get("events"))
    runs = runs[:MAX_TIME_PANELS]
    cols = min(2, len(runs))
    rows = (len(runs) + cols - 1) // cols
    figure = Figure(figsize=(6.0 * cols, 2.8 * rows))
    for i, (m, tl) in enumerate(runs):
        axis = figure.add_subplot(rows, cols, i + 1)
        axis.plot(tl["t_s"], tl["measured_mbps"], label="measured transfers", lw=1.2)
        if (tl["other_mbps"] > 0).any():
            axis.plot(tl["t_s"], tl["other_mbps"], label="background / requests", lw=0.9,
                      alpha=0.7)
        for n, ev in enumerate(m.get("events") or []):
            if not ev.get("applied"):
                continue
            color = EVENT_COLORS.get(str(ev.get("action")), "purple")
            axis.axvline(float(ev["applied_s"]), color=color, ls="--", lw=1)
            what = ev.get("action") or ",".join(f"{k}={v}" for k, v in ev["set"].items())
            axis.text(float(ev["applied_s"]), axis.get_ylim()[1] * (0.95 - 0.09 * (n % 6)),
                      f" {ev['link']} {what}", color=color, fontsize=7, va="top")
        axis.set_title(str(m.get("run_id")), fontsize=9)
        axis.set_xlabel("seconds since the workload started", fontsize=8)
        axis.set_ylabel("delivered Mbit/s", fontsize=8)
        axis.tick_params(labelsize=7)
    figure.axes[0].legend(fontsize=7, loc="lower right")
    figure.suptitle("Goodput delivered to hosts over time (dashed: link events)",
                    fontsize=10)
    figure.tight_layout()
    return Plot("goodput_time", "Goodput over time with link events", _png(figure),
                "Payload delivered to all hosts per 0.25 s (measured transfers and other "
                "traffic apart), one panel per run; dashed lines: link events as applied.")


def slowdown_plot(folder: Path) -> Plot | None:
    """p50 and p99 FCT slowdown per size bucket, a line per configuration."""
    try:
        table = readers.read_table(folder / "slowdown.csv")
    except (OSError, readers.FolderError):
        return None
    if table.empty:
        return None
    keys = [c for c in table.columns
            if c not in ("size_bucket", "flows", "slowdown_p50", "slowdown_p99")]
    labels = table[keys].astype(str).agg(" ".join, axis=1) if keys else \
        pd.Series("all", index=table.index)
    order = list(dict.fromkeys(table["size_bucket"]))
    figure = Figure(figsize=(9.0, 3.4))
    for n, column in enumerate(("slowdown_p50", "slowdown_p99")):
        axis = figure.add_subplot(1, 2, n + 1)
        for label in sorted(labels.unique()):
            part = table[labels == label].set_index("size_bucket").reindex(order)
            axis.plot(range(len(order)), part[column], marker="o", label=label)
        axis.set_xticks(range(len(order)), order, fontsize=7, rotation=30)
        axis.set_yscale("log")
        axis.set_ylabel(column.replace("_", " "), fontsize=8)
        axis.set_xlabel("flow size", fontsize=8)
        axis.tick_params(labelsize=7)
    figure.axes[0].legend(fontsize=7)
    figure.suptitle("FCT slowdown by flow size (FCT / FCT alone on an idle path)", fontsize=10)
    figure.tight_layout()
    return Plot("slowdown_by_size", "FCT slowdown by flow size", _png(figure),
                "Median and 99th percentile of FCT slowdown per flow-size bucket "
                "(slowdown.csv; ideal FCT from the configured link rates and delays).")


def condition_plots(folder: Path, manifests: list[dict[str, Any]]) -> list[Plot]:
    return [p for p in (time_plot(folder, manifests), slowdown_plot(folder)) if p]
