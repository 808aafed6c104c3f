"""The wall times of runs finished on this machine: what the estimate is calibrated from.

One JSON object per line in HISTORY_FILE (under the lab kernel's cache, PATHDIV_CACHE:
machine-wide, written by `pathdiv run` as it runs), appended once per complete run:

    {"t": ISO time, "host": hostname, "kernel": "lab", "clock": "virtual",
     "plane": "nftables", "k": 4, "nodes": 36, "rounds": 2, "payload_mb": 0.28,
     "sim_s": 0.05, "wall_s": 26.1, "jobs": 2, "load": 1.9, "config": "noisy",
     "run_id": ..., "git": ...}

`wall_s` is the host's wall time of the run (the first run of a lab kernel carries its
boot), `jobs` how many lab kernels shared the machine, `load` the 1-minute load average
when it ended. A record of another host (a cache on a shared file system) is ignored.
Writing is best effort: a cache that cannot be written never fails a run. The file is
cut to its newest KEEP lines when it grows past twice that.

`record` is pure; `append` and `read` touch the file.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pathdiv.experiments.plan.estimate import Estimator, clock_of, plane_of, run_work
from pathdiv.experiments.plan.runs import Run
from pathdiv.kernels.build import CACHE_DIR

HISTORY_FILE = CACHE_DIR / "history" / "runs.jsonl"
HISTORY_ENV = "PATHDIV_HISTORY"  # another file (or 'off'): tests, benchmarks
KEEP = 2000
MAX_LINE = 4096


def history_file() -> Path | None:
    """The history file in use; None when PATHDIV_HISTORY=off."""
    value = os.environ.get(HISTORY_ENV, "")
    if value == "off":
        return None
    return Path(value) if value else HISTORY_FILE


def record(run: Run, wall_s: float, plane: str | None, jobs: int, load: float | None,
           git: str = "", host: str | None = None, now: datetime | None = None,
           built: bool = True) -> dict[str, Any]:
    """The history line of a complete run (pure); `built`: it built its network (False:
    it reused the run before's, reset)."""
    cfg = run.config
    return {"t": (now or datetime.now(UTC)).isoformat(timespec="seconds"),
            "host": host or socket.gethostname(), "kernel": cfg.host_kernel,
            "clock": clock_of(cfg), "plane": plane_of(plane), "k": cfg.k,
            **run_work(cfg, run.flow_type, run.workload_seed).to_dict(),
            "wall_s": round(wall_s, 2), "jobs": jobs,
            "load": None if load is None else round(load, 2), "config": cfg.name,
            "run_id": run.run_id, "git": git, "built": built}


def parse(lines: list[str], host: str) -> list[dict[str, Any]]:
    """The records of `host` in `lines`, oldest first; broken lines are skipped (pure)."""
    out = []
    for line in lines:
        if len(line) > MAX_LINE:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("host") == host:
            out.append(rec)
    return out


def read(path: Path | None = None, host: str | None = None) -> list[dict[str, Any]]:
    """This host's records, oldest first ([] when there is no readable file)."""
    path = history_file() if path is None else path
    if path is None:
        return []
    try:
        if path.is_symlink() or not path.is_file():
            return []
        text = path.read_text(errors="replace")
    except OSError:
        return []
    return parse(text.splitlines()[-2 * KEEP:], host or socket.gethostname())


def append(rec: dict[str, Any], path: Path | None = None) -> None:
    """Add `rec` to the history (best effort; cut to the newest KEEP lines now and then)."""
    path = history_file() if path is None else path
    if path is None:
        return
    line = json.dumps(rec, sort_keys=True)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            return
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
        lines = path.read_text(errors="replace").splitlines()
        if len(lines) > 2 * KEEP:
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text("\n".join(lines[-KEEP:]) + "\n")
            os.replace(tmp, path)


def estimator() -> Estimator:
    """Run-time estimates calibrated from this machine's history of runs."""
    return Estimator.from_records(read(), str(history_file() or ""))
