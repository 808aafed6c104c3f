"""How far two runs of the same plan differ: every transfer's FCT, run twice.

    .venv/bin/python benchmarks/repeatability.py CONFIG [--only KEY=VALUE ...] [--out DIR]

Runs `pathdiv run CONFIG` twice (same seed, so the same runs and rounds) into two
folders and compares each transfer's flow completion time (end_s - start_s, matched
by run and transfer id): the largest and median absolute difference, and the largest
relative one. On the lab kernel's virtual clock the host's load cannot enter the
results; what differs comes from the guest itself (random port numbers, hence ECMP
hashes and paths, random sequence numbers). Each pass prints its wall time with the
host's CPU steal and load.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from hoststat import HostLoad

REPO = Path(__file__).resolve().parents[1]


def fcts(folder: Path) -> dict[tuple[str, str], float]:
    """(run id, transfer id) -> FCT in seconds, ok transfers only."""
    out = {}
    for path in sorted(folder.glob("runs/*/transfers.csv")):
        for row in csv.DictReader(path.open()):
            if row["ok"] == "True":
                out[(path.parent.name, row["transfer_id"])] = (float(row["end_s"])
                                                               - float(row["start_s"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config")
    ap.add_argument("--only", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", type=Path, help="keep both results folders here")
    args = ap.parse_args()
    base = args.out or Path(tempfile.mkdtemp(prefix="pathdiv-repeat-"))
    passes = []
    for name in ("a", "b"):
        cmd = [sys.executable, "-m", "pathdiv.experiments.cli", "run", args.config, "--out",
               str(base / name), "--quiet", "--no-analyze", "--reps", "1"]
        cmd += [f"--only={o}" for o in args.only] + [f"--set={s}" for s in args.set]
        with HostLoad() as host:
            subprocess.run(cmd, cwd=REPO, check=False)
        print(f"pass {name}: {host}", flush=True)
        passes.append(fcts(base / name))
    a, b = passes
    common = sorted(set(a) & set(b))
    if not common:
        raise SystemExit("no transfer completed in both passes")
    diffs = [abs(a[k] - b[k]) for k in common]
    rel = [abs(a[k] - b[k]) / a[k] for k in common if a[k] > 0]
    print(f"{len(common)} transfers in both passes ({len(a)} and {len(b)} ok); FCT |a-b|: "
          f"max {max(diffs) * 1e3:.3f} ms, median {statistics.median(diffs) * 1e3:.3f} ms, "
          f"largest relative {max(rel):.2e}; identical: {sum(d == 0 for d in diffs)}")
    print(f"mean FCT: {statistics.fmean(a[k] for k in common):.6f} s and "
          f"{statistics.fmean(b[k] for k in common):.6f} s")


if __name__ == "__main__":
    main()
