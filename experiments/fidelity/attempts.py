"""Repeating invalid runs: which attempt folder, whether to repeat, the manifest's list.

The newest attempt of a run always lives in `runs/<run_id>/` itself (so resuming and
`pathdiv analyze` see one run as before); each earlier attempt is moved, whole, into
`runs/<run_id>/attempt-<n>/` beside it and never overwritten. The manifest's
`attempts` lists every attempt with its verdict and reasons.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

PREFIX = "attempt-"


def attempt_dir(run_dir: Path, n: int) -> Path:
    return run_dir / f"{PREFIX}{n}"


def verdict_of(manifest: dict[str, Any]) -> str:
    return str((manifest.get("fidelity") or {}).get("verdict", "unknown"))


def should_repeat(manifest: dict[str, Any], attempt: int, max_repeats: int) -> bool:
    """Repeat a complete run judged invalid while repeats are left (attempt counts from 1)."""
    return (manifest.get("status") == "complete" and verdict_of(manifest) == "invalid"
            and attempt <= max_repeats)


def attempt_entry(manifest: dict[str, Any], attempt: int, folder: str) -> dict[str, Any]:
    fid = manifest.get("fidelity") or {}
    return {"attempt": attempt, "folder": folder, "status": manifest.get("status"),
            "verdict": fid.get("verdict", "unknown"), "reasons": fid.get("reasons", []),
            "finished": manifest.get("finished")}


def shelve(run_dir: Path, attempt: int) -> Path:
    """Move everything of the attempt just finished into attempt-<n>/ (manifest first,
    so an interruption leaves a run without manifest: partial, redone on resume)."""
    target = attempt_dir(run_dir, attempt)
    if target.exists():
        raise FileExistsError(f"{target} exists; an earlier attempt is never overwritten")
    target.mkdir()
    entries = sorted(run_dir.iterdir(), key=lambda p: p.name != "manifest.json")
    for entry in entries:
        if entry.name.startswith(PREFIX) or entry == target:
            continue
        os.replace(entry, target / entry.name)
    return target
