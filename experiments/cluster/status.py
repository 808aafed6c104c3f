"""What `pathdiv status DIR` reports: every planned run's state, per shard and overall.

A run is
  complete / failed / skipped  its manifest says so (final; written last by the run),
  running                      a live process marked it (experiments.cluster.tracking),
                               or a process on another host did (not checkable here),
  pending                      anything else: not started, or started by a process that
                               is gone (its partial folder is redone on resume).

`classify` and the formatting are pure; `folder_status` reads the folder.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pathdiv.analysis.readers import RUN_ID
from pathdiv.analysis.safefiles import printable
from pathdiv.experiments.cluster.planfile import read_plan
from pathdiv.experiments.cluster.tracking import (
    PROGRESS_DIR,
    RUNNING_DIR,
    process_alive,
)
from pathdiv.experiments.execute.runstate import run_state
from pathdiv.experiments.manifest import read_json_dict

STATES = ("complete", "failed", "skipped", "running", "pending")
FINAL = ("complete", "failed", "skipped")


@dataclass
class RunStatus:
    run_id: str
    shard: int | None
    state: str
    note: str = ""
    flow_type: str = ""
    wall_s: float | None = None  # the host's wall time of a finished run (plan.json)


@dataclass
class FolderStatus:
    folder: str
    shards: int | None
    runs: list[RunStatus] = field(default_factory=list)
    progress: dict[str, dict[str, Any]] = field(default_factory=dict)  # "I/N" -> file

    def counts(self, shard: int | None = None, all_shards: bool = True) -> dict[str, int]:
        out = dict.fromkeys(STATES, 0)
        for r in self.runs:
            if all_shards or r.shard == shard:
                out[r.state] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        by_shard = {}
        if self.shards:
            by_shard = {f"{i}/{self.shards}": self.counts(i, all_shards=False)
                        for i in range(self.shards)}
        return {"folder": self.folder, "shards": self.shards, "counts": self.counts(),
                "by_shard": by_shard, "progress": self.progress,
                "runs": [asdict(r) for r in self.runs]}

    def summary(self) -> str:
        """A few lines for people."""
        counts = self.counts()
        said = ", ".join(f"{counts[s]} {s}" for s in STATES if counts[s]) or "nothing"
        spread = f" in {self.shards} shards" if self.shards else ""
        lines = [f"{self.folder}: {len(self.runs)} run(s){spread}: {said}"]
        if self.shards:
            head = ["shard", "runs", *STATES, "last seen"]
            rows = []
            for i in range(self.shards):
                name = f"{i}/{self.shards}"
                c = self.counts(i, all_shards=False)
                rows.append([name, str(sum(c.values())), *(str(c[s]) for s in STATES),
                             _seen(self.progress.get(name))])
            widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
            fmt = "  ".join(f"{{:<{w}}}" for w in widths)
            lines += [fmt.format(*head).rstrip(), *(fmt.format(*r).rstrip() for r in rows)]
        for state in ("running", "failed", "pending"):
            shown = [r for r in self.runs if r.state == state and (r.note or state != "pending")]
            if shown:
                lines.append(f"{state}:")
                lines += [f"  {r.run_id}{_where(r, self.shards)}"
                          + (f": {r.note}" if r.note else "") for r in shown]
        pace = wall_pace(self.runs, self.shards)
        if pace:
            lines.append(pace)
        if counts["complete"] == len(self.runs) and self.runs:
            lines.append(f"every run is complete: `pathdiv analyze {self.folder}` makes the "
                         "report")
        return "\n".join(lines)


def _where(r: RunStatus, shards: int | None) -> str:
    return f" (shard {r.shard}/{shards})" if shards and r.shard is not None else ""


def _seen(doc: dict[str, Any] | None) -> str:
    if not doc:
        return "not started"
    return f"{doc.get('state', '?')} on {doc.get('host', '?')} (pid {doc.get('pid', '?')}) " \
           f"at {doc.get('updated', '?')}"


# ---- pure ------------------------------------------------------------------------------
def classify(run_state: str, marker: dict[str, Any] | None,
             alive: Callable[[dict[str, Any]], bool | None]) -> tuple[str, str]:
    """(state, note) of one run from its folder's state (execute/runstate.py `run_state`)
    and its running marker, if any; `alive(marker)` is True, False or None (unknown)."""
    if run_state in FINAL:
        return run_state, ""
    if marker is not None:
        where = f"{marker.get('host', '?')}, pid {marker.get('pid', '?')}"
        since = f" since {marker['run_started']}" if marker.get("run_started") else ""
        live = alive(marker)
        if live:
            return "running", f"on {where}{since}"
        if live is None:
            return "running", f"on {where}{since} (another host: not checked from here)"
        return "pending", f"interrupted: {where} is gone; resuming the shard redoes it"
    if run_state == "partial":
        return "pending", "partial folder of an interrupted run; resuming redoes it"
    return "pending", ""


def wall_pace(runs: list[RunStatus], shards: int | None) -> str:
    """The wall time the complete runs took and, at their pace (mean per flow type), what
    the rest will take; shards run at once, so the slowest shard's rest is the folder's.
    '' before any run has a wall time."""
    timed = [r for r in runs if r.state == "complete" and r.wall_s is not None]
    if not timed:
        return ""
    by_type: dict[str, list[float]] = {}
    for r in timed:
        by_type.setdefault(r.flow_type, []).append(float(r.wall_s or 0.0))
    mean = {t: sum(v) / len(v) for t, v in by_type.items()}
    rest = [r for r in runs if r.state in ("running", "pending")]
    unknown = sorted({r.flow_type for r in rest if r.flow_type not in mean})
    paces = ", ".join(f"{t} {m:.0f} s" for t, m in sorted(mean.items()))
    text = (f"wall time: {sum(float(r.wall_s or 0.0) for r in timed) / 60:.1f} min for "
            f"{len(timed)} complete run(s) (mean per run: {paces})")
    if not rest:
        return text
    if unknown:
        return text + f"; no pace yet for {', '.join(unknown)}, so no estimate of the rest"
    left: dict[int | None, float] = {}
    for r in rest:
        key = r.shard if shards else None
        left[key] = left.get(key, 0.0) + mean[r.flow_type]
    spread = f" (the slowest of {len(left)} shards)" if shards and len(left) > 1 else ""
    return text + (f"; about {max(left.values()) / 60:.0f} min to go at that pace"
                   f"{spread}")


# ---- side effects ----------------------------------------------------------------------


def folder_status(folder: Path, host: str | None = None) -> FolderStatus:
    """The status of every run planned in `folder` (raises ValueError when it has no plan)."""

    plan = read_plan(folder)
    if plan is None or not isinstance(plan.get("runs"), list):
        raise ValueError(f"{folder} has no readable plan.json; is it a results folder "
                         "written by `pathdiv run` (or `pathdiv slurm`)?")
    here = host or socket.gethostname()
    shards = (plan.get("options") or {}).get("shards")
    status = FolderStatus(str(folder), int(shards) if shards else None)
    for entry in plan["runs"]:
        if not isinstance(entry, dict):
            continue
        run_id = str(entry.get("run_id"))
        if not RUN_ID.fullmatch(run_id):  # plan.json is the folder owner's to edit
            status.runs.append(RunStatus(printable(run_id[:80]), None, "failed",
                                         "not a run id; skipped", "", None))
            continue
        marker = read_json_dict(folder / RUNNING_DIR / f"{run_id}.json")
        state, note = classify(run_state(folder / "runs" / run_id), marker,
                               lambda m: process_alive(m, here))
        if state == "failed":
            manifest = read_json_dict(folder / "runs" / run_id / "manifest.json") or {}
            note = printable(str(manifest.get("error", ""))[:300])  # a guest wrote it
        shard = entry.get("shard")
        wall = entry.get("wall_s")
        status.runs.append(RunStatus(run_id, shard if isinstance(shard, int) else None,
                                     state, note, printable(str(entry.get("flow_type", ""))),
                                     float(wall) if isinstance(wall, int | float) else None))
    for path in sorted((folder / PROGRESS_DIR).glob("shard-*.json")):
        doc = read_json_dict(path)
        if doc and "shard" in doc:
            if doc.get("state") == "running" and process_alive(doc, here) is False:
                doc["state"] = "killed"  # its process is gone without saying so
            status.progress[str(doc["shard"])] = doc
    return status
