"""Wall time of one run per pattern and flow type, and where it goes: network build and
teardown versus traffic (the rest: reachability check, capture start/drain/stop,
provenance); and how close the transfers come to the link rate. The figures behind the
repetitions chosen in configs/silent.yaml and configs/noisy.yaml.

    python benchmarks/run_timing.py                 # runs a small plan (root, ~6 min)
    python benchmarks/run_timing.py --kernel lab    # the same in the lab kernel (UML)
    python benchmarks/run_timing.py --flow-types query short
    python benchmarks/run_timing.py RESULTS_DIR     # only summarise an existing folder
    python benchmarks/run_timing.py --kernel lab --patterns noisy --project configs/noisy.yaml

The small plan is each reference config with one switching level (ecmp-mptcp) on this
machine's kernel (or, with --kernel lab, in one boot of the lab kernel per pattern,
on the clock of `--clock`), one repetition, one
iteration, every flow type.

`host s` is the run's wall time on the host (`wall_s` in plan.json, or the manifests'
file times in folders older than it; the first lab run includes the boot; shards that
shared the folder are told apart), `run s` and the phases its own timings: the
guest's clock on the lab kernel (virtual time there), the wall clock on the host kernel.
`rate` is the median over transfer groups of the group's goodput (its bytes over the time
from its first start to its last end) as a fraction of the host link rate: 1.0 is a
perfect 20 Mbit/s link. Query groups are too short to reach it (handshakes, slow start);
long flows show whether the emulation keeps up with the configured rate.

`--project CONFIG` adds the projected wall time of CONFIG's whole plan: every run of its
plan costs the measured host seconds of its pattern and flow type, scaled by the plan's
iterations over the measured one (traffic is what costs wall time on the virtual clock),
plus one boot per lab-kernel plan. The small plan measures ecmp-mptcp only; the other
switching levels carry the same bytes.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from hoststat import HostLoad

from pathdiv.experiments.config.load import load
from pathdiv.experiments.plan.runs import expand

REPO = Path(__file__).resolve().parents[1]
PHASES = ("build_s", "traffic_s", "teardown_s")


def group_rates(rows: list[dict], link_mbps: float) -> list[float]:
    """Goodput of each transfer group (ok transfers only) as a fraction of the link rate."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        if r["ok"] == "True":
            groups.setdefault(r["group_id"], []).append(r)
    rates = []
    for group in groups.values():
        span = max(float(r["end_s"]) for r in group) - min(float(r["start_s"]) for r in group)
        size = sum(int(r["size_bytes"]) for r in group)
        if span > 0:
            rates.append(size * 8 / span / 1e6 / link_mbps)
    return rates


def summarise(manifests: list[dict]) -> list[dict]:
    """One row per (kernel, pattern, flow type) over complete runs: mean seconds, shares,
    median group rate."""
    cells: dict[tuple[str, str, str], list[dict]] = {}
    rates: dict[tuple[str, str, str], list[float]] = {}
    for m in manifests:
        if m.get("status") != "complete":
            continue
        lab = m.get("lab_kernel") or {}
        where = f"lab-{lab.get('clock', '?')}" if lab else "host"
        key = (where, m["config"]["workload"]["pattern"], m["flow_type"])
        cells.setdefault(key, []).append({**m["timings"], "wall_s": m.get("_wall_s", 0.0)})
        rates.setdefault(key, []).extend(
            group_rates(m.get("_transfers", []),
                        float(m["config"]["topology"]["links"]["host"]["bw_mbps"])))
    rows = []
    for (where, pattern, flow), timings in sorted(cells.items()):
        mean = {k: statistics.fmean(float(t[k]) for t in timings)
                for k in (*PHASES, "total_s", "wall_s")}
        other = mean["total_s"] - sum(mean[p] for p in PHASES)
        rate = rates[(where, pattern, flow)]
        rows.append({"kernel": where, "pattern": pattern, "flow_type": flow,
                     "runs": len(timings), **mean,
                     "rate": statistics.median(rate) if rate else float("nan"),
                     "other_s": other,
                     "build_teardown_share": (mean["build_s"] + mean["teardown_s"])
                     / mean["total_s"],
                     "traffic_share": mean["traffic_s"] / mean["total_s"]})
    return rows


def table(rows: list[dict]) -> str:
    head = (f"{'kernel':<11} {'pattern':<8} {'flow':<6} {'runs':>4} {'host s':>7} "
            f"{'run s':>7} {'build':>6} "
            f"{'traffic':>8} {'teardown':>8} {'other':>6} {'build+td':>8} {'traffic':>8} "
            f"{'rate':>5}")
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['kernel']:<11} {r['pattern']:<8} {r['flow_type']:<6} {r['runs']:>4} "
            f"{r['wall_s']:>7.1f} {r['total_s']:>7.1f} {r['build_s']:>6.1f} {r['traffic_s']:>8.1f} "
            f"{r['teardown_s']:>8.1f} {r['other_s']:>6.1f} {r['build_teardown_share']:>8.0%} "
            f"{r['traffic_share']:>8.0%} {r['rate']:>5.2f}")
    return "\n".join(lines)


def project(config: Path, manifests: list[dict]) -> dict:
    """Projected wall seconds of `config`'s plan from measured runs (see the docstring).

    A measured run's host seconds split at its capture start: before it, the network
    build and checks (`_pre_s`; the first run of a folder also holds the boot), after
    it the traffic (`_traffic_wall_s`), which scales with the plan's iterations."""
    timed = [m for m in manifests if m.get("status") == "complete" and "_pre_s" in m]
    later = [m["_pre_s"] for m in timed if not m["_first"]] or [m["_pre_s"] for m in timed]
    overhead = statistics.median(later) if later else 0.0
    boot = max((m["_pre_s"] - overhead for m in timed if m["_first"]), default=0.0)
    traffic: dict[tuple[str, str], list[float]] = {}
    for m in timed:
        key = (m["config"]["workload"]["pattern"], m["flow_type"])
        per_iteration = m["_traffic_wall_s"] / int(m["config"]["workload"]["iterations"])
        traffic.setdefault(key, []).append(per_iteration)
    runs = expand(load(config))
    total, missing = 0.0, set()
    for run in runs:
        key = (run.config.data["workload"]["pattern"], run.flow_type)
        if key not in traffic:
            missing.add(key)
            continue
        total += overhead + statistics.median(traffic[key]) * int(
            run.config.data["workload"]["iterations"])
    if any(r.config.data["hosts"]["kernel"] == "lab" for r in runs):
        total += max(0.0, boot)
    return {"runs": len(runs), "projected_s": total, "overhead_s": overhead, "boot_s": boot,
            "missing": sorted(missing)}


def small_config(name: str, workdir: Path, kernel: str, flow_types: list[str],
                 clock: str = "virtual") -> Path:
    data = yaml.safe_load((REPO / "configs" / f"{name}.yaml").read_text())
    data["factors"] = {"switching": {"ecmp-mptcp": data["factors"]["switching"]["ecmp-mptcp"]}}
    data["hosts"]["kernel"] = kernel
    data["lab"] = {**data.get("lab", {}), "clock": clock}
    sizes = data["workload"]["flow_types"]
    data["workload"]["flow_types"] = {f: sizes[f] for f in flow_types}
    data["workload"]["iterations"] = 1
    data["repetitions"] = 1
    data["analysis"]["ivs"] = ["switching"]
    path = workdir / f"{name}-timing.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run_small_plan(workdir: Path, flow_types: list[str], kernel: str,
                   clock: str = "virtual", patterns: tuple[str, ...] = ("silent", "noisy")
                   ) -> list[dict]:
    """One `pathdiv run` per pattern (on the lab kernel: one boot per pattern)."""
    manifests = []
    for name in patterns:
        cfg = small_config(name, workdir, kernel, flow_types, clock)
        out = workdir / name
        subprocess.run([sys.executable, "-m", "pathdiv.experiments.cli", "run", str(cfg), "--out",
                        str(out), "--quiet", "--no-analyze"], cwd=REPO, check=False)
        manifests += read_folder(out)
    return manifests


def read_folder(folder: Path) -> list[dict]:
    """The manifests of a results folder, each with its transfers under `_transfers` and
    its host wall seconds under `_wall_s` (a lab-kernel run's timings are its guest's
    clock): the run's `wall_s` in plan.json, which the host records (the boot counts
    towards the first lab run); for folders written before it did, from the previous
    manifest's write (the folder's config.yaml for the first) to its own, as the host's
    file times say."""
    plan = folder / "plan.json"
    recorded = {e["run_id"]: float(e["wall_s"])
                for e in (json.loads(plan.read_text()).get("runs", []) if plan.exists() else [])
                if isinstance(e.get("wall_s"), int | float)}
    manifests = []
    paths = sorted(folder.glob("runs/*/manifest.json"), key=lambda p: p.stat().st_mtime)
    previous = (folder / "config.yaml").stat().st_mtime if (folder / "config.yaml").exists() \
        else None
    for path in paths:
        m = json.loads(path.read_text())
        transfers = path.parent / "transfers.csv"
        m["_transfers"] = list(csv.DictReader(transfers.open())) if transfers.exists() else []
        mtime = path.stat().st_mtime
        m["_wall_s"] = recorded.get(path.parent.name,
                                    mtime - previous if previous is not None else float("nan"))
        captures = path.parent / "captures"
        if previous is not None and captures.is_dir():
            m["_pre_s"] = captures.stat().st_mtime - previous
            m["_traffic_wall_s"] = mtime - captures.stat().st_mtime
            m["_first"] = not manifests
        previous = mtime
        manifests.append(m)
    return manifests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="?", type=Path, help="summarise this folder only")
    parser.add_argument("--flow-types", nargs="+", default=["query", "short", "long"])
    parser.add_argument("--kernel", choices=("host", "lab"), default="host",
                        help="run the small plan on this machine's kernel or in the lab kernel")
    parser.add_argument("--clock", choices=("virtual", "real"), default="virtual",
                        help="lab.clock of the lab-kernel runs")
    parser.add_argument("--out", type=Path, help="keep the plan's results in this folder")
    parser.add_argument("--patterns", nargs="+", choices=("silent", "noisy"),
                        default=["silent", "noisy"])
    parser.add_argument("--project", type=Path, metavar="CONFIG",
                        help="also print the projected wall time of this config's plan")
    args = parser.parse_args()
    host = HostLoad()
    if args.results:
        manifests = read_folder(args.results)
    elif args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        with host:
            manifests = run_small_plan(args.out, args.flow_types, args.kernel, args.clock,
                                       tuple(args.patterns))
    else:
        with tempfile.TemporaryDirectory(prefix="pathdiv-timing-") as tmp, host:
            manifests = run_small_plan(Path(tmp), args.flow_types, args.kernel, args.clock,
                                       tuple(args.patterns))
    rows = summarise(manifests)
    if not rows:
        raise SystemExit("no complete runs to time")
    print(table(rows))
    if not args.results:
        print(f"whole small plan: {host}")
    if args.project:
        p = project(args.project, manifests)
        note = f"; no timing for {p['missing']}: not counted" if p["missing"] else ""
        print(f"projected wall time of {args.project} ({p['runs']} runs): "
              f"{p['projected_s'] / 60:.0f} min (per run {p['overhead_s']:.0f} s before the "
              f"traffic, boot {p['boot_s']:.0f} s{note})")


if __name__ == "__main__":
    main()
