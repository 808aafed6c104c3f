"""The state of one run's folder: its manifest's status, and the manifests of runs that
did not finish (failed, skipped); an earlier attempt set aside before a run is redone;
the error of a results folder that cannot take a plan. Shared by the runner and the
lab-kernel runs.

A run's manifest is written last, after its captures are synced (`finish_manifest`): a
machine that loses power keeps either no manifest or one whose captures are on disk.
Redoing a failed or cut-off run first moves its folder to earlier/<run_id>/<n>/ (the
evidence of why it failed; the last KEEP_EARLIER per run), through folder descriptors."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pathdiv.analysis.safefiles as safefiles
from pathdiv.experiments.fabric.environment import running_kernel_release
from pathdiv.experiments.manifest import git_revision, read_json_dict, write_json_atomic
from pathdiv.experiments.plan.runs import Run

STATUSES = ("complete", "failed", "skipped")
EARLIER_DIR = "earlier"  # earlier/<run_id>/<n>/: attempts set aside before a redo
KEEP_EARLIER = 3  # per run; older ones are removed (captures may be large)


class ResultsError(ValueError):
    """A results folder that cannot take this plan (another experiment's, unreadable)."""


def run_state(run_dir: Path) -> str:
    """'absent', 'partial' (anything without a readable final manifest) or its status."""
    if not run_dir.exists():
        return "absent"
    manifest = read_json_dict(run_dir / "manifest.json")  # bounded, no link followed
    status = manifest.get("status") if manifest is not None else None
    return status if status in STATUSES else "partial"


def set_aside(folder: Path, run_id: str) -> Path | None:
    """Clear runs/<run_id>/ of `folder` before the run is redone: a failed or cut-off
    attempt moves to earlier/<run_id>/<n>/ (n counts up; the last KEEP_EARLIER are
    kept), a skipped one (a reason only) is removed, anything but a folder there (a link,
    a file) is unlinked, never followed. Returns where the attempt went, or None."""
    top = safefiles.open_dir(safefiles.resolve_physical(folder))
    try:
        try:
            runs = safefiles.open_subdir(top, "runs")
        except FileNotFoundError:
            return None
        try:
            return _set_aside(folder, top, runs, run_id)
        finally:
            os.close(runs)
    finally:
        os.close(top)


def _set_aside(folder: Path, top: int, runs: int, run_id: str) -> Path | None:
    try:
        mode = os.stat(run_id, dir_fd=runs, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(mode):
        os.unlink(run_id, dir_fd=runs)
        return None
    if run_state(folder / "runs" / run_id) == "skipped":
        shutil.rmtree(run_id, dir_fd=runs)
        return None
    earlier = safefiles.open_subdir(top, f"{EARLIER_DIR}/{run_id}", create=True)
    try:
        numbers = sorted(int(n) for n in os.listdir(earlier) if n.isdigit())
        n = (numbers[-1] if numbers else 0) + 1
        os.rename(run_id, str(n), src_dir_fd=runs, dst_dir_fd=earlier)
        for old in numbers[:max(0, len(numbers) + 1 - KEEP_EARLIER)]:
            with contextlib.suppress(OSError):
                shutil.rmtree(str(old), dir_fd=earlier)
    finally:
        os.close(earlier)
    return folder / EARLIER_DIR / run_id / str(n)


def base_manifest(run: Run) -> dict[str, Any]:
    """The keys every manifest has, before anything ran."""
    return {
        **run.to_dict(),
        "config": run.config.data,
        "status": "failed",
        "error": "",
        "dataplane": {},
        "kernel_release": "",
        "git_revision": "",
        "sysctls": {},
        "namespace": {},
        "tools": {},
        "timings": {"build_s": None, "traffic_s": None, "teardown_s": None, "total_s": None},
        "capture": {},
        "interface_counters": {},
        "transfers": {},
        "lab_kernel": None,
        "clock": "real",
    }


def finish_manifest(manifest: dict[str, Any], run_dir: Path, started: float) -> None:
    """Stamp the total time and the finish time, and write the manifest (atomically); a
    complete run's files are synced first, so the manifest never outlives them."""
    manifest["timings"]["total_s"] = round(time.monotonic() - started, 3)
    if manifest.get("status") == "complete":
        sync_run(run_dir)
    manifest["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    write_json_atomic(run_dir / "manifest.json", manifest)


def sync_run(run_dir: Path) -> int:
    """fsync every file and folder of `run_dir` (captures, transfers.csv; no link
    followed); how many files."""
    fd = safefiles.open_dir(safefiles.resolve_physical(run_dir))
    try:
        return safefiles.sync_tree(fd)
    finally:
        os.close(fd)


def write_status(run: Run, run_dir: Path, status: str, reason: str,
                 **extra: Any) -> dict[str, Any]:
    """A manifest for a run that did not execute here (skipped) or died with its VM."""
    manifest = base_manifest(run)
    manifest.update(status=status, error=reason, kernel_release=running_kernel_release(),
                    git_revision=git_revision())
    manifest.update(extra)
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISDIR(os.lstat(run_dir).st_mode):  # a link or file a guest left
            run_dir.unlink()
    run_dir.mkdir(parents=True, exist_ok=True)
    finish_manifest(manifest, run_dir, time.monotonic())
    return manifest


def write_failed(run: Run, run_dir: Path, reason: str, **extra: Any) -> dict[str, Any]:
    """A failed manifest for a run that did not finish (its VM died, it was interrupted)."""
    return write_status(run, run_dir, "failed", reason, **extra)
