"""`pathdiv check`'s default-cost estimate against the wall time every committed plan took.

    python benchmarks/estimate_vs_measured.py [FOLDER ...] [--fixture FILE]

For each reproduction folder (docs/reproduction/*/ and docs/reproduction/permutation/*/ by
default) with a plan.json and a config.yaml: the plan's complete runs, expanded again from
its config.yaml (the --set overrides already in it) with the plan's --reps, are
estimated one at a time (boots included, analysis not), as `PATHDIV_HISTORY=off pathdiv
check` prints it ("one at a time ~N min"), beside the sum of the runs' recorded `wall_s`
(run.txt's "run wall time"). Lanes at once divide measured and estimate alike, so the
serial figures compare the model, not the number of lab kernels. No emulation; root not
needed.

`--fixture FILE` writes the plans given on the command line as the compact fixture that
tests/unit/test_estimate_replay.py replays: per plan its config path, --reps, the ids of
its complete runs and the measured seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pathdiv.experiments.config.load import load
from pathdiv.experiments.plan.estimate import (
    BASELINE,
    DEFAULT_ESTIMATOR,
    boot_of,
    format_duration,
    phases_s,
)
from pathdiv.experiments.plan.lanes import phases
from pathdiv.experiments.plan.runs import Run, expand

REPO = Path(__file__).resolve().parent.parent


def plane_of_config(data: dict[str, Any]) -> str | None:
    """The data plane a replay estimates a config's runs on (auto: the nftables plane)."""
    plane = str(data.get("dataplane") or BASELINE)
    return None if plane == "auto" else plane


def plan_runs(config: Path, reps: int | None, ids: list[str]) -> list[Run]:
    """The runs of `ids`, expanded from `config` with a plan's --reps (a run's id names its
    cell and repetition, so the ids select what --only did, also across invocations)."""
    runs = expand(load(config), repetitions=reps)
    want = set(ids)
    return [r for r in runs if r.run_id in want]


def serial_s(runs: list[Run]) -> float:
    """The default estimate of `runs` one at a time, boots included (check's serial time)."""
    if not runs:
        return 0.0
    plane = plane_of_config(runs[0].config.data)

    def cost(run: Run) -> float:
        return DEFAULT_ESTIMATOR.run_s(run, plane)

    def boot(run: Run) -> float:
        return boot_of(run, plane)

    return phases_s([lanes for _, lanes in phases(runs, 1, cost)], cost, boot)


def folder_plan(folder: Path) -> dict[str, Any] | None:
    """A folder's plan as the fixture holds it; None without plan.json and config.yaml."""
    plan_file, config = folder / "plan.json", folder / "config.yaml"
    if not plan_file.is_file() or not config.is_file():
        return None
    plan = json.loads(plan_file.read_text())
    done = [r for r in plan["runs"] if r.get("status") == "complete" and r.get("wall_s")]
    if not done:
        return None
    options = plan.get("options") or {}
    run_txt = folder / "run.txt"
    recorded, command = "", "see README.md beside it"
    if run_txt.is_file():
        lines = run_txt.read_text().splitlines()
        commit = next((x.split(":", 1)[1] for x in lines if x.startswith("commit:")), "")
        recorded = commit.replace("runs at", "").replace("runs", "").strip()[:7]
        command = next((x.split(":", 1)[1].split(" (")[0].replace(
            "flock -x /tmp/pathdiv-cpu.lock ", "").strip() for x in lines
            if x.startswith("command:")), command)
    return {"plan": str(folder.relative_to(REPO)), "config": str(config.relative_to(REPO)),
            "reps": options.get("reps"),
            "runs": sorted(r["run_id"] for r in done),
            "measured_s": round(sum(float(r["wall_s"]) for r in done), 1),
            "recorded": recorded, "command": command}


def replay(entry: dict[str, Any]) -> tuple[int, float]:
    """(runs found, default estimate in seconds) of a fixture entry."""
    runs = plan_runs(REPO / entry["config"], entry["reps"], entry["runs"])
    return len(runs), serial_s(runs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="*", type=Path)
    ap.add_argument("--fixture", type=Path, help="write the plans as a replay fixture")
    args = ap.parse_args(argv)
    folders = args.folders or sorted([*(REPO / "docs/reproduction").glob("*/"),
                                      *(REPO / "docs/reproduction/permutation").glob("*/")])
    entries = [e for e in (folder_plan(f.resolve()) for f in folders) if e]
    print("| plan | runs | estimate (one at a time) | measured (sum of wall_s) | "
          "measured / estimate | commit | command |")
    print("| --- | ---: | ---: | ---: | ---: | --- | --- |")
    for e in entries:
        try:
            found, est = replay(e)
        except Exception as exc:  # an old config the code no longer reads
            print(f"| {e['plan']} | {len(e['runs'])} | - ({type(exc).__name__}) | "
                  f"{format_duration(e['measured_s'])} | - | {e['recorded']} | "
                  f"`{e['command']}` |")
            continue
        ratio = f"{e['measured_s'] / est:.2f}" if found == len(e["runs"]) and est else \
            f"- ({found} of {len(e['runs'])} runs expand)"
        print(f"| {e['plan']} | {len(e['runs'])} | {est / 60:.1f} min | "
              f"{e['measured_s'] / 60:.1f} min | {ratio} | {e['recorded']} | "
              f"`{e['command']}` |")
    if args.fixture:
        for e in entries:
            e.pop("command")
        args.fixture.write_text(json.dumps(entries, separators=(",", ":")) + "\n")
        print(f"wrote {len(entries)} plan(s) to {args.fixture}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
