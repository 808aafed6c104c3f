"""The ETA at 0 runs against the actual wall time, and one lab kernel against N at once,
on the same plan (needs root and the lab kernel; hold the emulation lock around it).

    python benchmarks/eta_jobs.py                       # noisy query, vanilla, 2 reps
    python benchmarks/eta_jobs.py configs/noisy.yaml --only flow_type=short --pairs 2
    python benchmarks/eta_jobs.py CONFIG --reps 1 --jobs 2 --no-history

Each pair runs the plan twice into fresh folders, `--jobs 1` and `--jobs N` (the order
alternates from pair to pair), with `pathdiv run --no-analyze`. Before each pass it
takes the estimate `pathdiv run` and `pathdiv check` start from (api.expected_time,
calibrated from this machine's run history as it is at that moment, which the passes
before it extend; --no-history: the default costs). Per pass it prints the estimate,
the actual wall time of the command, the error, and the host's CPU steal and load over
the pass; per pair the ratio of the 1-kernel time over the N-kernel time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from hoststat import HostLoad

from pathdiv.experiments import api
from pathdiv.experiments.plan.estimate import Estimator
from pathdiv.experiments.plan.history import HISTORY_ENV, estimator
from pathdiv.experiments.plan.runs import parse_only

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", default=str(REPO / "configs/noisy.yaml"))
    ap.add_argument("--only", action="append",
                    default=None, help="as for pathdiv run (default: flow_type=query, "
                    "host=vanilla)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=None, help="N (default: one per core)")
    ap.add_argument("--pairs", type=int, default=1)
    ap.add_argument("--no-history", action="store_true",
                    help="estimate from the default costs, record nothing")
    ap.add_argument("--out", type=Path, default=None, help="keep the folders here")
    args = ap.parse_args()
    only = args.only if args.only is not None else ["flow_type=query", "host=vanilla"]
    cfg = api.load_config(args.config)
    runs = api.plan(cfg, repetitions=args.reps, only=parse_only(only))
    jobs = api.jobs_for(runs, args.jobs)
    env = dict(os.environ)
    if args.no_history:
        env[HISTORY_ENV] = "off"
    root = args.out or Path(tempfile.mkdtemp(prefix="eta-jobs-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"plan: {len(runs)} run(s) of {args.config} ({' '.join(only)}, reps {args.reps}); "
          f"N = {jobs}; folders in {root}")
    print("| pass | jobs | ETA at 0 s | source | actual s | error | steal | load |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    results: list[dict[int, float]] = []
    for pair in range(args.pairs):
        order = [1, jobs] if pair % 2 == 0 else [jobs, 1]
        times: dict[int, float] = {}
        for j in order:
            est = Estimator() if args.no_history else estimator()
            planned = api.expected_time(runs, j, est)
            folder = root / f"pair{pair}-jobs{j}"
            cmd = [sys.executable, "-m", "pathdiv.experiments.cli", "run", args.config,
                   "--out", str(folder), "--no-analyze", "--quiet", "--reps", str(args.reps),
                   "--jobs", str(j), *[a for o in only for a in ("--only", o)]]
            with HostLoad() as load:
                rc = subprocess.run(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                                    check=False).returncode
            if rc != 0:
                print(f"pass jobs={j} exited {rc}; see {folder}/plan.json", file=sys.stderr)
                return 1
            times[j] = load.wall_s
            error = planned.seconds / load.wall_s - 1
            print(f"| {pair + 1} | {j} | {planned.seconds:.0f} | {planned.source} | "
                  f"{load.wall_s:.1f} | {error:+.0%} | {load.steal:.1%} | {load.load:.1f} |")
        results.append(times)
    for pair, times in enumerate(results):
        if jobs > 1:
            print(f"pair {pair + 1}: 1 kernel {times[1]:.1f} s, {jobs} kernels "
                  f"{times[jobs]:.1f} s, ratio {times[1] / times[jobs]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
