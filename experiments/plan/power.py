"""Power before the runs, for `pathdiv check`: the plan's cells against recorded runs.

Where the spreads come from, first found wins:

1. `--pilot DIR`: a results folder of this config (e.g. `pathdiv run CONFIG --reps 2
   --out DIR` as a pilot);
2. this machine's last run of the config (`results/<name>-*/metrics.csv`, newest);
3. the committed reproduction of the config (`docs/reproduction/<name>/metrics.csv`), or
   its parts (`docs/reproduction/<name>-*/`, pooled: the study's design was run in
   query/short and long parts, and with a second seed).

The statistics are pathdiv.analysis.stats.plan_power, loaded when `check` asks (the
command line starts without the statistics stack). A metrics.csv is read only when it
is a regular file (not a link) under `MAX_BYTES`.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from pathlib import Path

from pathdiv.experiments.config.workloads import open_loop
from pathdiv.experiments.plan.design import groups_per_run, observations_per_cell
from pathdiv.experiments.plan.runs import Run

REPO = Path(__file__).resolve().parents[2]
MAX_BYTES = 64 * 1024 * 1024


def _readable(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size <= MAX_BYTES


def sources(name: str, pilot: Path | None = None, results: Path = Path("results"),
            reproduction: Path = REPO / "docs" / "reproduction") -> list[Path]:
    """The metrics.csv files whose observations give the spreads (module docstring)."""
    if pilot is not None:
        return [pilot / "metrics.csv"] if _readable(pilot / "metrics.csv") else []
    mine = [p for p in results.glob(f"{name}-*/metrics.csv") if _readable(p)]
    if mine:
        return [max(mine, key=lambda p: p.stat().st_mtime)]
    own = reproduction / name / "metrics.csv"
    if _readable(own):
        return [own]
    return sorted(p for p in reproduction.glob(f"{name}-*/metrics.csv") if _readable(p))


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        return f.read(MAX_BYTES + 1)[:MAX_BYTES]


def _per_repetition(runs: list[Run]) -> dict[tuple[str, ...], float]:
    """Observations one repetition gives each cell."""
    reps: Counter[tuple[str, ...]] = Counter()
    obs: Counter[tuple[str, ...]] = Counter()
    for run in runs:
        if open_loop(run.config.data["workload"]["pattern"]):
            continue
        key = (run.flow_type, *run.factors.values())
        obs[key] += groups_per_run(run)
        reps[key] += 1
    return {k: obs[k] / reps[k] for k in obs}


def _in_config_order(runs: list[Run], cells: dict[tuple[str, ...], int]
                     ) -> dict[tuple[str, ...], int]:
    """`cells` ordered as the config lists flow types and factor levels."""
    data = runs[0].config.data
    rank = {("flow_type", f): i for i, f in enumerate(data["workload"]["flow_types"])}
    for factor, levels in data["factors"].items():
        rank.update({(factor, lv): i for i, lv in enumerate(levels)})
    names = ["flow_type", *runs[0].factors]

    def order(cell: tuple[str, ...]) -> tuple[int, ...]:
        return tuple(rank.get((n, v), 0) for n, v in zip(names, cell, strict=True))

    return {k: cells[k] for k in sorted(cells, key=order)}


def lines(runs: list[Run], pilot: Path | None = None) -> list[str]:
    """`pathdiv check`'s power lines for the plan `runs` (empty without factors)."""
    if not runs or not runs[0].factors:
        return []
    from pathdiv.analysis.stats import plan_power

    data = runs[0].config.data
    analysis = data["analysis"]
    found = sources(str(data["name"]), pilot)
    if not found:
        where = f"{pilot}/metrics.csv" if pilot else (
            f"results/{data['name']}-*/ or docs/reproduction/{data['name']}/")
        return [f"power: no recorded runs of this config ({where}): run a pilot, e.g. "
                f"`pathdiv run CONFIG --reps 2 --out results/pilot`, then `pathdiv check "
                "CONFIG --pilot results/pilot`"]
    recorded = plan_power.read_csvs([_read(p) for p in found])
    columns = ["flow_type", *runs[0].factors]
    table = plan_power.cell_power(recorded, _in_config_order(runs, observations_per_cell(runs)),
                                  _per_repetition(runs), columns, list(analysis["dvs"]),
                                  float(analysis["alpha"]),
                                  float(analysis["min_effect_pct"]))
    shown = [str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p) for p in found]
    source = f"spreads of {len(recorded)} recorded observations in {', '.join(shown)}"
    reps = data["repetitions"]
    planned = (", ".join(f"{f} {n}" for f, n in reps.items()) if isinstance(reps, dict)
               else str(reps))
    return plan_power.text(table, source, float(analysis["alpha"]),
                           float(analysis["min_effect_pct"]), planned)
