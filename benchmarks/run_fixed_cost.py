"""Per-run fixed cost: a run's wall time minus its simulated traffic time, with the
network built afresh for every run (`network.reuse: false`, before) and reused between
runs (`true`, after), paired in one invocation, the host's CPU steal beside each side.

    python benchmarks/run_fixed_cost.py                  # lab kernel, 5 query runs a side
    python benchmarks/run_fixed_cost.py --kernel host    # this machine's kernel
    python benchmarks/run_fixed_cost.py --flow-type short --only switching=ecmp-mptcp
    python benchmarks/run_fixed_cost.py --before capture.tool=tcpdump   # linkcap vs tcpdump

With `--before KEY=VALUE` (repeatable) both sides reuse the network and the before side
runs with those settings: the pair then compares them (e.g. the capturing program), not
the reuse. `--set KEY=VALUE` applies to both sides.

Each side is one `pathdiv run` of configs/noisy.yaml (its workload, iterations and
captures) restricted to one flow type, vanilla hosts, one repetition: the five switching
levels, one run each, in the plan's order, in one boot of the lab kernel. A run's wall
time is the time between the birth of its manifest and of the run's before it (the
host's clock, to the millisecond; the first run's from the results folder's), or
`wall_s` in plan.json where the file system keeps no birth times (the host's clock, in
steps of the ~2 s the host polls the guest's progress at); its traffic time is the
manifest's `timings.traffic_s` (the guest's clock: simulated time on the virtual clock).
The first run of a side also carries the lab kernel's boot and the first build, so it
is printed apart and left out of the median. Needs root; holds the machine for ~3 min
(lab kernel).
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

from hoststat import HostLoad

REPO = Path(__file__).resolve().parents[1]


def birth_s(path: Path) -> float | None:
    """When `path` was created (host clock), or None where the file system does not say."""
    done = subprocess.run(["stat", "-c", "%.9W", str(path)], capture_output=True, text=True)
    try:
        value = float(done.stdout.strip())
    except ValueError:
        return None
    return value if value > 0 else None


def side(out: Path, reuse: bool, args: argparse.Namespace, sets: list[str]
         ) -> tuple[list[dict], HostLoad]:
    """Run one side into `out` with `sets` (KEY=VALUE) besides the benchmark's own;
    (per run in plan order: id, wall, traffic, fixed), load."""
    argv = [sys.executable, "-m", "pathdiv.experiments.cli", "run", str(args.config),
            "--out", str(out), "--reps", "1", "--only", f"flow_type={args.flow_type}",
            "--only", "host=vanilla", *[x for o in args.only for x in ("--only", o)],
            # the host factor's levels set hosts.kernel: lab themselves
            *(["--set", "factors.host={vanilla: {hosts.kernel: host, hosts.scheduler: "
               "default}}"] if args.kernel == "host" else []),
            "--set", f"network.reuse={'true' if reuse else 'false'}",
            *[x for kv in sets for x in ("--set", kv)],
            "--no-analyze", "--quiet", "--jobs", "1"]  # one boot: all but the first reuse
    with HostLoad() as load:
        subprocess.run(argv, check=True, cwd=REPO)
    plan = json.loads((out / "plan.json").read_text())
    rows = []
    previous = birth_s(out)
    for entry in sorted(plan["runs"], key=lambda e: int(e["order"])):
        path = out / "runs" / entry["run_id"] / "manifest.json"
        manifest = json.loads(path.read_text())
        if manifest.get("status") != "complete":
            raise SystemExit(f"{entry['run_id']}: {manifest.get('status')} "
                             f"({manifest.get('error', '')[:200]})")
        done = birth_s(path)
        wall = float(entry["wall_s"]) if done is None or previous is None else done - previous
        previous = done
        traffic = float(manifest["timings"]["traffic_s"])
        rows.append({"run_id": entry["run_id"], "wall_s": wall, "traffic_s": traffic,
                     "fixed_s": wall - traffic, "timings": manifest["timings"],
                     "reused": bool((manifest.get("network") or {}).get("reused"))})
    return rows, load


def fcts(folder: Path, run_id: str) -> list[float]:
    """Every transfer's FCT in seconds, in the run's order."""
    with (folder / "runs" / run_id / "transfers.csv").open() as f:
        return [float(r["end_s"]) - float(r["start_s"]) for r in csv.DictReader(f)]


def agreement(root: Path, rows: list[dict], what: str) -> str:
    """Per run: are the transfers' FCTs of both sides the same to the microsecond?"""
    lines = [f"FCTs, {what} (same run, same seed):"]
    for r in rows:
        a, b = fcts(root / "before", r["run_id"]), fcts(root / "after", r["run_id"])
        diffs = [abs(x - y) for x, y in zip(a, b, strict=True)]
        same = sum(d < 1e-6 for d in diffs)
        lines.append(f"  {r['run_id']:<26} {same}/{len(diffs)} identical to the µs, max "
                     f"difference {max(diffs) * 1e3:.3f} ms, mean FCT "
                     f"{statistics.mean(a) * 1e3:.2f} vs {statistics.mean(b) * 1e3:.2f} ms")
    return "\n".join(lines)


def summary(name: str, rows: list[dict], load: HostLoad) -> str:
    later = [r["fixed_s"] for r in rows[1:]]
    lines = [f"{name}: first run {rows[0]['wall_s']:.1f} s wall (boot and build included), "
             f"then fixed cost per run median {statistics.median(later):.1f} s "
             f"(min {min(later):.1f}, max {max(later):.1f}, {len(later)} runs); "
             f"{load}"]
    for r in rows:
        t = r["timings"]
        lines.append(f"  {r['run_id']:<26} wall {r['wall_s']:6.1f}  traffic "
                     f"{r['traffic_s']:5.2f}  fixed {r['fixed_s']:5.1f}  build "
                     f"{t.get('build_s', 0):5.2f}  reset {t.get('reset_s', 0):5.2f}  "
                     f"{'reused' if r['reused'] else 'built'}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=REPO / "configs" / "noisy.yaml")
    parser.add_argument("--kernel", choices=("host", "lab"), default="lab")
    parser.add_argument("--flow-type", default="query")
    parser.add_argument("--only", action="append", default=[], metavar="FACTOR=LEVEL")
    parser.add_argument("--out", type=Path, help="keep both sides' results under it")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config setting for both sides")
    parser.add_argument("--before", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of the before side only; both sides then reuse")
    args = parser.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="pathdiv-fixed-cost-"))
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)  # the lab kernel's guest writes as an unprivileged user
    compare = bool(args.before)
    before, load_b = side(root / "before", compare, args, args.set + args.before)
    after, load_a = side(root / "after", True, args, args.set)
    label = f"before ({', '.join(args.before)}, network.reuse: true)" if compare \
        else "before (network.reuse: false)"
    print(summary(label, before, load_b))
    print(summary("after  (network.reuse: true) ", after, load_a))
    b = statistics.median(r["fixed_s"] for r in before[1:])
    a = statistics.median(r["fixed_s"] for r in after[1:])
    print(agreement(root, after, "before vs after" if compare
                    else "network built for the run vs reused"))
    print(f"fixed cost per run: {b:.1f} s -> {a:.1f} s (x{b / a:.1f} less); "
          f"results in {root}")


if __name__ == "__main__":
    main()
