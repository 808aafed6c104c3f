"""A whole plan's wall time against its goal and against the ETA `pathdiv check` printed
at 0 runs (needs root and the lab kernel; hold the emulation queue around it).

    python benchmarks/plan_time.py                          # configs/noisy.yaml, all runs
    python benchmarks/plan_time.py --goal-min 15 --jobs 2
    python benchmarks/plan_time.py configs/noisy.yaml --only flow_type=query --reps 1 \\
        --set topology.k=8 --set lab.memory_mb=6144 --jobs 1 --no-analyze

It takes the estimate `pathdiv check` and the progress bar start from (calibrated from
this machine's run history as it is now, or the defaults: the source is printed), then
runs `pathdiv run CONFIG --no-analyze` into a fresh folder, then `pathdiv analyze` on
it (unless --no-analyze), and prints: the plan's wall time (runs plus analysis, each
apart), the goal and whether it was met, the ETA at 0 runs (which leaves the analysis
out) and its error against the runs' wall time, the runs' median wall time per
flow type (plan.json `wall_s`), the guest's peak memory (manifest `memory_mb`), how
many runs reused a network, and the host's CPU steal and load over the plan.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from hoststat import HostLoad

from pathdiv.experiments import api
from pathdiv.experiments.plan.history import estimator
from pathdiv.experiments.plan.runs import parse_only

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="?", default=str(REPO / "configs/noisy.yaml"))
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=None, help="lab kernels at once "
                    "(default: pathdiv run's, one per core)")
    ap.add_argument("--goal-min", type=float, default=15.0)
    ap.add_argument("--no-analyze", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    cfg = api.load_config(args.config, args.set)
    only = parse_only(args.only)
    runs = api.plan(cfg, repetitions=args.reps, only=only)
    jobs = api.jobs_for(runs, args.jobs)
    est = estimator()
    eta = api.expected_time(runs, jobs, est)
    folder = (args.out or Path(tempfile.mkdtemp(prefix="plan-time-"))) / "plan"
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.parent.chmod(0o755)
    cmd = [sys.executable, "-m", "pathdiv.experiments.cli", "run", args.config, "--out",
           str(folder), "--quiet", "--jobs", str(jobs),
           *[a for o in args.only for a in ("--only", o)],
           *[a for s in args.set for a in ("--set", s)],
           *(["--reps", str(args.reps)] if args.reps else []), "--no-analyze"]
    print("$", " ".join(cmd), flush=True)
    with HostLoad() as load:
        rc = subprocess.run(cmd, cwd=REPO, check=False).returncode
    analysis_s = 0.0
    if not args.no_analyze:
        with HostLoad() as analysis:
            subprocess.run([sys.executable, "-m", "pathdiv.experiments.cli", "analyze",
                            str(folder)], cwd=REPO, check=False, stdout=subprocess.DEVNULL)
        analysis_s = analysis.wall_s
    plan = json.loads((folder / "plan.json").read_text())
    walls: dict[str, list[float]] = {}
    peak, reused, complete = 0, 0, 0
    for entry in plan["runs"]:
        path = folder / "runs" / entry["run_id"] / "manifest.json"
        manifest = json.loads(path.read_text()) if path.exists() else {}
        complete += manifest.get("status") == "complete"
        reused += bool((manifest.get("network") or {}).get("reused"))
        mem = manifest.get("memory_mb") or {}
        peak = max([peak, *[int(v) for k, v in mem.items() if k != "total" and v]])
        if entry.get("wall_s") is not None:
            walls.setdefault(entry["flow_type"], []).append(float(entry["wall_s"]))
    minutes = (load.wall_s + analysis_s) / 60
    print(f"plan: {len(runs)} run(s), {complete} complete, {reused} on a reused network, "
          f"{jobs} lab kernel(s) at once; exit {rc}")
    print(f"wall: {minutes:.1f} min = runs {load.wall_s / 60:.1f} min + analysis "
          f"{analysis_s / 60:.1f} min; goal {args.goal_min:g} min: "
          f"{'met' if minutes <= args.goal_min else 'missed'}")
    print(f"ETA at 0 runs (runs only, as `pathdiv check` prints it): {eta.seconds / 60:.1f} "
          f"min ({eta.source}); error {(eta.seconds - load.wall_s) / load.wall_s:+.0%} of "
          "the runs' actual")
    for flow, values in sorted(walls.items()):
        print(f"  {flow}: {len(values)} run(s), median {statistics.median(values):.1f} s "
              f"(min {min(values):.1f}, max {max(values):.1f})")
    print(f"guest memory at most {peak} MB in use; {load}")
    print(f"results in {folder}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
