"""The state of one run's folder: its manifest's status, and the manifests of runs that
did not finish (failed, skipped); the error of a results folder that cannot take a plan.
Shared by the runner and the lab-kernel runs."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pathdiv.experiments.fabric.environment import running_kernel_release
from pathdiv.experiments.manifest import git_revision, write_json_atomic
from pathdiv.experiments.plan.runs import Run

STATUSES = ("complete", "failed", "skipped")


class ResultsError(ValueError):
    """A results folder that cannot take this plan (another experiment's, unreadable)."""


def run_state(run_dir: Path) -> str:
    """'absent', 'partial' (anything without a readable final manifest) or its status."""
    if not run_dir.exists():
        return "absent"
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return "partial"
    status = manifest.get("status") if isinstance(manifest, dict) else None
    return status if status in STATUSES else "partial"


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
    """Stamp the total time and the finish time, and write the manifest (atomically)."""
    manifest["timings"]["total_s"] = round(time.monotonic() - started, 3)
    manifest["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    write_json_atomic(run_dir / "manifest.json", manifest)


def write_status(run: Run, run_dir: Path, status: str, reason: str,
                 **extra: Any) -> dict[str, Any]:
    """A manifest for a run that did not execute here (skipped) or died with its VM."""
    manifest = base_manifest(run)
    manifest.update(status=status, error=reason, kernel_release=running_kernel_release(),
                    git_revision=git_revision())
    manifest.update(extra)
    run_dir.mkdir(parents=True, exist_ok=True)
    finish_manifest(manifest, run_dir, time.monotonic())
    return manifest


def write_failed(run: Run, run_dir: Path, reason: str, **extra: Any) -> dict[str, Any]:
    """A failed manifest for a run that did not finish (its VM died, it was interrupted)."""
    return write_status(run, run_dir, "failed", reason, **extra)
