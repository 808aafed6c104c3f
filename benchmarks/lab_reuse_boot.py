"""A run in a reused network against the same run in fresh networks, all in ONE boot of
the lab kernel (virtual clock, traffic started on the clock's grid).

    python benchmarks/lab_reuse_boot.py            # static-tcp, then ps-mptcp between

`tests/integration/test_lab_reuse.py` compares two `pathdiv run` invocations, i.e. two
boots. This separates what reuse changes from what a boot changes: on the host,
`pathdiv run` prepares a folder with the five noisy query runs (vanilla hosts, one
iteration, network.reuse on; it executes them once, as usual); then one boot executes,
in order: the static-tcp run in a network built for it; the same run in a network a
keeper builds and keeps; the ps-mptcp run in that network, reset; the static-tcp run
in it again, reset; the static-tcp run in a network built for it again. Printed: each
static-tcp execution's FCTs (microseconds) against the first. Needs root and the lab
kernel (one boot, ~2 min; emulation queue).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def fcts(run_dir: Path) -> list[int]:
    with (run_dir / "transfers.csv").open() as f:
        return [round((float(r["end_s"]) - float(r["start_s"])) * 1e6)
                for r in csv.DictReader(f)]


def guest(folder: Path, static_id: str, other_id: str) -> int:
    """Inside the lab kernel: fresh, kept (built), other (reused), kept (reused), fresh."""
    import os
    import platform

    from pathdiv.experiments.execute.boot import GUEST_ENV, kernel_description
    from pathdiv.experiments.execute.guest_runs import find_run
    from pathdiv.experiments.execute.keeper import NetworkKeeper
    from pathdiv.experiments.execute.run import execute_run

    os.environ[GUEST_ENV] = json.dumps(kernel_description(
        "virtual", Path("?"), "?", platform.release(), 1536))
    static, other = find_run(folder, static_id)[1], find_run(folder, other_id)[1]
    keeper = NetworkKeeper()
    steps = [("fresh-1", static, None), ("kept-built", static, keeper),
             ("kept-other", other, keeper), ("kept-reused", static, keeper),
             ("fresh-2", static, None)]
    for label, run, kept in steps:
        run_dir = folder / "boot" / label
        run_dir.mkdir(parents=True)
        manifest = execute_run(run, run_dir, keeper=kept)
        ok = manifest["status"] == "complete"
        print(json.dumps({"label": label, "run": run.run_id, "status": manifest["status"],
                          "reused": (manifest.get("network") or {}).get("reused"),
                          "fcts_us": fcts(run_dir) if ok else [],
                          "error": manifest.get("error", "")[:300]}), flush=True)
    keeper.close()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=REPO / "configs" / "noisy.yaml")
    ap.add_argument("--other", default="ps-mptcp", help="the switching level run between")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--guest", nargs=3, metavar=("FOLDER", "STATIC", "OTHER"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.guest:
        return guest(Path(args.guest[0]), args.guest[1], args.guest[2])
    root = args.out or Path(tempfile.mkdtemp(prefix="pathdiv-reuse-boot-"))
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    folder = root / "run"
    subprocess.run([sys.executable, "-m", "pathdiv.experiments.cli", "run", str(args.config),
                    "--out", str(folder), "--reps", "1", "--only", "flow_type=query",
                    "--only", "host=vanilla", "--set", "workload.iterations=1",
                    "--set", "fidelity.max_repeats=0", "--set", "network.reuse=true",
                    "--no-analyze", "--quiet", "--jobs", "1"], check=True, cwd=REPO)
    ids = sorted(p.name for p in (folder / "runs").iterdir())
    static = next(i for i in ids if "static-tcp" in i)
    other = next(i for i in ids if f"_{args.other}_" in i)
    cmd = [sys.executable, "-m", "pathdiv.kernels.uml", "run", "--share", str(folder),
           "--timeout", "1200", "--", sys.executable, str(Path(__file__).resolve()),
           "--guest", str(folder), static, other]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if not rows:
        print(done.stdout[-2000:], done.stderr[-2000:], sep="\n", file=sys.stderr)
        return 1
    first = rows[0]["fcts_us"]
    for r in rows:
        if r["run"] != static:
            print(f"  {r['label']:<12} {r['run']}: {r['status']}, reused {r['reused']}")
            continue
        diff = [b - a for a, b in zip(first, r["fcts_us"], strict=False)]
        big = [d for d in diff if abs(d) > 1]
        print(f"  {r['label']:<12} {r['status']}, reused {r['reused']}: "
              + ("same as fresh-1 to 1 us" if r["fcts_us"] and not big else
                 f"{len(big)} of {len(diff)} FCTs differ from fresh-1 by more than 1 us "
                 f"(e.g. {big[:4]})") + (f"  {r['error']}" if r["error"] else ""))
    print(f"results in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
