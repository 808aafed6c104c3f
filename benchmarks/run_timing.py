"""Wall time of one run per pattern and flow type, and where it goes: network build and
teardown versus traffic (the rest: reachability check, capture start/drain/stop,
provenance); and how close the transfers come to the link rate. The figures behind the
repetitions chosen in configs/silent.yaml and configs/noisy.yaml.

    python benchmarks/run_timing.py                 # runs a small plan (root, ~6 min)
    python benchmarks/run_timing.py --kernel lab    # the same in the lab kernel (UML)
    python benchmarks/run_timing.py --flow-types query short
    python benchmarks/run_timing.py RESULTS_DIR     # only summarise an existing folder

The small plan is each reference config with one switching level (ecmp-mptcp) on this
machine's kernel (or, with --kernel lab, in one boot of the lab kernel per pattern,
on the clock of `--clock`), one repetition, one
iteration, every flow type.

`host s` is the run's wall time on the host (from the file times of the manifests; the
first run of a folder includes the boot), `run s` and the phases its own timings: the
guest's clock on the lab kernel (virtual time there), the wall clock on the host kernel.
`rate` is the median over transfer groups of the group's goodput (its bytes over the time
from its first start to its last end) as a fraction of the host link rate: 1.0 is a
perfect 20 Mbit/s link. Query groups are too short to reach it (handshakes, slow start);
long flows show whether the emulation keeps up with the configured rate.
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
    its host wall seconds under `_wall_s`: from the previous manifest's write (the
    folder's config.yaml for the first: the boot included) to its own, as the host's
    file times say (a lab-kernel run's timings are its guest's clock)."""
    manifests = []
    paths = sorted(folder.glob("runs/*/manifest.json"), key=lambda p: p.stat().st_mtime)
    previous = (folder / "config.yaml").stat().st_mtime if (folder / "config.yaml").exists() \
        else None
    for path in paths:
        m = json.loads(path.read_text())
        transfers = path.parent / "transfers.csv"
        m["_transfers"] = list(csv.DictReader(transfers.open())) if transfers.exists() else []
        mtime = path.stat().st_mtime
        m["_wall_s"] = mtime - previous if previous is not None else float("nan")
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


if __name__ == "__main__":
    main()
