"""Seed 003's testbed figures (section VI.A, Figs. 8-11) from our results, as Markdown
tables to set beside the paper's: per cell mean ± sd (n) of the figure's measure, and the
comparisons the text makes with Welch's p over repetitions. Reads a results folder's (or
docs/reproduction/seed003/<fig>/) metrics.csv and, for the time series, paths_series.csv
(or its gzipped copy).

    python scripts/seed003_figs.py fig8 docs/reproduction/seed003/fig8
    python scripts/seed003_figs.py fig10 docs/reproduction/seed003/fig10 --break-s 4

What it adds to the report's claim table (analysis/references/seed003.yaml): the whole
grid of cells, Fig. 9's share of data on the better path against one half (one-sample t),
Fig. 10's goodput over time per scheduler (mean of the runs per 1 s), and Fig. 11's
out-of-order queue over time.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from pathdiv.analysis.stats.posthoc import welch


def cell(values: pd.Series, digits: int = 2) -> str:
    """mean ± sd (n) of the finite values."""
    v = pd.to_numeric(values, errors="coerce").dropna()
    if v.empty:
        return "–"
    sd = f" ± {v.std(ddof=1):.{digits}f}" if len(v) > 1 else ""
    return f"{v.mean():.{digits}f}{sd} ({len(v)})"


def compare(a: pd.Series, b: pd.Series) -> str:
    """a's mean against b's: the difference in % of b's mean and Welch's p."""
    va = pd.to_numeric(a, errors="coerce").dropna().to_numpy(dtype=float)
    vb = pd.to_numeric(b, errors="coerce").dropna().to_numpy(dtype=float)
    if not len(va) or not len(vb) or vb.mean() == 0:
        return "–"
    _, p = welch(va, vb)
    pct = 100 * (va.mean() - vb.mean()) / abs(vb.mean())
    return f"{pct:+.1f} %, p = {p:.3g}" if math.isfinite(p) else f"{pct:+.1f} %"


def grid(metrics: pd.DataFrame, rows: str, cols: str, metric: str,
         row_order: Sequence[str], col_order: Sequence[str]) -> str:
    head = f"| {rows} \\ {cols} | " + " | ".join(col_order) + " |"
    out = [head, "| --- " * (len(col_order) + 1) + "|"]
    for r in row_order:
        sub = metrics[metrics[rows] == r]
        out.append(f"| {r} | " + " | ".join(cell(sub[sub[cols] == c][metric])
                                            for c in col_order) + " |")
    return "\n".join(out)


def mean_ci(values: pd.Series, level: float = 0.95) -> tuple[float, float, float, int]:
    """(mean, lower, upper, n): the mean with its t interval; NaN bounds with n < 2."""
    v = pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype=float)
    if not len(v):
        return math.nan, math.nan, math.nan, 0
    if len(v) < 2:
        return float(v.mean()), math.nan, math.nan, 1
    half = float(stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))
    return float(v.mean()), float(v.mean()) - half, float(v.mean()) + half, len(v)


def effect_ci(a: pd.Series, b: pd.Series, level: float = 0.95
              ) -> tuple[float, float, float, float]:
    """a's mean against b's as % of b's mean, with Welch's interval of the difference in
    the same units and Welch's p: (effect, lower, upper, p)."""
    va = pd.to_numeric(a, errors="coerce").dropna().to_numpy(dtype=float)
    vb = pd.to_numeric(b, errors="coerce").dropna().to_numpy(dtype=float)
    if len(va) < 2 or len(vb) < 2 or vb.mean() == 0:
        return math.nan, math.nan, math.nan, math.nan
    sa, sb = va.var(ddof=1) / len(va), vb.var(ddof=1) / len(vb)
    se = math.sqrt(sa + sb)
    df = (sa + sb) ** 2 / (sa**2 / (len(va) - 1) + sb**2 / (len(vb) - 1)) if se else 1.0
    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    d, ref = va.mean() - vb.mean(), abs(vb.mean())
    _, p = welch(va, vb)
    return 100 * d / ref, 100 * (d - half) / ref, 100 * (d + half) / ref, float(p)


EQUIVALENCE_PCT = 20.0  # "about the same": our margin, the paper states none
SMALLEST_PCT = 10.0  # "far above" / "better": the smallest effect we count


def verdict(kind: str, effect: tuple[float, float, float, float],
            margin: float = EQUIVALENCE_PCT, smallest: float = SMALLEST_PCT) -> str:
    """What a claim of `kind` (same: no difference; better: a above b) gets from an
    effect with its interval (effect_ci): agrees, disagrees or inconclusive (with why)."""
    pct, lo, hi, _ = effect
    if not math.isfinite(lo):
        return "not measured"
    if kind == "same":
        if -margin < lo and hi < margin:
            return f"agrees (CI within ±{margin:g} %)"
        if (hi < 0 or lo > 0) and abs(pct) > margin:
            return f"disagrees (significant, beyond ±{margin:g} %)"
        return f"inconclusive (CI crosses ±{margin:g} %)"
    if lo > smallest:
        return f"agrees (CI above +{smallest:g} %)"
    if hi < 0:
        return "disagrees (significant, the other way)"
    if lo > 0:
        return f"negligible (significant, under +{smallest:g} %)"
    return "inconclusive (not significant)"


def effect_text(effect: tuple[float, float, float, float]) -> str:
    pct, lo, hi, p = effect
    if not math.isfinite(pct):
        return "–"
    return f"{pct:+.1f} % [{lo:+.1f}, {hi:+.1f}], p = {p:.2g}"


def value_text(values: pd.Series, digits: int = 1) -> str:
    m, lo, hi, n = mean_ci(values)
    if not n:
        return "–"
    ci = f" [{lo:.{digits}f}, {hi:.{digits}f}]" if n > 1 else ""
    return f"{m:.{digits}f}{ci} (n = {n})"


def paper_fig8(metrics: pd.DataFrame) -> str:
    """Fig. 8's claims at the paper's settings: per loss, Coupled BBR against TCP BBR on
    the best path (the same throughput) and against LIA and OLIA (far above), with 95 %
    intervals and the verdict."""
    out = ["| loss | Coupled BBR Mbit/s | TCP BBR | LIA | OLIA | vs TCP BBR (paper: the "
           "same) | verdict | vs LIA (paper: far above) | verdict | vs OLIA | verdict |",
           "| --- " * 11 + "|"]
    for level in levels(metrics, "loss"):
        sub = metrics[metrics["loss"] == level]
        by = {cc: sub[sub["cc"] == cc]["goodput_mbps"] for cc in
              ("coupled-bbr", "bbr-tcp-best-path", "lia", "olia")}
        row = [level, *(value_text(v) for v in by.values())]
        for other, kind in (("bbr-tcp-best-path", "same"), ("lia", "better"),
                            ("olia", "better")):
            e = effect_ci(by["coupled-bbr"], by[other])
            row += [effect_text(e), verdict(kind, e)]
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out)


def levels(metrics: pd.DataFrame, column: str) -> list[str]:
    """A factor's levels ordered by the first number in their names (loss-0.01 before
    loss-1, rtt-50 before rtt-100), names without one last."""

    def key(level: str) -> tuple[float, str]:
        digits = "".join(ch if ch.isdigit() or ch == "." else " " for ch in level).split()
        return (float(digits[0]) if digits else math.inf, level)

    return sorted(dict.fromkeys(metrics[column].astype(str)), key=key)


def pacing(series: pd.DataFrame | None, metrics: pd.DataFrame, factor: str) -> str:
    """Mean pacing rate (Mbit/s) per path of each cell's subflows, from the server's ss
    samples (paths.json subflow_state) after the first 2 s: what each subflow's congestion
    control decided to send at, beside what a single-path flow decided."""
    if series is None or "subflow_pacing_mbps" not in set(series["series"]):
        return ""
    s = series[(series["series"] == "subflow_pacing_mbps") & (series["t_s"] > 2.0)]
    s = s.merge(metrics[["run_id", factor, "cc"]], on="run_id")
    per_run = s.groupby([factor, "cc", "path", "run_id"])["value"].mean().reset_index()
    table = per_run.groupby([factor, "cc", "path"])["value"].agg(["mean", "std", "count"])
    out = ["", "Pacing rate of each subflow (Mbit/s, mean over a run after 2 s; mean ± sd "
           "over runs):", "", f"| {factor} | cc | path | pacing |", "| --- | --- | --- | --- |"]
    for (level, cc, path), row in table.iterrows():
        out.append(f"| {level} | {cc} | {path} | {row['mean']:.2f} ± {row['std']:.2f} "
                   f"({int(row['count'])}) |")
    return "\n" + "\n".join(out)


def fig8(metrics: pd.DataFrame) -> str:
    loss = levels(metrics, "loss")
    ccs = [c for c in ("coupled-bbr", "bbr-tcp-best-path", "lia", "olia")
           if c in set(metrics["cc"])]
    out = ["Goodput (Mbit/s), mean ± sd (n):", "",
           grid(metrics, "loss", "cc", "goodput_mbps", loss, ccs), "",
           "| loss | coupled-bbr vs bbr-tcp-best-path | coupled-bbr vs lia | "
           "coupled-bbr vs olia |", "| --- | --- | --- | --- |"]
    for level in loss:
        sub = metrics[metrics["loss"] == level]
        cb = sub[sub["cc"] == "coupled-bbr"]["goodput_mbps"]
        out.append(f"| {level} | " + " | ".join(
            compare(cb, sub[sub["cc"] == other]["goodput_mbps"])
            for other in ("bbr-tcp-best-path", "lia", "olia")) + " |")
    return "\n".join(out)


def one_sample(values: pd.Series, mu: float) -> str:
    v = pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype=float)
    if len(v) < 2:
        return "–"
    p = float(stats.ttest_1samp(v, mu).pvalue) if v.std(ddof=1) > 0 else (
        1.0 if np.isclose(v.mean(), mu) else 0.0)
    return f"p = {p:.3g}"


def fig9(metrics: pd.DataFrame) -> str:
    asym = [a for a in ("bw-20-10", "bw-20-5", "delay-25-50", "delay-25-100")
            if a in set(metrics["asymmetry"])]
    ccs = [c for c in ("coupled-bbr", "bbr-tcp-best-path") if c in set(metrics["cc"])]
    out = ["Goodput (Mbit/s), mean ± sd (n):", "",
           grid(metrics, "asymmetry", "cc", "goodput_mbps", asym, ccs), "",
           "| asymmetry | coupled-bbr vs bbr-tcp-best-path | coupled-bbr: path 1's share "
           "of the data | share vs 1/2 (one-sample t) |", "| --- | --- | --- | --- |"]
    for level in asym:
        sub = metrics[metrics["asymmetry"] == level]
        cb = sub[sub["cc"] == "coupled-bbr"]
        tcp = sub[sub["cc"] == "bbr-tcp-best-path"]
        out.append(f"| {level} | {compare(cb['goodput_mbps'], tcp['goodput_mbps'])} | "
                   f"{cell(cb['path1_share'], 3)} | {one_sample(cb['path1_share'], 0.5)} |")
    return "\n".join(out)


def over_time(series: pd.DataFrame, metrics: pd.DataFrame, factor: str, name: str,
              step_s: float = 1.0, until_s: float | None = None) -> str:
    """Mean over runs of a time series per factor level, in bins of step_s (a run that
    ended adds nothing to later bins)."""
    runs = metrics.set_index("run_id")[factor].astype(str)
    s = series[series["series"] == name].copy()
    s = s[s["run_id"].isin(runs.index)]
    s["level"] = s["run_id"].map(runs)
    s["bin"] = np.maximum(np.ceil(s["t_s"] / step_s - 1e-9), 0.0) * step_s
    if until_s is not None:
        s = s[s["bin"] <= until_s]
    per_run = s.groupby(["level", "run_id", "bin"])["value"].mean().reset_index()
    table = per_run.groupby(["bin", "level"])["value"].mean().unstack("level")
    order = [lv for lv in levels(metrics, factor) if lv in table.columns]
    out = ["| t (s) | " + " | ".join(order) + " |", "| --- " * (len(order) + 1) + "|"]
    for t, row in table.iterrows():
        out.append(f"| {t:g} | " + " | ".join(
            "–" if pd.isna(row[c]) else f"{row[c]:.1f}" for c in order) + " |")
    return "\n".join(out)


def fig10(metrics: pd.DataFrame, series: pd.DataFrame | None, break_s: float) -> str:
    scheds = [s for s in ("arp", "roundrobin", "redundant") if s in set(metrics["scheduler"])]
    out = ["| scheduler | goodput (Mbit/s) | before the break | after the break | "
           "copied % of segments | path 2's share |", "| --- | --- | --- | --- | --- | --- |"]
    for s in scheds:
        sub = metrics[metrics["scheduler"] == s]
        out.append(f"| {s} | {cell(sub['goodput_mbps'])} | {cell(sub['goodput_before_mbps'])}"
                   f" | {cell(sub['goodput_after_mbps'])} | {cell(sub['copied_pct'])} | "
                   f"{cell(sub['path2_share'], 3)} |")
    out += ["", "| comparison | before the break | after the break | whole fetch |",
            "| --- | --- | --- | --- |"]
    for a, b in (("arp", "roundrobin"), ("arp", "redundant"), ("redundant", "roundrobin")):
        ma, mb = (metrics[metrics["scheduler"] == x] for x in (a, b))
        out.append(f"| {a} vs {b} | " + " | ".join(
            compare(ma[m], mb[m]) for m in ("goodput_before_mbps", "goodput_after_mbps",
                                            "goodput_mbps")) + " |")
    if series is not None:
        out += ["", f"Goodput over time (Mbit/s, mean of the runs per 1 s; the break at "
                f"{break_s:g} s):", "", over_time(series, metrics, "scheduler", "goodput_mbps")]
    return "\n".join(out)


def fig11(metrics: pd.DataFrame, series: pd.DataFrame | None) -> str:
    rtts = levels(metrics, "rtt2")
    scheds = [s for s in ("minrtt", "roundrobin", "arp", "default")
              if s in set(metrics["scheduler"])]
    out = ["Mean out-of-order queue (segments), mean ± sd (n):", "",
           grid(metrics, "rtt2", "scheduler", "ofo_mean_pkts", rtts, scheds), "",
           "Goodput (Mbit/s):", "",
           grid(metrics, "rtt2", "scheduler", "goodput_mbps", rtts, scheds), "",
           "| rtt2 | arp vs minrtt (ofo) | arp vs roundrobin (ofo) | arp vs minrtt (goodput) |",
           "| --- | --- | --- | --- |"]
    for level in rtts:
        sub = metrics[metrics["rtt2"] == level]
        arp = sub[sub["scheduler"] == "arp"]
        out.append(f"| {level} | " + " | ".join(
            compare(arp["ofo_mean_pkts"], sub[sub["scheduler"] == o]["ofo_mean_pkts"])
            for o in ("minrtt", "roundrobin")) + " | " + compare(
            arp["goodput_mbps"], sub[sub["scheduler"] == "minrtt"]["goodput_mbps"]) + " |")
    if series is not None and "rtt-150" in rtts:
        sub = metrics[metrics["rtt2"] == "rtt-150"]
        out += ["", "Out-of-order queue over time at 150 ms (segments, mean of the runs per "
                "1 s; the paper's Fig. 11(b)):", "",
                over_time(series, sub, "scheduler", "ofo_pkts")]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("figure", choices=("fig8", "fig9", "fig10", "fig11", "fig8-paper"))
    parser.add_argument("results", type=Path, help="folder with metrics.csv "
                        "(and paths_series.csv)")
    parser.add_argument("--break-s", type=float, default=4.0,
                        help="Fig. 10: when the path breaks (the config's event), s")
    args = parser.parse_args(argv)
    metrics = pd.read_csv(args.results / "metrics.csv")
    metrics = metrics[metrics["ok"].astype(bool)]
    for column in ("goodput_before_mbps", "goodput_after_mbps"):  # older results lack them
        if column not in metrics.columns:
            metrics[column] = np.nan
    # the committed copies under docs/reproduction/seed003 are gzipped
    found = [f for f in (args.results / "paths_series.csv",
                         args.results / "paths_series.csv.gz") if f.exists()]
    series = pd.read_csv(found[0]) if found else None
    if args.figure == "fig8-paper":
        print(paper_fig8(metrics) + "\n\n" + fig8(metrics))
    elif args.figure == "fig8":
        print(fig8(metrics) + pacing(series, metrics, "loss"))
    elif args.figure == "fig9":
        print(fig9(metrics) + pacing(series, metrics, "asymmetry"))
    elif args.figure == "fig10":
        print(fig10(metrics, series, args.break_s))
    else:
        print(fig11(metrics, series))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
