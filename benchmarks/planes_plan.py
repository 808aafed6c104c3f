"""A whole plan on a P4 plane against the nftables plane: paired wall times, the ratio, and
how far `pathdiv check`'s estimate was on each (needs root and the lab kernel; hold the
emulation lock around it: about 12 min per pair for configs/noisy.yaml on 2 cores).

    python benchmarks/planes_plan.py                      # noisy.yaml, the plane auto picks
    python benchmarks/planes_plan.py --pairs 2 --plane p4-ebpf
    python benchmarks/planes_plan.py --only flow_type=query --only host=vanilla --reps 1 \\
        --plane bmv2 --pairs 1

Each pair runs `pathdiv run CONFIG --set dataplane=PLANE --no-analyze` into a fresh
folder, then the same with dataplane=nftables (A B A B ...; whole processes, the lab
kernel's boots included). It prints per run of a pair: the plan's wall time, the CPU time
of everything it started, the host's steal share and load, the estimate `pathdiv check`
prints for that plane from the default costs (what a machine without a run history is
told) and from this machine's history, and each estimate's error; per pair the P4/nftables
ratio of wall times; at the end min/median/max of the ratios and of each plane's
default-cost error; and what the P4 plane paid beyond the nftables plane, fitted run by
run over every pair (`plane_costs`: seconds per switch of a run that built its network,
and per MB of payload through one switch): the figures `experiments/config/planes.py`
holds as the plane's `PlaneCost`. With --compare, the last pair's two folders go through
`python -m pathdiv.analysis.report.planes` (cell by cell, paired by run and transfer group).
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
from pathdiv.experiments.plan.estimate import Estimator, format_duration, run_work
from pathdiv.experiments.plan.history import estimator
from pathdiv.experiments.plan.runs import parse_only

REPO = Path(__file__).resolve().parents[1]
BASELINE = "nftables"


def chosen_plane(runs: list[api.Run]) -> str:
    """The P4 plane `dataplane: auto` gives the plan here (the first run's)."""
    planes = {c.plane for c in api.plane_choices(runs).values()}
    if len(planes) != 1 or None in planes:
        raise SystemExit(f"auto puts the runs on {sorted(map(str, planes))}; pass --plane")
    return str(planes.pop())


def run_walls(folder: Path) -> dict[str, tuple[float, bool]]:
    """run id -> (host wall seconds, whether it built its network) of a plan's complete
    runs (plan.json's wall_s: a lab kernel's boot counts towards its first run)."""
    out = {}
    for entry in json.loads((folder / "plan.json").read_text())["runs"]:
        if entry.get("status") != "complete" or not entry.get("wall_s"):
            continue
        manifest = json.loads((folder / "runs" / entry["run_id"] / "manifest.json").read_text())
        out[entry["run_id"]] = (float(entry["wall_s"]),
                                not manifest.get("network", {}).get("reused", False))
    return out


def plane_costs(rows: list[tuple[float, float, float]]) -> tuple[float, float]:
    """Least squares, through the origin, of extra = per_switch_s x built switches +
    per_switch_mb_s x switch-MB over rows (extra wall s, built switches, switch-MB). Rows
    that cannot tell the two apart (runs of one kind) give the per-switch part alone."""
    sxx = sum(x * x for _, x, _ in rows)
    syy = sum(y * y for _, _, y in rows)
    sxy = sum(x * y for _, x, y in rows)
    sex = sum(e * x for e, x, _ in rows)
    sey = sum(e * y for e, _, y in rows)
    det = sxx * syy - sxy * sxy
    if det <= 1e-6 * sxx * syy:  # one kind of run (e.g. query runs only): per switch only
        return (sex / sxx if sxx else 0.0), 0.0
    return (sex * syy - sey * sxy) / det, (sey * sxx - sex * sxy) / det


def run_plan(args: argparse.Namespace, plane: str, out: Path) -> tuple[HostLoad, int]:
    argv = [sys.executable, "-m", "pathdiv.experiments.cli", "run", args.config, "--out",
            str(out), "--no-analyze", "--quiet", "--set", f"dataplane={plane}"]
    for item in args.set:
        argv += ["--set", item]
    for item in args.only:
        argv += ["--only", item]
    if args.reps is not None:
        argv += ["--reps", str(args.reps)]
    if args.jobs is not None:
        argv += ["--jobs", str(args.jobs)]
    with HostLoad() as host:
        proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the plan on {plane} failed ({proc.returncode}): "
                         f"{proc.stderr[-2000:]}")
    plan = json.loads((out / "plan.json").read_text())
    complete = sum(1 for e in plan["runs"] if e.get("status") == "complete")
    return host, complete


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="?", default=str(REPO / "configs/noisy.yaml"))
    ap.add_argument("--plane", default=None, help="the P4 plane (default: auto's choice)")
    ap.add_argument("--pairs", type=int, default=1)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--compare", action="store_true", help="the planes report of the "
                    "last pair")
    args = ap.parse_args()
    base_cfg = api.load_config(args.config, args.set)
    only = parse_only(args.only)
    plane = args.plane or chosen_plane(api.plan(base_cfg, repetitions=args.reps, only=only))
    expected: dict[str, tuple[float, float, str]] = {}
    for name in (plane, BASELINE):
        cfg = api.load_config(args.config, [*args.set, f"dataplane={name}"])
        runs = api.plan(cfg, repetitions=args.reps, only=only)
        jobs = api.jobs_for(runs, args.jobs)
        default = api.expected_time(runs, jobs, Estimator())
        mine = api.expected_time(runs, jobs, estimator())
        expected[name] = (default.seconds, mine.seconds, mine.source)
        print(f"{name}: {len(runs)} run(s); check expects "
              f"{format_duration(default.seconds)} by the default costs, "
              f"{format_duration(mine.seconds)} from {mine.source}", flush=True)
    root = args.out or Path(tempfile.mkdtemp(prefix="planes-plan-"))
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    ratios: list[float] = []
    extra: list[tuple[float, float, float]] = []
    runs = {r.run_id: r for r in api.plan(base_cfg, repetitions=args.reps, only=only)}
    errors: dict[str, list[float]] = {plane: [], BASELINE: []}
    folders: dict[str, Path] = {}
    for pair in range(1, args.pairs + 1):
        wall: dict[str, float] = {}
        for name in (plane, BASELINE):
            folders[name] = root / f"pair{pair}-{name}"
            host, complete = run_plan(args, name, folders[name])
            wall[name] = host.wall_s
            default, mine, _ = expected[name]
            errors[name].append(default / host.wall_s - 1)
            print(f"pair {pair} {name:<9} {host}; {complete} run(s) complete; estimate "
                  f"{default:.0f} s by default costs ({default / host.wall_s - 1:+.0%}), "
                  f"{mine:.0f} s from history ({mine / host.wall_s - 1:+.0%})", flush=True)
        ratios.append(wall[plane] / wall[BASELINE])
        p4, base = run_walls(folders[plane]), run_walls(folders[BASELINE])
        for rid in sorted(p4.keys() & base.keys() & runs.keys()):
            run = runs[rid]
            work = run_work(run.config, run.flow_type, run.workload_seed)
            extra.append((p4[rid][0] - base[rid][0], work.switches if p4[rid][1] else 0,
                          work.switch_mb))
        print(f"pair {pair} {plane}/{BASELINE}: wall {ratios[-1]:.2f}x", flush=True)
    print(f"{plane}/{BASELINE} over {len(ratios)} pair(s), min/median/max: "
          f"{min(ratios):.2f} / {statistics.median(ratios):.2f} / {max(ratios):.2f}x")
    for name, errs in errors.items():
        print(f"{name}: default-cost estimate error min/median/max "
              f"{min(errs):+.0%} / {statistics.median(errs):+.0%} / {max(errs):+.0%}")
    if extra:
        per_switch, per_mb = plane_costs(extra)
        print(f"{plane} beyond {BASELINE}, fitted over {len(extra)} paired run(s): "
              f"per_switch_s {per_switch:.3f}, per_switch_mb_s {per_mb:.4f}")
    if args.compare:
        for folder in folders.values():
            subprocess.run([sys.executable, "-m", "pathdiv.experiments.cli", "analyze",
                            str(folder)], cwd=REPO, check=True, capture_output=True)
        subprocess.run([sys.executable, "-m", "pathdiv.analysis.report.planes",
                        str(folders[BASELINE]), str(folders[plane])], cwd=REPO, check=True)
    print(f"folders under {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
