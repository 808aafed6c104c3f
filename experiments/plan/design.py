"""How many observations each cell of a plan yields, against what the MANOVA needs (pure).

An observation is one transfer group (a row of metrics.csv); a cell is one combination
of factor levels within one test cluster (here: one flow type). A two-way MANOVA per
cluster needs more observations in every cell than dependent variables + 1, or its
error covariance matrix is singular and the test is skipped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pathdiv.experiments.config.workloads import open_loop
from pathdiv.experiments.plan.designations import rounds
from pathdiv.experiments.plan.runs import Run


def groups_per_run(run: Run) -> int:
    """Transfer groups (metrics.csv rows) one run produces."""
    w = run.config.data["workload"]
    plan = rounds(str(w["pattern"]), run.config.topology().hosts, run.workload_seed,
                  int(w["iterations"]), int(w["requests"]))
    return sum(len(rnd) for rnd in plan)


def observations_per_cell(runs: Iterable[Run]) -> dict[tuple[str, ...], int]:
    """(flow type, *factor levels) -> observations the plan yields for that cell (none for
    open-loop runs, whose arrivals are only known when they run)."""
    cells: Counter[tuple[str, ...]] = Counter()
    for run in runs:
        if open_loop(run.config.data["workload"]["pattern"]):
            continue  # its observations are arrivals, drawn at run time
        cells[(run.flow_type, *run.factors.values())] += groups_per_run(run)
    return dict(cells)


def design_problems(runs: list[Run]) -> list[str]:
    """A line when some cell has too few observations for the MANOVA (empty when fine)."""
    if not runs or not runs[0].factors:
        return []
    dvs = list(runs[0].config.data["analysis"]["dvs"])
    cells = observations_per_cell(runs)
    if not cells:
        return []
    fewest = min(cells.values())
    if fewest > len(dvs) + 1:
        return []
    worst = [" / ".join(k) for k, n in cells.items() if n == fewest]
    return [f"{len(worst)} cell(s) (e.g. {worst[0]}) get only {fewest} observation(s); the "
            f"MANOVA of {len(dvs)} dependent variables needs more than {len(dvs) + 1} per "
            "cell: raise repetitions (or workload.iterations / requests)"]
