"""The estimate against recorded plans: calibrated on one reference reproduction's wall
times, how close it comes to the next (no emulation, reads docs/reproduction/*/plan.json).

    python benchmarks/eta_history.py

Each line takes the host wall times (`wall_s`) of one recorded plan as this machine's
history, calibrates the estimate on them (experiments/plan/estimate.py) and compares its
prediction for another plan's runs with the sum of their recorded wall times; the
default costs' prediction beside. The reproductions ran two lab kernels at once on the
2-core reference VM, the study001 ones two days later under a heavier shared load.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pathdiv.experiments.config.load import load
from pathdiv.experiments.plan import history
from pathdiv.experiments.plan.estimate import Estimator, calibrate, expected_run_s
from pathdiv.experiments.plan.runs import Run, expand

REPO = Path(__file__).resolve().parents[1]
PAIRS = [("silent", "noisy"), ("noisy", "silent"), ("noisy", "study001-noisy-qs"),
         ("study001-silent-qs", "study001-noisy-qs"),
         ("study001-noisy-qs", "study001-control-noisy-qs")]


def recorded(name: str) -> list[tuple[Run, float]]:
    folder = REPO / "docs" / "reproduction" / name
    cfg = load(folder / "config.yaml")
    plan = json.loads((folder / "plan.json").read_text())
    runs = {r.run_id: r for r in expand(cfg, repetitions=max(
        e["repetition"] for e in plan["runs"]))}
    return [(runs[e["run_id"]], float(e["wall_s"])) for e in plan["runs"]
            if e.get("wall_s") and e["run_id"] in runs]


def main() -> int:
    print("| history | plan | runs | actual min | calibrated min | error | default min | "
          "error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for train, test in PAIRS:
        recs = [history.record(r, w, "kernel", 2, None, host="ref")
                for r, w in recorded(train)]
        est = Estimator(calibrate(recs))
        runs = recorded(test)
        actual = sum(w for _, w in runs)
        pred = sum(est.run_s(r) for r, _ in runs)
        default = sum(expected_run_s(r) for r, _ in runs)
        print(f"| {train} | {test} | {len(runs)} | {actual / 60:.1f} | {pred / 60:.1f} | "
              f"{pred / actual - 1:+.0%} | {default / 60:.1f} | {default / actual - 1:+.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
