"""Power before the runs, for `pathdiv check`: the plan's cells against recorded runs.

Where the spreads come from, first found wins:

1. `--pilot DIR`: a results folder of this config (e.g. `pathdiv run CONFIG --reps 2
   --out DIR` as a pilot);
2. this machine's last run of the config (`results/<name>-*/metrics.csv`, newest);
3. the committed reproduction of the config (`docs/reproduction/<name>/metrics.csv`), or
   its parts (`docs/reproduction/<name>-*/`, pooled: the study's design was run in
   query/short and long parts, and with a second seed);
4. runs of the same design under another name: this machine's newest results folder
   whose config.yaml is the config's but for `NOT_DESIGN` (its name, seed and
   repetitions, and the analysis section, read only after the runs), else every such
   committed reproduction folder, pooled (a design run at a second seed under a name of
   its own). The check names the folders it used.

The statistics are pathdiv.analysis.stats.plan_power, loaded when `check` asks (the
command line starts without the statistics stack). A metrics.csv is read only when it
is a regular file (not a link) under `MAX_BYTES`.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pathdiv.analysis.safe_yaml import YamlRefused, load_text
from pathdiv.experiments.config.load import ConfigError, read_config_text, validate
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


# Top-level keys that name a config, size its plan or are read only after the runs: two
# configs equal but for these plan runs of one design (settings, workload, factors),
# whose observations have the same spreads.
NOT_DESIGN = ("name", "seed", "repetitions", "analysis")


def design_of(data: Mapping[str, Any]) -> dict[str, Any]:
    """A resolved config without its `NOT_DESIGN` keys."""
    return {k: v for k, v in data.items() if k not in NOT_DESIGN}


def _design_at(folder: Path) -> dict[str, Any] | None:
    """The design of the config a results folder recorded (config.yaml, resolved as
    `pathdiv check` resolves one); None when it has none that validates."""
    path = folder / "config.yaml"
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        return design_of(validate(load_text(read_config_text(path)), str(path)).data)
    except (OSError, ConfigError, YamlRefused, ValueError, TypeError, RecursionError):
        return None


def same_design(design: Mapping[str, Any], root: Path) -> list[Path]:
    """metrics.csv of the folders under `root` that recorded runs of `design`."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("*/metrics.csv")
                  if _readable(p) and _design_at(p.parent) == design)


def sources(name: str, pilot: Path | None = None, results: Path = Path("results"),
            reproduction: Path = REPO / "docs" / "reproduction",
            design: Mapping[str, Any] | None = None) -> list[Path]:
    """The metrics.csv files whose observations give the spreads (module docstring);
    `design` (design_of the config) finds runs of it under other names."""
    if pilot is not None:
        return [pilot / "metrics.csv"] if _readable(pilot / "metrics.csv") else []
    mine = [p for p in results.glob(f"{name}-*/metrics.csv") if _readable(p)]
    if mine:
        return [max(mine, key=lambda p: p.stat().st_mtime)]
    own = reproduction / name / "metrics.csv"
    if _readable(own):
        return [own]
    parts = sorted(p for p in reproduction.glob(f"{name}-*/metrics.csv") if _readable(p))
    if parts or design is None:
        return parts
    alike = same_design(design, results)
    if alike:
        return [max(alike, key=lambda p: p.stat().st_mtime)]
    return same_design(design, reproduction)


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


def lines(runs: list[Run], pilot: Path | None = None,
          config: Mapping[str, Any] | None = None) -> list[str]:
    """`pathdiv check`'s power lines for the plan `runs` of the resolved config `config`
    (its data before the factors' levels apply; without it runs are found by name only);
    empty without factors."""
    if not runs or not runs[0].factors:
        return []
    from pathdiv.analysis.stats import plan_power

    data = runs[0].config.data
    analysis = data["analysis"]
    design = design_of(config) if config is not None else None
    found = sources(str(data["name"]), pilot, design=design)
    if not found:
        where = f"{pilot}/metrics.csv" if pilot else (
            f"results/{data['name']}-*/ or docs/reproduction/{data['name']}/"
            + (", nor of its design under another name" if design is not None else ""))
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
    if pilot is None and all(p.parent.name != data["name"]
                             and not p.parent.name.startswith(f"{data['name']}-")
                             for p in found):
        source += (", runs of the same design under another name (configs equal but for "
                   + ", ".join(NOT_DESIGN) + ")")
    reps = data["repetitions"]
    planned = (", ".join(f"{f} {n}" for f, n in reps.items()) if isinstance(reps, dict)
               else str(reps))
    return plan_power.text(table, source, float(analysis["alpha"]),
                           float(analysis["min_effect_pct"]), planned)
