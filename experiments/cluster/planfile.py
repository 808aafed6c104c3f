"""plan.json written by several shards into one results folder.

Every shard knows the whole plan, so each writes every run into plan.json; what differs
is whose status it knows. A shard rewrites plan.json under an exclusive lock on
`plan.json.lock` (POSIX record locks, which NFS supports through its lock manager): it
reads the file as it is now, keeps every other shard's statuses, sets its own and
replaces the file atomically. Readers need no lock: the file is always whole.

Pure parts (`merged_statuses`, `annotate_shards`, `options_conflict`) come first.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pathdiv.analysis.safefiles as safefiles
from pathdiv.experiments.cluster.shards import shard_of
from pathdiv.experiments.config.load import Config
from pathdiv.experiments.manifest import read_json_dict, write_json_atomic
from pathdiv.experiments.plan.runs import Run

PLAN_FILE = "plan.json"
PLAN_OPTIONS = ("reps", "only", "quick", "set", "shards")


# ---- pure ------------------------------------------------------------------------------
def merged_statuses(previous: dict[str, Any] | None, mine: set[str],
                    statuses: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Statuses to write: this writer's for its runs (`mine`), the file's for the others
    (status, reason and, once finished, the run's wall time `wall_s`)."""
    out: dict[str, dict[str, Any]] = {}
    for entry in (previous or {}).get("runs", []):
        run_id = entry.get("run_id")
        if run_id not in mine and "status" in entry:
            out[run_id] = {"status": entry["status"], "reason": entry.get("reason", "")}
            if "wall_s" in entry:
                out[run_id]["wall_s"] = entry["wall_s"]
    out.update({k: v for k, v in statuses.items() if k in mine})
    return out


def annotate_shards(doc: dict[str, Any], shard_index: dict[str, int]) -> dict[str, Any]:
    """Every entry gets `shard` (its index) when the plan is sharded."""
    if shard_index:
        for entry in doc["runs"]:
            if entry["run_id"] in shard_index:
                entry["shard"] = shard_index[entry["run_id"]]
    return doc


def options_conflict(previous: dict[str, Any] | None, options: dict[str, Any]) -> str:
    """'' or why `options` cannot write into a folder whose plan.json has `previous`.

    Shards of one folder must expand the same plan (same --reps/--only/--quick/--set and
    the same N), or their partitions would overlap or leave runs out.
    """
    old = (previous or {}).get("options") or {}
    if "shards" not in old or "shards" not in options:
        return ""
    differ = [k for k in PLAN_OPTIONS if old.get(k) != options.get(k)]
    if not differ:
        return ""
    said = "; ".join(f"{k}: {old.get(k)!r} there, {options.get(k)!r} here" for k in differ)
    return (f"its plan.json was written by shards of another plan ({said}); every shard of "
            f"a folder needs the same N and the same --reps/--only/--quick/--set: use "
            f"--shard I/{old['shards']} with the options it records, or another --out folder")


# ---- side effects ----------------------------------------------------------------------
def read_plan(folder: Path) -> dict[str, Any] | None:
    """plan.json as a dict; None when missing or not a bounded regular file (no link
    followed: experiments/manifest.py `read_json_dict`)."""
    return read_json_dict(folder / PLAN_FILE)


def open_lock(folder: Path, name: str) -> int:
    """A descriptor of the lock file `name` in `folder`, made when missing: the folder
    reached through no link, the file opened with O_NOFOLLOW (a link planted at the
    name, even a dangling one, is refused rather than followed or created through) and
    refused unless it is a regular file."""
    dir_fd = safefiles.open_dir(os.path.abspath(folder))
    try:
        fd = safefiles.open_beneath(dir_fd, name, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK,
                                    0o644)
    finally:
        os.close(dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise safefiles.FileRefused(f"{folder / name} is not a regular file; pathdiv "
                                    "locks the folder with a file of its own: remove it")
    return fd


@contextlib.contextmanager
def plan_lock(folder: Path) -> Iterator[None]:
    """Hold the folder's plan.json lock (blocks until the other writer is done)."""
    fd = open_lock(folder, f"{PLAN_FILE}.lock")
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def update_plan(folder: Path,
                build: Callable[[dict[str, Any] | None], dict[str, Any]]) -> None:
    """plan.json := build(plan.json as it is now), under the lock, atomically."""
    with plan_lock(folder):
        write_json_atomic(folder / PLAN_FILE, build(read_plan(folder)))


def register_plan(folder: Path, cfg: Config, runs: list[Run], options: dict[str, Any]) -> None:
    """Write the whole sharded plan into plan.json, keeping every status already there.

    Under the lock, so of two shards of different plans starting at once, the second is
    refused (ValueError naming the difference) before it runs anything.
    """

    index = shard_of(runs, int(options["shards"]))

    def build(previous: dict[str, Any] | None) -> dict[str, Any]:
        conflict = options_conflict(previous, options)
        if conflict:
            raise ValueError(f"{folder}: {conflict}")
        return annotate_shards(plan_document(cfg, runs, merged_statuses(previous, set(), {}),
                                             previous, options), index)

    update_plan(folder, build)


def plan_document(cfg: Config, runs: list[Run], statuses: dict[str, dict[str, Any]],
                  previous: dict[str, Any] | None, options: dict[str, Any]) -> dict[str, Any]:
    """plan.json: every run of this and earlier invocations, with status and reason, and
    each finished run's wall time on the host (`wall_s`, kept when a resume finds the run
    complete)."""
    entries: dict[str, dict[str, Any]] = {}
    for entry in (previous or {}).get("runs", []):
        entries[entry["run_id"]] = entry
    for run in runs:
        old = entries.get(run.run_id, {})
        entry = {**run.to_dict(), "host_kernel": run.config.host_kernel,
                 "status": "pending", "reason": ""}
        entry.update(statuses.get(run.run_id, {}))
        if "wall_s" not in entry and "wall_s" in old and old.get("status") == entry["status"]:
            entry["wall_s"] = old["wall_s"]
        entries[run.run_id] = entry
    return {"name": cfg.name, "source": cfg.source, "options": options,
            "runs": sorted(entries.values(), key=lambda e: (e["repetition"], e["order"]))}
