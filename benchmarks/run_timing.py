"""Wall time of one run per pattern and flow type, and where it goes: network build and
teardown versus traffic (the rest: reachability check, capture start/drain/stop,
provenance). The figures behind the repetitions chosen in configs/silent.yaml and
configs/noisy.yaml.

    python benchmarks/run_timing.py                 # runs a small plan (root, ~6 min)
    python benchmarks/run_timing.py --flow-types query short
    python benchmarks/run_timing.py RESULTS_DIR     # only summarise an existing folder

The small plan is each reference config with one switching level (ecmp-mptcp) on this
machine's kernel, one repetition, one iteration, every flow type.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
PHASES = ("build_s", "traffic_s", "teardown_s")


def summarise(manifests: list[dict]) -> list[dict]:
    """One row per (pattern, flow type) over complete runs: mean seconds and shares."""
    cells: dict[tuple[str, str], list[dict]] = {}
    for m in manifests:
        if m.get("status") != "complete":
            continue
        key = (m["config"]["workload"]["pattern"], m["flow_type"])
        cells.setdefault(key, []).append(m["timings"])
    rows = []
    for (pattern, flow), timings in sorted(cells.items()):
        mean = {k: statistics.fmean(float(t[k]) for t in timings)
                for k in (*PHASES, "total_s")}
        other = mean["total_s"] - sum(mean[p] for p in PHASES)
        rows.append({"pattern": pattern, "flow_type": flow, "runs": len(timings), **mean,
                     "other_s": other,
                     "build_teardown_share": (mean["build_s"] + mean["teardown_s"])
                     / mean["total_s"],
                     "traffic_share": mean["traffic_s"] / mean["total_s"]})
    return rows


def table(rows: list[dict]) -> str:
    head = (f"{'pattern':<8} {'flow':<6} {'runs':>4} {'wall s':>7} {'build':>6} "
            f"{'traffic':>8} {'teardown':>8} {'other':>6} {'build+td':>8} {'traffic':>8}")
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['pattern']:<8} {r['flow_type']:<6} {r['runs']:>4} {r['total_s']:>7.1f} "
            f"{r['build_s']:>6.1f} {r['traffic_s']:>8.1f} {r['teardown_s']:>8.1f} "
            f"{r['other_s']:>6.1f} {r['build_teardown_share']:>8.0%} {r['traffic_share']:>8.0%}")
    return "\n".join(lines)


def host_kernel_config(name: str, workdir: Path) -> Path:
    data = yaml.safe_load((REPO / "configs" / f"{name}.yaml").read_text())
    data["factors"] = {"switching": {"ecmp-mptcp": data["factors"]["switching"]["ecmp-mptcp"]}}
    data["hosts"]["kernel"] = "host"
    data["workload"]["iterations"] = 1
    data["repetitions"] = 1
    data["analysis"]["ivs"] = ["switching"]
    path = workdir / f"{name}-timing.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run_small_plan(workdir: Path, flow_types: list[str]) -> list[dict]:
    manifests = []
    for name in ("silent", "noisy"):
        cfg = host_kernel_config(name, workdir)
        out = workdir / name
        for flow in flow_types:  # one folder per pattern, resumed once per flow type
            subprocess.run([sys.executable, "-m", "experiments.cli", "run", str(cfg),
                            "--out", str(out), "--only", f"flow_type={flow}", "--quiet",
                            "--no-analyze"], cwd=REPO, check=False)
        manifests += [json.loads(p.read_text())
                      for p in sorted((out / "runs").glob("*/manifest.json"))]
    return manifests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="?", type=Path, help="summarise this folder only")
    parser.add_argument("--flow-types", nargs="+", default=["query", "short", "long"])
    args = parser.parse_args()
    if args.results:
        manifests = [json.loads(p.read_text())
                     for p in sorted(args.results.glob("runs/*/manifest.json"))]
    else:
        with tempfile.TemporaryDirectory(prefix="pathdiv-timing-") as tmp:
            manifests = run_small_plan(Path(tmp), args.flow_types)
    rows = summarise(manifests)
    if not rows:
        raise SystemExit("no complete runs to time")
    print(table(rows))


if __name__ == "__main__":
    main()
