"""The guest's side of lab-kernel runs: planned runs of a results folder, in order.

    python -m pathdiv.experiments.execute.guest_runs execute [--progress FILE] FOLDER RUN_ID...

is what the lab kernel runs (lab_runs.py boots it with FOLDER as the share): each run
is found again from the folder's config.yaml and plan.json (`find_run`) and executed
as on the host (run.py), writing its own manifest. The host watches the folder: the
progress file (the current run and round) and the heartbeat (the guest's clock).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import threading
import time
from pathlib import Path

from pathdiv.experiments.config.load import Config, ConfigError, read_config_text, validate
from pathdiv.experiments.config.safe_yaml import YamlRefused, load_text
from pathdiv.experiments.execute.keeper import NetworkKeeper
from pathdiv.experiments.execute.lab_runs import heartbeat_path
from pathdiv.experiments.execute.run import execute_attempts, run_line
from pathdiv.experiments.execute.runstate import ResultsError
from pathdiv.experiments.manifest import write_json_atomic
from pathdiv.experiments.plan.runs import Run, expand
from pathdiv.experiments.traffic import clockgrid


def find_run(folder: Path, run_id: str) -> tuple[Config, Run]:
    """The run `run_id` of the experiment in `folder` (its config.yaml and plan.json)."""
    try:
        cfg = validate(load_text(read_config_text(folder / "config.yaml")),
                       str(folder / "config.yaml"))
        plan = json.loads((folder / "plan.json").read_text())
    except (OSError, ConfigError, YamlRefused) as exc:
        raise ResultsError(f"{folder} is not a results folder of `pathdiv run` ({exc})") \
            from None
    entry = next((e for e in plan.get("runs", []) if e.get("run_id") == run_id), None)
    if entry is None:
        ids = ", ".join(e.get("run_id", "?") for e in plan.get("runs", [])[:5])
        raise ResultsError(f"run {run_id!r} is not in {folder / 'plan.json'} (e.g. {ids})")
    for run in expand(cfg, repetitions=int(entry["repetition"]),
                      flow_types=[entry["flow_type"]], only=dict(entry["factors"])):
        if run.run_id == run_id:
            return cfg, dataclasses.replace(run, order=int(entry["order"]))
    raise ResultsError(f"run {run_id!r} of {folder / 'plan.json'} does not follow from "
                       f"{folder / 'config.yaml'}; the folder was edited by hand")


class Heartbeat:
    """The guest's clock, written every 2.56 guest seconds while runs execute, so
    the host can tell a slow run (its clock moves) from a frozen guest (it does not).
    A daemon thread that sleeps: in virtual time, sleeping is what moves the clock. It
    wakes on multiples of HEARTBEAT_NS, a divisor of the grid every run's traffic starts
    on (traffic/clockgrid.py), so at the same distances from every run's start."""

    HEARTBEAT_NS = clockgrid.GRID_NS // 2

    def __init__(self, path: Path | None) -> None:
        self.path, self.run_id = path, ""
        if path is not None:
            threading.Thread(target=self._beat, daemon=True, name="heartbeat").start()

    def _beat(self) -> None:
        assert self.path is not None
        with clockgrid.exact_timers():
            while True:
                write_json_atomic(self.path, {"guest_s": round(time.monotonic(), 3),
                                              "run_id": self.run_id})
                clockgrid.sleep_until_ns(clockgrid.next_point(time.monotonic_ns(),
                                                              self.HEARTBEAT_NS))


def main(argv: list[str] | None = None) -> int:
    """Planned runs of a results folder, in order. Exit 0 when all are complete, 1 when
    some failed, 2 when the folder or a run id is wrong, 130 on Ctrl-C."""
    ap = argparse.ArgumentParser(prog="python -m pathdiv.experiments.execute.guest_runs")
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("execute", help="execute planned runs of a results folder")
    e.add_argument("--progress", type=Path, default=None,
                   help="JSON file kept up to date with the current run and round")
    e.add_argument("folder", type=Path)
    e.add_argument("run_ids", nargs="+", metavar="RUN_ID")
    args = ap.parse_args(argv)
    try:
        found = [find_run(args.folder, run_id)[1] for run_id in args.run_ids]
    except (ResultsError, ValueError) as exc:
        print(f"runner: {exc}", file=sys.stderr)
        return 2
    failed = 0
    keeper = NetworkKeeper()  # consecutive runs share a network (execute.keeper)
    beat = Heartbeat(heartbeat_path(args.progress) if args.progress is not None else None)
    for index, run in enumerate(found):
        beat.run_id = run.run_id
        keeper.runs_after = len(found) - index - 1
        run_dir = args.folder / "runs" / run.run_id
        if run_dir.exists():
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True)

        def on_round(n: int, total: int, run_id: str = run.run_id) -> None:
            if args.progress is not None:
                write_json_atomic(args.progress, {"run_id": run_id, "round": n,
                                                  "rounds": total})

        on_round(0, 0)
        try:
            manifest = execute_attempts(run, run_dir, on_round,
                                        lambda text: print(text, flush=True), keeper)
        except KeyboardInterrupt:
            keeper.close()
            return 130
        print(run_line(run, manifest), flush=True)
        failed += manifest["status"] != "complete"
    keeper.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
