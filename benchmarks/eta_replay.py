"""The ETA at 0 runs against every plan this machine has run: the history replayed.

    python benchmarks/eta_replay.py [--min-runs 10] [--history FILE]

Reads this machine's run history (experiments/plan/history.py; PATHDIV_HISTORY or the
cache's runs.jsonl), cuts it into plans (consecutive runs of one config, code revision,
kernel x clock x plane and number of lab kernels, less than 10 minutes apart) and, for
each plan of at least --min-runs runs, estimates every run from the records written
before the plan's first run began, as `pathdiv check` would have at that moment. It
prints the plan's recorded wall time (the sum of its runs' `wall_s`; lanes at once divide
actual and estimate alike) against two estimates: calibrated per kernel x clock x plane
on its newest runs alone (before), and with a config's own runs where it has enough
among them (after: `Estimator.from_records`). No emulation; root not needed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from pathdiv.experiments.plan import history
from pathdiv.experiments.plan.estimate import Estimator, calibrate, record_key

GAP_S = 600.0
GOAL = 0.25


def plans(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Consecutive runs of one config, revision, key and jobs, under GAP_S apart."""
    def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
        return (a.get("config"), a.get("jobs"), a.get("git"), record_key(a)) == \
            (b.get("config"), b.get("jobs"), b.get("git"), record_key(b))
    out: list[list[dict[str, Any]]] = []
    for rec in records:
        if out and same(out[-1][-1], rec) and rec["_t"] - out[-1][-1]["_t"] < GAP_S:
            out[-1].append(rec)
        else:
            out.append([rec])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--min-runs", type=int, default=10)
    ap.add_argument("--history", type=Path, default=None)
    args = ap.parse_args()
    records = [r for r in history.read(args.history)
               if r.get("t") and isinstance(r.get("wall_s"), (int, float))]
    for rec in records:
        rec["_t"] = datetime.fromisoformat(rec["t"]).timestamp()
    records.sort(key=lambda r: r["_t"])
    print(f"history: {args.history or history.history_file()}, {len(records)} runs")
    print("| config | kernel/clock/plane | lab kernels | runs | recorded min | before | "
          "error | after | error |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    errors: dict[str, list[float]] = {"before": [], "after": []}
    for plan in plans(records):
        start = plan[0]["_t"] - float(plan[0]["wall_s"])
        known = [r for r in records if r["_t"] < start]
        if len(plan) < args.min_runs or not known:
            continue
        actual = sum(float(r["wall_s"]) for r in plan)
        row = []
        for name, est in (("before", Estimator(calibrate(known))),
                          ("after", Estimator.from_records(known))):
            guess = sum(est.record_s(r) or 0.0 for r in plan)
            errors[name].append(guess / actual - 1)
            row += [f"{guess / 60:.1f}", f"{guess / actual - 1:+.0%}"]
        key = record_key(plan[0]) or ("?", "?", "?")
        print(f"| {plan[0].get('config')} | {'/'.join(key)} | {plan[0].get('jobs')} | "
              f"{len(plan)} | {actual / 60:.1f} | {' | '.join(row)} |")
    for name, errs in errors.items():
        if errs:
            within = sum(abs(e) <= GOAL for e in errs)
            print(f"{name}: median |error| {statistics.median(abs(e) for e in errs):.0%}, "
                  f"{within} of {len(errs)} plans within ±{GOAL:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
