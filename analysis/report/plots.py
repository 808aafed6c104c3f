"""Report figures as PNG bytes: box plots per metric, FCT CDFs, path-usage heatmap.

Figures are built with matplotlib's object API on the Agg canvas (no display, no global
pyplot state) and returned as `Plot` values; writing or embedding them is the report's
job. A plot that the data cannot support is returned as a note instead.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from pathdiv.analysis.stats.posthoc import configuration_labels
from pathdiv.analysis.stats.spec import AnalysisSpec

DPI = 80
# Axis labels with units; a column not listed here is shown by its name.
AXIS_LABELS = {
    "fct_s": "FCT (s)",
    "throughput_mbps": "throughput (Mbit/s)",
    "goodput_mbps": "goodput (Mbit/s)",
    "utilization": "utilization (effective paths / paths)",
    "excess_pct": "excess traffic (%)",
    "retrans_pct": "retransmitted (%)",
    "reorder_pct": "reordered (%)",
    "wire_bytes": "bytes on the wire (B)",
}


def axis_label(column: str) -> str:
    return AXIS_LABELS.get(column, column)
PATH_COLUMN = re.compile(r"^path_?(\d+)(?:_(share|bytes|frac|pct))?$")


@dataclass(frozen=True)
class Plot:
    name: str  # file stem, e.g. "box_goodput_mbps"
    title: str
    png: bytes
    caption: str


def _png(figure: Figure) -> bytes:
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    return buffer.getvalue()


def _clusters(metrics: pd.DataFrame, spec: AnalysisSpec) -> list[tuple[str, pd.DataFrame]]:
    keys = [c for c in spec.clusters if c in metrics.columns]
    if not keys:
        return [("all observations", metrics)]
    out = []
    for key, frame in metrics.groupby(keys, sort=True, observed=True):
        values = key if isinstance(key, tuple) else (key,)
        out.append((" / ".join(str(v) for v in values), frame))
    return out


def _grid(count: int) -> tuple[int, int]:
    cols = min(3, max(count, 1))
    return (count + cols - 1) // cols, cols


def _configurations(metrics: pd.DataFrame, spec: AnalysisSpec) -> pd.Series:
    ivs = [iv for iv in spec.ivs if iv in metrics.columns]
    return configuration_labels(metrics, ivs)


def box_plots(metrics: pd.DataFrame, spec: AnalysisSpec) -> list[Plot]:
    """One figure per dependent variable: a panel per cluster, a box per configuration."""
    plots = []
    labels = _configurations(metrics, spec)
    order = sorted(labels.unique())
    clusters = _clusters(metrics, spec)
    for dv in [d for d in spec.dvs if d in metrics.columns]:
        rows, cols = _grid(len(clusters))
        figure = Figure(figsize=(4.2 * cols, 3.4 * rows))
        for i, (name, frame) in enumerate(clusters):
            axis = figure.add_subplot(rows, cols, i + 1)
            values = pd.to_numeric(frame[dv], errors="coerce")
            groups = [values[labels.loc[frame.index] == c].dropna().to_numpy() for c in order]
            axis.boxplot(groups, tick_labels=order)
            axis.set_title(name, fontsize=9)
            axis.set_ylabel(axis_label(dv), fontsize=8)
            axis.tick_params(axis="x", labelrotation=60, labelsize=7)
            axis.tick_params(axis="y", labelsize=7)
        figure.suptitle(f"{axis_label(dv)} by configuration", fontsize=10)
        figure.tight_layout()
        plots.append(Plot(f"box_{dv}", f"{axis_label(dv)} by configuration", _png(figure),
                          f"Box plots of {axis_label(dv)} per configuration, one panel per "
                          "test cluster."))
    return plots


def fct_cdfs(metrics: pd.DataFrame, spec: AnalysisSpec, column: str = "fct_s") -> Plot | None:
    """Empirical CDF of flow completion time per configuration, a panel per cluster."""
    if column not in metrics.columns:
        return None
    labels = _configurations(metrics, spec)
    order = sorted(labels.unique())
    clusters = _clusters(metrics, spec)
    rows, cols = _grid(len(clusters))
    figure = Figure(figsize=(4.2 * cols, 3.2 * rows))
    for i, (name, frame) in enumerate(clusters):
        axis = figure.add_subplot(rows, cols, i + 1)
        values = pd.to_numeric(frame[column], errors="coerce")
        for configuration in order:
            v = np.sort(values[labels.loc[frame.index] == configuration].dropna().to_numpy())
            if len(v):
                axis.step(v, np.arange(1, len(v) + 1) / len(v), where="post", label=configuration)
        axis.set_title(name, fontsize=9)
        axis.set_xlabel(axis_label(column), fontsize=8)
        axis.set_ylabel("fraction of transfers", fontsize=8)
        axis.tick_params(labelsize=7)
    handles, names = figure.axes[0].get_legend_handles_labels() if figure.axes else ([], [])
    if handles:
        figure.legend(handles, names, loc="lower center", ncol=min(5, len(names)), fontsize=7)
    figure.suptitle("Flow completion time CDF", fontsize=10)
    figure.tight_layout(rect=(0, 0.06, 1, 1))
    return Plot("fct_cdf", "Flow completion time CDF", _png(figure),
                f"Empirical CDF of {column} per configuration, one panel per test cluster.")


def path_columns(columns: Sequence[str]) -> list[str]:
    """Per-path columns (`path_0_share`, `path1`, ...) ordered by path number."""
    found = [(int(m.group(1)), c) for c in columns if (m := PATH_COLUMN.fullmatch(c))]
    return [c for _, c in sorted(found)]


def path_heatmap(metrics: pd.DataFrame, spec: AnalysisSpec) -> Plot | None:
    """Mean use of each equal-cost path per configuration; None without per-path columns."""
    columns = path_columns(list(metrics.columns))
    if not columns:
        return None
    labels = _configurations(metrics, spec)
    values = metrics[columns].apply(pd.to_numeric, errors="coerce")
    table = values.groupby(labels.to_numpy()).mean().sort_index()
    figure = Figure(figsize=(1.2 + 0.9 * len(columns), 1.0 + 0.4 * len(table)))
    axis = figure.add_subplot(1, 1, 1)
    image = axis.imshow(table.to_numpy(dtype=float), aspect="auto", cmap="viridis")
    axis.set_xticks(range(len(columns)), [f"path {i + 1}" for i in range(len(columns))],
                    fontsize=7)
    axis.set_xlabel("equal-cost paths of a transfer, busiest first", fontsize=8)
    axis.set_yticks(range(len(table)), list(table.index), fontsize=7)
    grid = table.to_numpy(dtype=float)
    middle = float(np.nanmean([np.nanmin(grid), np.nanmax(grid)])) if np.isfinite(grid).any() else 0
    for (r, c), v in np.ndenumerate(grid):
        if np.isfinite(v):
            color = "black" if v > middle else "white"
            axis.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=6, color=color)
    figure.colorbar(image, ax=axis, label="share of data bytes")
    axis.set_title("Path usage per configuration", fontsize=10)
    figure.tight_layout()
    return Plot("path_usage", "Path usage per configuration", _png(figure),
                "Share of each transfer's data bytes on its equal-cost paths, busiest path "
                f"first, mean per configuration over all clusters ({', '.join(columns)}).")


def cluster_plot(frame: pd.DataFrame, spec: AnalysisSpec, name: str, label: str) -> Plot:
    """A cluster's key figure: one box-plot panel per dependent variable, a box per
    configuration, axes in units."""
    labels = _configurations(frame, spec)
    order = sorted(labels.unique())
    dvs = [d for d in spec.dvs if d in frame.columns]
    figure = Figure(figsize=(2.9 * max(len(dvs), 1), 2.9))
    for i, dv in enumerate(dvs):
        axis = figure.add_subplot(1, len(dvs), i + 1)
        values = pd.to_numeric(frame[dv], errors="coerce")
        axis.boxplot([values[labels == c].dropna().to_numpy() for c in order],
                     tick_labels=order)
        axis.set_ylabel(axis_label(dv), fontsize=8)
        axis.tick_params(axis="x", labelrotation=60, labelsize=7)
        axis.tick_params(axis="y", labelsize=7)
    figure.suptitle(label, fontsize=9)
    figure.tight_layout()
    return Plot(f"cluster_{name}", label, _png(figure),
                f"{label}: every dependent variable per configuration (boxes: quartiles, "
                "whiskers: 1.5 IQR).")


def cluster_plots(metrics: pd.DataFrame, spec: AnalysisSpec) -> dict[str, Plot]:
    """The key figure of every test cluster, by the cluster's label."""
    out = {}
    for i, (label, frame) in enumerate(_clusters(metrics, spec)):
        out[label] = cluster_plot(frame, spec, f"{i + 1:02d}", label)
    return out


SHORT_NAMES = {"fct_s": "FCT", "throughput_mbps": "throughput", "goodput_mbps": "goodput",
               "utilization": "utilisation", "excess_pct": "excess traffic"}
FINDING_STYLE = {  # marker, colour, filled
    "better": ("o", "#2a7d2e", True), "worse": ("o", "#b8322a", True),
    "negligible": ("s", "#777777", True), "equivalent": ("D", "#2f6db3", True),
    "inconclusive": ("o", "#222222", False)}


def short_name(metric: str) -> str:
    return SHORT_NAMES.get(metric, metric)


def forest_plot(comparisons: pd.DataFrame, min_effect_pct: float) -> Plot | None:
    """Every comparison of interest as its effect (% of b's mean) with its 95 % CI, a
    panel per metric, a row per cluster and pair; the band is ± the smallest effect of
    interest. None when there is nothing to draw."""
    rows = comparisons.dropna(subset=["effect_pct"])
    if rows.empty:
        return None
    metrics = list(dict.fromkeys(rows.metric))
    labels = list(dict.fromkeys(f"{r.cluster}: {r.a} vs {r.b}"
                                for r in rows.itertuples(index=False)))
    y = {label: len(labels) - 1 - i for i, label in enumerate(labels)}
    figure = Figure(figsize=(2.6 * len(metrics) + 2.4, 0.24 * len(labels) + 0.9))
    for i, metric in enumerate(metrics):
        axis = figure.add_subplot(1, len(metrics), i + 1)
        axis.axvspan(-min_effect_pct, min_effect_pct, color="#dddddd", zorder=0)
        axis.axvline(0.0, color="#888888", linewidth=0.8, zorder=1)
        for r in rows[rows.metric == metric].itertuples(index=False):
            at = y[f"{r.cluster}: {r.a} vs {r.b}"]
            marker, colour, filled = FINDING_STYLE.get(str(r.finding), ("o", "#222222", False))
            if np.isfinite(r.ci_low_pct) and np.isfinite(r.ci_high_pct):
                axis.plot([r.ci_low_pct, r.ci_high_pct], [at, at], color=colour,
                          linewidth=1.2, zorder=2)
            axis.plot([r.effect_pct], [at], marker=marker, color=colour, markersize=4.5,
                      markerfacecolor=colour if filled else "white", zorder=3)
        axis.set_xscale("symlog", linthresh=10.0)
        axis.margins(x=0.08)
        axis.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
        axis.set_ylim(-0.7, len(labels) - 0.3)
        axis.set_yticks(range(len(labels)))
        axis.set_yticklabels(list(reversed(labels)) if i == 0 else [], fontsize=7)
        axis.tick_params(axis="x", labelsize=7)
        axis.set_title(f"{short_name(metric)}, % of b", fontsize=8)
        axis.grid(axis="x", color="#eeeeee", linewidth=0.5)
    figure.tight_layout(pad=0.4)
    return Plot("forest", "Effects of the comparisons of interest", _png(figure),
                "Each comparison of interest per cluster: a's mean against b's, in % of b's "
                "mean, with its 95 % CI (symmetric log scale beyond ±10 %); filled green: a "
                "better, red: a worse (significant, at least the smallest effect of interest, "
                f"the grey band ± {min_effect_pct:g} %); grey square: significant but "
                "negligible; blue diamond: equivalent within the band; hollow: "
                "inconclusive.")
