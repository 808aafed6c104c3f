"""Seed 004's per-cell tables beside ours: Table IV (RTT and throughput per subflow count,
and the RTT ratios D_i/D_j) from seed004-sweep's metrics.csv, Tables V-VI (extra subflow
elimination: how often the windows it should close were closed, and how often it closed
one it should not have) from seed004-ese's, and Fig. 10's long-flow CPU and energy per
protocol from seed004-energy-real's (the real clock). Prints Markdown.

    python scripts/seed004_tables.py --sweep docs/reproduction/seed004/sweep/metrics.csv \
        --ese docs/reproduction/seed004/ese/metrics.csv \
        --energy docs/reproduction/seed004/energy-real/metrics.csv

ESE per transfer, from open_subflows (analysis/metrics/transfer.py): the subflows that
should stay open are one per path the connection's subflows were given (one-path: 1;
disjoint: min(subflows, paths)). A transfer with that many open is a success; with fewer,
a window was closed that should not have been (a false positive where the paths did
not share a bottleneck); with more, an extra subflow stayed open (a miss). Per run, the
kernel's own count of closed windows (run_windows_closed, MPTcpExt MptcpDClosed of every
host) beside the closures that were due (subflows minus one per path, summed).

p-values are Welch's t-tests: over the transfers, and over the runs (each repetition's
mean, or the run's own figure for the per-run CPU and energy columns).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats

REFERENCE = Path(__file__).resolve().parents[1] / "analysis" / "references" / "seed004.yaml"


def welch_p(a: pd.Series, b: pd.Series) -> float:
    """Welch's t-test p-value; NaN with fewer than two values on a side."""
    a, b = a.dropna(), b.dropna()
    if len(a) < 2 or len(b) < 2:
        return float("nan")
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def fmt_p(p: float) -> str:
    return "-" if not np.isfinite(p) else "< .001" if p < 0.001 else f"{p:.3f}"


def change(values: pd.Series, ref: pd.Series) -> str:
    """`values`' mean against `ref`'s in percent, with Welch's p."""
    return f"{100 * (values.mean() / ref.mean() - 1):+.1f} %, {fmt_p(welch_p(values, ref))}"


def per_run(metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per run: its level, the mean of each group measure, the run's columns,
    and the whole machine's CPU per MB of the run's payload (run_cpu_ms_per_mb)."""
    m = metrics[metrics["ok"]]
    runs = m.groupby("run_id").agg(
        subflow_count=("subflow_count", "first"), rtt_ms=("rtt_ms", "mean"),
        throughput_mbps=("throughput_mbps", "mean"), cpu_ms_per_mb=("cpu_ms_per_mb", "mean"),
        payload_bytes=("payload_bytes", "sum"), energy_j=("energy_j", "sum"),
        **{c: (c, "first") for c in ("run_cpu_s", "run_softirq_s", "run_hosts_cpu_s",
                                     "run_energy_j") if c in m})
    for col in ("run_cpu_s", "run_hosts_cpu_s"):
        if col in runs:
            runs[col.replace("_s", "_ms_per_mb", 1)] = (
                runs[col] * 1000 / (runs["payload_bytes"] / 1e6))
    return runs


def ratio_ci(a: pd.Series, b: pd.Series, reps: int = 4000) -> tuple[float, float]:
    """95 % percentile bootstrap interval of mean(a) / mean(b), transfers resampled
    within each side (seeded: the same table every time); NaN with an empty side."""
    va, vb = a.dropna().to_numpy(dtype=float), b.dropna().to_numpy(dtype=float)
    if not len(va) or not len(vb):
        return float("nan"), float("nan")
    rng = np.random.default_rng(44)
    ratios = (rng.choice(va, (reps, len(va))).mean(axis=1) /
              rng.choice(vb, (reps, len(vb))).mean(axis=1))
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return float(lo), float(hi)


def same_edge(metrics: pd.DataFrame) -> pd.Series:
    """Transfers between two hosts of one edge switch: one shortest path (`paths` 1),
    host link to host link, never through the fabric's 20 Mbit/s links where every other
    pair's subflows queue; their RTT is the host links' alone."""
    return metrics["paths"] == 1


def table_iv(metrics: pd.DataFrame, paper: list[list[float]],
             pairs: str = "all") -> str:
    """Table IV beside ours; `pairs`: all, fabric (same-edge pairs left out) or
    same-edge (only those)."""
    ok = metrics[metrics["ok"]]
    if pairs != "all":
        ok = ok[same_edge(ok) == (pairs == "same-edge")]
        metrics = metrics.loc[ok.index]
    ours = ok.groupby("subflow_count")
    runs = per_run(metrics).groupby("subflow_count")
    rows = ["| subflows | paper RTT ms | ours RTT ms (n, sd) | paper Mbit/s | ours Mbit/s |",
            "| --- | --- | --- | --- | --- |"]
    mean_rtt = {}
    for n, tput, rtt in paper:
        level = f"sf{int(n)}"
        g = ours.get_group(level) if level in ours.groups else ok.iloc[0:0]
        mean_rtt[int(n)] = (rtt, g["rtt_ms"].mean())
        rows.append(f"| {int(n)} | {rtt:.3f} | {g['rtt_ms'].mean():.3f} ({len(g)}, "
                    f"{g['rtt_ms'].std():.3f}) | {tput:.1f} | {g['throughput_mbps'].mean():.2f} |")
    rows += ["", "| ratio | paper | ours [95 % CI] | p (transfers) | p (runs) |",
             "| --- | --- | --- | --- | --- |"]

    def level(frame: pd.core.groupby.DataFrameGroupBy, n: int, col: str) -> pd.Series:
        name = f"sf{n}"
        return frame.get_group(name)[col] if name in frame.groups else pd.Series(dtype=float)

    for a, b in ((2, 1), (4, 1), (8, 1), (4, 2), (8, 2), (8, 4)):
        (pa, oa), (pb, ob) = mean_rtt[a], mean_rtt[b]
        lo, hi = ratio_ci(level(ours, a, "rtt_ms"), level(ours, b, "rtt_ms"))
        rows.append(f"| D{a}/D{b} | {pa / pb:.2f} | {oa / ob:.2f} [{lo:.2f}, {hi:.2f}] | "
                    f"{fmt_p(welch_p(level(ours, a, 'rtt_ms'), level(ours, b, 'rtt_ms')))} | "
                    f"{fmt_p(welch_p(level(runs, a, 'rtt_ms'), level(runs, b, 'rtt_ms')))} |")
    return "\n".join(rows)


# the paper's CPU power against one subflow per path (III.C Fig. 7(d), V.C Fig. 20)
PAPER_CPU = {2: "+20 % (Fig. 20)", 8: "+50 % (Fig. 7(d))"}


def table_cpu(metrics: pd.DataFrame) -> str:
    """CPU per MB and energy per subflow count, each against one subflow: the transfer
    threads (per transfer), every host's processes (per run, cgroups) and the whole
    machine (per run, /proc/stat)."""
    runs = per_run(metrics)
    if "run_cpu_ms_per_mb" not in runs:
        return "(no per-run CPU in this metrics.csv)"
    if "run_hosts_cpu_ms_per_mb" not in runs:
        runs["run_hosts_cpu_ms_per_mb"] = float("nan")
    ok = metrics[metrics["ok"]]
    rows = ["| subflows | threads CPU ms/MB (n) | vs 1, p | hosts CPU ms/MB, per run (runs) "
            "| vs 1, p (runs) | machine CPU ms/MB, per run | vs 1, p (runs) | machine softirq "
            "share | run energy J | paper (power vs 1) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    base_t = ok[ok["subflow_count"] == "sf1"]["cpu_ms_per_mb"]
    base = runs[runs["subflow_count"] == "sf1"]

    for name in sorted(runs["subflow_count"].unique(), key=lambda x: int(x[2:])):
        t = ok[ok["subflow_count"] == name]["cpu_ms_per_mb"]
        r = runs[runs["subflow_count"] == name]
        n = int(name[2:])
        hosts, machine = r["run_hosts_cpu_ms_per_mb"], r["run_cpu_ms_per_mb"]
        vs_t, vs_hosts, vs_machine = ("-", "-", "-") if n == 1 else (
            change(t, base_t), change(hosts, base["run_hosts_cpu_ms_per_mb"]),
            change(machine, base["run_cpu_ms_per_mb"]))
        soft = (r["run_softirq_s"] / r["run_cpu_s"]).mean()
        rows.append(f"| {n} | {t.mean():.2f} ({len(t)}) | {vs_t} | "
                    f"{hosts.mean():.2f} ({len(r)}) | "
                    f"{vs_hosts} | "
                    f"{machine.mean():.1f} | {vs_machine} | "
                    f"{soft:.2f} | {r['run_energy_j'].mean():.2f} | {PAPER_CPU.get(n, '')} |")
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
    """Per cell: the share of transfers with each outcome, per repetition too, and a
    binomial test of ours against the paper's rate (one-path: success against Table V;
    disjoint: a window closed too many against Table VI's false positives)."""
    m = ese_outcomes(metrics)
    paper = {r["num_subflows"]: r["rate"][1] for r in reference["table_v"]["rows"]}
    false_pos = float(reference["table_vi"]["false_positive"])
    rows = ["| subflows | placement | paper (alpha 1.3) | ours: success | per repetition "
            "| closed too many | extra left open | n | p (binomial, ours = paper's) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (level, placement), g in m.groupby(["subflow_count", "placement"], sort=True):
        share = g["outcome"].value_counts(normalize=True)
        n = int(level[2:])
        if placement == "one-path":
            rate, outcome = paper.get(n, float("nan")), "success"
            where = f"{rate:.3f}"
        else:
            rate, outcome = false_pos, "closed too many"
            where = f"FP {rate:.3f} (Table VI)"
        hits = int((g["outcome"] == outcome).sum())
        p = (stats.binomtest(hits, len(g), rate).pvalue if np.isfinite(rate) and len(g)
             else float("nan"))
        reps = (g.groupby("repetition")["outcome"].apply(lambda o: (o == "success").mean())
                if "repetition" in g else pd.Series(dtype=float))
        rows.append(f"| {n} | {placement} | {where} | {share.get('success', 0):.3f} | "
                    f"{', '.join(f'{r:.2f}' for r in reps)} | "
                    f"{share.get('closed too many', 0):.3f} | "
                    f"{share.get('extra left open', 0):.3f} | {len(g)} | {fmt_p(p)} |")
    return "\n".join(rows)


def table_closures(metrics: pd.DataFrame) -> str:
    """Per cell: windows the kernel closed (MptcpDClosed, summed over the runs) against
    the closures due, over the runs' transfers (one-path: subflows - 1 each; disjoint:
    subflows beyond one per path)."""
    if "run_windows_closed" not in metrics:
        return "(no run_windows_closed in this metrics.csv)"
    m = ese_outcomes(metrics)
    m["due"] = m["subflow_count"].str[2:].astype(int) - m["expected_open"]
    rows = ["| subflows | placement | runs | transfers | closures due | windows closed "
            "(kernel) | per run | closed / due |", "| --- | --- | --- | --- | --- | --- | --- "
            "| --- |"]
    for (level, placement), g in m.groupby(["subflow_count", "placement"], sort=True):
        closed = g.groupby("run_id")["run_windows_closed"].first()
        due = int(g["due"].sum())
        total = closed.sum(min_count=1)
        ratio = "-" if not due or not np.isfinite(total) else f"{total / due:.3f}"
        rows.append(f"| {level[2:]} | {placement} | {len(closed)} | {len(g)} | {due} | "
                    f"{'-' if not np.isfinite(total) else int(total)} | "
                    f"{', '.join(str(int(x)) for x in closed.dropna())} | {ratio} |")
    return "\n".join(rows)


PROTOCOLS = ("tcp", "dctcp", "lia-2", "lia-4", "mptcp-d-2", "mptcp-d-4")
PAPER_ENERGY = {"mptcp-d-2": "-50 % (Fig. 10)", "mptcp-d-4": "-72 % (Fig. 10, abstract)"}


def table_energy(metrics: pd.DataFrame, base: str = "dctcp") -> str:
    """Long flows per protocol on the real clock (V.A Fig. 10): completion time, the
    transfer threads' CPU per MB and the power model's energy per transfer, and per run
    every host's CPU (cgroups) and the run's energy; energy against `base` (the paper's
    comparison), Welch's p over the transfers and over the runs."""
    ok = metrics[metrics["ok"]]
    runs = ok.groupby("run_id").agg(protocol=("protocol", "first"),
                                    run_hosts_cpu_s=("run_hosts_cpu_s", "first"),
                                    run_energy_j=("run_energy_j", "first"))
    ref_t, ref_r = ok[ok["protocol"] == base], runs[runs["protocol"] == base]

    rows = [f"| protocol | FCT s (sd) | threads CPU ms/MB | energy J per transfer | vs {base}, "
            f"p (transfers) | hosts CPU s per run | run energy J | vs {base}, p (runs) | "
            f"n (transfers / runs) | paper, vs {base} |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    present = set(ok["protocol"])
    for name in [p for p in PROTOCOLS if p in present] + sorted(present - set(PROTOCOLS)):
        t, r = ok[ok["protocol"] == name], runs[runs["protocol"] == name]
        own = name == base
        rows.append(
            f"| {name} | {t['fct_s'].mean():.3f} ({t['fct_s'].std():.3f}) | "
            f"{t['cpu_ms_per_mb'].mean():.2f} | {t['energy_j'].mean():.3f} | "
            f"{'-' if own else change(t['energy_j'], ref_t['energy_j'])} | "
            f"{r['run_hosts_cpu_s'].mean():.2f} | {r['run_energy_j'].mean():.2f} | "
            f"{'-' if own else change(r['run_energy_j'], ref_r['run_energy_j'])} | "
            f"{len(t)} / {len(r)} | {PAPER_ENERGY.get(name, '')} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sweep", type=Path, help="seed004-sweep's metrics.csv")
    ap.add_argument("--ese", type=Path, help="seed004-ese's metrics.csv")
    ap.add_argument("--energy", type=Path, help="seed004-energy-real's metrics.csv")
    args = ap.parse_args()
    tables = yaml.safe_load(REFERENCE.read_text())["tables"]
    if args.sweep:
        print("Table IV (V.A) beside seed004-sweep\n")
        sweep = pd.read_csv(args.sweep)
        print(table_iv(sweep, tables["table_iv"]["values"]))
        ok = sweep[sweep["ok"]]
        print("\nSame-edge pairs per cell (one path, no fabric link): "
              + ", ".join(f"{lvl} {int(same_edge(g).sum())} of {len(g)}"
                          for lvl, g in ok.groupby("subflow_count")))
        print("\nTable IV, the pairs that cross the fabric only\n")
        print(table_iv(sweep, tables["table_iv"]["values"], pairs="fabric"))
        print("\nTable IV, same-edge pairs only\n")
        print(table_iv(sweep, tables["table_iv"]["values"], pairs="same-edge"))
        print("\nCPU per MB and energy per subflow count (III.C Fig. 7(d), V.C Fig. 20)\n")
        print(table_cpu(sweep))
        print()
    if args.ese:
        print("Tables V-VI (V.A, V.C) beside seed004-ese\n")
        ese = pd.read_csv(args.ese)
        print(table_v(ese, tables))
        print("\nWindows closed, by the kernel's count\n")
        print(table_closures(ese))
    if args.energy:
        print("\nLong-flow CPU and energy per protocol, real clock (V.A Fig. 10)\n")
        print(table_energy(pd.read_csv(args.energy)))


if __name__ == "__main__":
    main()
