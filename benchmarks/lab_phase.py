"""Does a lab-kernel run depend on the moment it starts? The same run, one boot, started
at different phases of the guest's clock, with and without the grid start.

    python benchmarks/lab_phase.py                         # static-tcp query, noisy.yaml
    python benchmarks/lab_phase.py --only switching=static-tcp --flow-type short

On the host: `pathdiv run` prepares a results folder with one run of CONFIG (the run
itself executes once there, as usual). Then one boot of the lab kernel (virtual clock)
executes that run again several times, each time in a network built for it: first
delayed by each `--shift` (guest milliseconds slept before the run) with the traffic
started wherever the run happens to be (the grid start turned off), then the same
shifts with the traffic started on the clock's grid (traffic/clockgrid.py). Printed per
attempt: the transfers' FCTs (microseconds, in the run's order) and whether they equal
the first attempt's. If a run depends on its start only through the clock's phase,
the first group differs among itself and the second does not.

Needs root and the lab kernel; holds the machine for ~1 min per attempt (emulation
queue). In the guest it runs itself with `--guest FOLDER RUN_ID`.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def fcts(run_dir: Path) -> list[int]:
    with (run_dir / "transfers.csv").open() as f:
        return [round((float(r["end_s"]) - float(r["start_s"])) * 1e6)
                for r in csv.DictReader(f)]


def guest(folder: Path, run_id: str, shifts: list[float]) -> int:
    """Inside the lab kernel: execute the run once per (grid, shift)."""
    import os
    import platform

    from pathdiv.experiments.execute.boot import GUEST_ENV, kernel_description
    from pathdiv.experiments.execute.guest_runs import find_run
    from pathdiv.experiments.execute.run import execute_run
    from pathdiv.experiments.traffic import clockgrid

    # what `pathdiv run` tells the guest (execute/boot.py): this is the lab kernel
    os.environ[GUEST_ENV] = json.dumps(kernel_description(
        "virtual", Path("?"), "?", platform.release(), 1536))
    _, run = find_run(folder, run_id)
    real_align = clockgrid.align
    out = []
    for grid in (False, True):
        clockgrid.align = real_align if grid else (lambda *_: 0)  # type: ignore[assignment]
        for shift in shifts:
            time.sleep(shift / 1000)
            run_dir = folder / "phase" / f"{'grid' if grid else 'nogrid'}-{shift:g}ms"
            run_dir.mkdir(parents=True)
            t0 = time.monotonic_ns()
            manifest = execute_run(run, run_dir)
            out.append({"grid": grid, "shift_ms": shift, "status": manifest["status"],
                        "started_ns": t0, "grid_start": manifest.get("clock_grid"),
                        "fcts_us": fcts(run_dir) if manifest["status"] == "complete" else [],
                        "error": manifest.get("error", "")})
            print(json.dumps(out[-1]), flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=REPO / "configs" / "noisy.yaml")
    ap.add_argument("--flow-type", default="query")
    ap.add_argument("--only", action="append", default=[], metavar="FACTOR=LEVEL",
                    help="default: switching=static-tcp")
    ap.add_argument("--shift", type=float, action="append", default=[],
                    help="guest ms slept before an attempt (default 0, 3.3, 1234.5)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--guest", nargs=2, metavar=("FOLDER", "RUN_ID"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    shifts = args.shift or [0.0, 3.3, 1234.5]
    if args.guest:
        return guest(Path(args.guest[0]), args.guest[1], shifts)
    root = args.out or Path(tempfile.mkdtemp(prefix="pathdiv-phase-"))
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    folder = root / "run"
    only = args.only or ["switching=static-tcp"]
    subprocess.run([sys.executable, "-m", "pathdiv.experiments.cli", "run", str(args.config),
                    "--out", str(folder), "--reps", "1", "--only",
                    f"flow_type={args.flow_type}", "--only", "host=vanilla",
                    *[x for o in only for x in ("--only", o)], "--set",
                    "workload.iterations=1", "--set", "fidelity.max_repeats=0",
                    "--no-analyze", "--quiet", "--jobs", "1"], check=True, cwd=REPO)
    run_id = next((folder / "runs").iterdir()).name
    print(f"run {run_id}: first execution FCTs (us) {fcts(folder / 'runs' / run_id)}")
    cmd = [sys.executable, "-m", "pathdiv.kernels.uml", "run", "--share", str(folder),
           "--timeout", "1800", "--", sys.executable, str(Path(__file__).resolve()),
           *[x for s in shifts for x in ("--shift", str(s))], "--guest", str(folder), run_id]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if not rows:
        print(done.stdout[-2000:], done.stderr[-2000:], sep="\n", file=sys.stderr)
        return 1
    for grid in (False, True):
        group = [r for r in rows if r["grid"] == grid]
        first = group[0]["fcts_us"] if group else []
        print(f"traffic started {'on the grid' if grid else 'wherever the run is'}:")
        for r in group:
            same = "same as the first" if r["fcts_us"] == first else "DIFFERS"
            diff = [b - a for a, b in zip(first, r["fcts_us"], strict=False) if b != a]
            print(f"  shift {r['shift_ms']:>8g} ms  {r['status']:<8} mean FCT "
                  f"{sum(r['fcts_us']) / max(1, len(r['fcts_us'])):9.0f} us  {same}"
                  + (f" ({len(diff)} of {len(first)} transfers, by {diff[:4]} us)"
                     if diff else "") + (f"  {r['error'][:200]}" if r["error"] else ""))
    print(f"results in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
