"""Who is executing what in a results folder: running markers and shard progress files.

    running/<run_id>.json          while a process executes the run: pid, host, start
    progress/shard-I-of-N.json     one per shard: host, pid, counts, current run, state
    running/plan[-shard-I-of-N].lock  held (a POSIX lock) for a whole `pathdiv run`

The plan lock stops a second `pathdiv run` of the same plan (or shard) on the folder for
the whole execution, between runs and between lab boots too, where no running marker
exists; shards of one plan each hold their own. It is opened without following a link,
and says who holds it (`execution_lock`); released, it is left empty, not removed
(a process that opened it meanwhile would lock a file no one else sees).

A marker is written before a run starts and removed once its manifest is final. A
marker left behind by a killed process is stale: on the host that wrote it, its pid is
gone (or is another process, told apart by the process start time); on any other host
it cannot be checked from here (`process_alive` says None).

Each file belongs to one shard and is written atomically, so shards on different
machines never write the same file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pathdiv.analysis.safefiles as safefiles
from pathdiv.experiments.cluster.planfile import open_lock
from pathdiv.experiments.cluster.shards import Shard
from pathdiv.experiments.execute.runstate import ResultsError
from pathdiv.experiments.manifest import read_json_dict, write_json_atomic
from pathdiv.experiments.plan.runs import Run
from pathdiv.kernels.processes import owner_alive, process_start

RUNNING_DIR = "running"
PROGRESS_DIR = "progress"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def this_process() -> dict[str, Any]:
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "proc_start": process_start(pid),
            "started": now_iso()}


def process_alive(owner: dict[str, Any], host: str | None = None) -> bool | None:
    """Whether the process in `owner` still runs: None when it ran on another host."""
    if owner.get("host") != (host or socket.gethostname()):
        return None
    start = owner.get("proc_start")
    return owner_alive(f"{owner.get('pid')}:{'' if start is None else start}")


class FolderBusy(ResultsError):
    """Another pathdiv process executes this plan (or shard) in the folder."""


@contextlib.contextmanager
def execution_lock(folder: Path, shard: Shard | None = None) -> Iterator[None]:
    """Hold the folder's plan lock (one per shard) for a whole execution; FolderBusy,
    naming the holder, when another process holds it. The folder (and running/) is
    reached through no link, the lock file opened with O_NOFOLLOW."""
    name = f"plan-{shard.name}.lock" if shard is not None else "plan.lock"
    os.close(safefiles.open_dir(os.path.abspath(folder / RUNNING_DIR), create=True))
    fd = open_lock(folder / RUNNING_DIR, name)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                holder = json.loads(os.pread(fd, 4096, 0) or b"{}")
            except ValueError:
                holder = {}
            raise FolderBusy(
                f"{folder}: another `pathdiv run` executes this plan"
                f"{f' (shard {shard})' if shard is not None else ''} there (pid "
                f"{holder.get('pid', '?')} on {holder.get('host', '?')} since "
                f"{holder.get('started', '?')}): wait for it, or stop it") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(this_process()).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # held by no one now; the file stays (see above)
    finally:
        os.close(fd)  # releases the lock


def marker_path(folder: Path, run_id: str) -> Path:
    return folder / RUNNING_DIR / f"{run_id}.json"


def busy_runs(folder: Path, run_ids: list[str], host: str | None = None) -> list[str]:
    """One line per run of `run_ids` whose running marker names a live process on this
    host other than this one (the pid and its start time must both match): a second
    process must not delete and redo what that one is writing."""
    busy = []
    for run_id in run_ids:
        marker = read_json_dict(marker_path(folder, run_id))  # no link, bounded
        if marker is None or marker.get("pid") == os.getpid():
            continue
        if process_alive(marker, host) is True:
            since = f" since {marker['run_started']}" if marker.get("run_started") else ""
            busy.append(f"{run_id} (pid {marker.get('pid')} on {marker.get('host')}{since})")
    return busy


def progress_path(folder: Path, shard: Shard) -> Path:
    return folder / PROGRESS_DIR / f"{shard.name}.json"


@dataclass
class RunTracker:
    """Markers for the runs this process executes, and its shard's progress file."""

    folder: Path
    runs: list[Run]
    shard: Shard | None = None
    complete_before: int = 0
    owner: dict[str, Any] = field(default_factory=this_process)

    def __post_init__(self) -> None:
        self.marked: set[str] = set()
        self.counts = {"complete": self.complete_before, "failed": 0, "skipped": 0}
        self.current = ""
        self.state = "running"
        self.save()

    def started(self, run: Run) -> None:
        write_json_atomic(marker_path(self.folder, run.run_id),
                          {**self.owner, "run_id": run.run_id, "run_started": now_iso(),
                           "shard": str(self.shard) if self.shard else None})
        self.marked.add(run.run_id)
        self.current = run.run_id
        self.save()

    def finished(self, run: Run, status: str) -> None:
        self.counts[status] = self.counts.get(status, 0) + 1
        self._unmark(run.run_id)
        if self.current == run.run_id:
            self.current = ""
        self.save()

    def close(self, state: str) -> None:
        """'done' or 'interrupted'; markers of runs this process did not finish go too."""
        for run_id in sorted(self.marked):
            self._unmark(run_id)
        self.current = ""
        self.state = state
        self.save()

    def _unmark(self, run_id: str) -> None:
        marker_path(self.folder, run_id).unlink(missing_ok=True)
        self.marked.discard(run_id)

    def save(self) -> None:
        if self.shard is None:
            return
        write_json_atomic(progress_path(self.folder, self.shard), {
            "shard": str(self.shard), **self.owner, "updated": now_iso(),
            "state": self.state, "runs": len(self.runs), **self.counts,
            "current": self.current})
