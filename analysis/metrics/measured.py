"""Which analysis measured which run: `measured.json` beside metrics.csv.

A run's metrics.csv rows are measured from its captures. Captures are large, and a
researcher may delete a run's once its rows are in, then add runs to the folder later. A
full analysis measures again every run that has its captures and keeps the recorded rows
of a run whose captures are gone (analysis/metrics/table.py `compute_metrics`): only when
they came from the same analysis and the same run as now, which this record says. For
each run of metrics.csv it holds

- `analysis`: `analysis_id()`, a SHA-256 of the code that measures (the capture reader,
  the metrics, the topology the packets are matched on) and of the names of the metrics
  registered in this process: any change of that code is another analysis;
- `run`: `run_digest(manifest)`, a SHA-256 of what measuring takes from the run's
  manifest (its config, factors, seed, clock, fidelity verdict and figures): a run done
  again under the same id is another run.

Rows without such a record (measured before pathdiv wrote one) are not kept: nothing says
which analysis measured them.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import pathdiv.analysis.readers as readers
from pathdiv.analysis.metrics.registry import METRICS

MEASURED_FILE = "measured.json"
# What measuring reads, relative to the package's top (pathdiv/): the code whose change
# changes a row
MEASURING_CODE = ("analysis/capture", "analysis/metrics", "analysis/readers.py", "topologies")
# What measuring takes from a run's manifest (table.py `_lead`, `group_metrics`)
MANIFEST_KEYS = ("run_id", "config", "factors", "seed", "repetition", "clock", "fidelity")


@functools.cache
def code_digest() -> str:
    """SHA-256 of the measuring code's files (this package's own, read once)."""
    top = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for part in MEASURING_CODE:
        where = top / part
        files = sorted(where.rglob("*.py")) if where.is_dir() else [where]
        for path in files:
            h.update(path.relative_to(top).as_posix().encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


def analysis_id() -> str:
    """The measuring analysis: its code and the metrics registered in this process."""
    registered = sorted((m.name, m.per, m.fold) for m in METRICS.values())
    return hashlib.sha256((code_digest() + json.dumps(registered)).encode()).hexdigest()


def run_digest(manifest: dict[str, Any]) -> str:
    """SHA-256 of what measuring takes from a run's manifest."""
    taken = {k: manifest.get(k) for k in MANIFEST_KEYS}
    return hashlib.sha256(json.dumps(taken, sort_keys=True, default=str).encode()).hexdigest()


def record(manifest: dict[str, Any]) -> dict[str, str]:
    """The record of a run measured now."""
    return {"analysis": analysis_id(), "run": run_digest(manifest)}


def read_measured(folder: Path, notes: list[str] | None = None) -> dict[str, dict[str, str]]:
    """run_id -> record of the folder's measured.json; empty when there is none (or,
    with `notes`, it cannot be read: said there)."""
    doc = readers.read_record(Path(folder) / MEASURED_FILE, notes)
    runs = doc.get("runs") if isinstance(doc, dict) else None
    if not isinstance(runs, dict):
        return {}
    return {str(k): v for k, v in runs.items()
            if isinstance(v, dict) and all(isinstance(v.get(f), str)
                                           for f in ("analysis", "run"))}


def measured_json(runs: dict[str, dict[str, str]]) -> str:
    return json.dumps({"runs": dict(sorted(runs.items()))}, indent=1) + "\n"


def why_not_kept(run_id: str, recorded: dict[str, str] | None,
                 manifest: dict[str, Any]) -> str | None:
    """Why the recorded rows of `run_id` (its captures gone) cannot stand beside rows
    measured now; None when they can."""
    if recorded is None:
        return (f"no record of the analysis that measured run {run_id} ({MEASURED_FILE} "
                "has none: measured before pathdiv recorded it)")
    if recorded["analysis"] != analysis_id():
        return (f"run {run_id} was measured by another analysis (measuring code or "
                f"registered metrics {recorded['analysis'][:12]}, now {analysis_id()[:12]})")
    if recorded["run"] != run_digest(manifest):
        return (f"run {run_id}'s manifest changed since it was measured (run done again, "
                "or its config or fidelity edited)")
    return None
