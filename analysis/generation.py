"""One analysis, one generation of files: written aside, then swapped in, under a lock.

`pathdiv analyze` writes many files into a results folder (metrics.csv, stats.json, the
reports, plots, each run's timeline.csv). Written one after the other into the folder,
an interruption (Ctrl-C, Slurm's time limit, a killed job) or a second analysis at the
same time (the Slurm analysis job and a user) left files of two analyses side by side.
Instead:

- `analysis.lock` (a POSIX lock on a file opened without following links) is held for
  the whole analysis: a second analysis of the folder waits for the first;
- every file of the new generation is written into a staging folder
  `.analysis-<id>/` beside them (the same file system), nothing into the folder itself;
- the commit: every destination folder is opened first (a link where one should be is
  refused before anything moves); the list of moves goes into `analysis-commit.json`;
  each file is renamed into place, files the previous generation wrote and this one did
  not are removed, `analysis.json` records the generation (its id, when, and each file
  with its size and SHA-256) and the journal is removed. SIGINT, SIGTERM and SIGHUP wait
  for the commit (a few milliseconds) to end;
- a commit cut short by SIGKILL or a power loss leaves its journal: the next analysis
  finishes it before anything else, and readers say so (`interrupted_commit`).

So at any moment the folder's analysis files are one complete generation, the last one
committed, and `analysis.json` says which. All of it goes through folder descriptors
(analysis/safefiles.py): the folder belongs to a student and a guest may have written
into it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import signal
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pathdiv.analysis.safefiles as safefiles

LOCK = "analysis.lock"
JOURNAL = "analysis-commit.json"
RECORD = "analysis.json"
STAGING_PREFIX = ".analysis-"
MAX_JOURNAL_BYTES = 16_000_000
HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


class GenerationError(OSError):
    """The analysis cannot be committed (the message names the path and why)."""


class Generation:
    """The files of one analysis being written: `staging` is where they go, by the
    same relative names they get in the folder (`runs/<id>/timeline.csv` too)."""

    def __init__(self, folder: Path, folder_fd: int, name: str) -> None:
        self.folder = folder
        self.folder_fd = folder_fd
        self.name = name  # the staging folder's name in `folder`
        self.id = name.removeprefix(STAGING_PREFIX)
        self.carried: set[str] = set()  # files of the folder this generation read as is

    def carry(self, *rels: str) -> None:
        """Files already in the folder that this generation uses as they are (the
        metrics.csv a --stats-only analysis reads; a name ending in '/' carries what an
        earlier generation wrote below it): kept, recorded with it."""
        self.carried.update(rels)

    @property
    def staging(self) -> Path:
        return self.folder / self.name

    def path(self, rel: str) -> Path:
        """Where the file `rel` of this generation is written (in the staging folder)."""
        return self.staging / rel

    def write_bytes(self, rel: str, data: bytes) -> None:
        safefiles.write_file_atomic(self.path(rel), data, sync=False)

    def write_text(self, rel: str, text: str) -> None:
        self.write_bytes(rel, text.encode("utf-8"))


# ---- reading ----------------------------------------------------------------------------
def committed(folder: Path) -> dict[str, Any] | None:
    """The folder's last committed generation (`analysis.json`), None when there is none
    (or it cannot be read)."""
    try:
        doc = json.loads(safefiles.read_file(Path(folder) / RECORD, MAX_JOURNAL_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("files"), dict) else None


def interrupted_commit(folder: Path) -> bool:
    """Whether a commit was cut short (its journal is there): until the next analysis
    finishes it, the folder holds files of two generations."""
    return os.path.lexists(Path(folder) / JOURNAL)


def _digest(dirfd: int, rel: str) -> tuple[int, str]:
    fd = safefiles.open_beneath(dirfd, rel, os.O_RDONLY | os.O_NONBLOCK)
    try:
        h, size = hashlib.sha256(), 0
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
            size += len(chunk)
        return size, h.hexdigest()
    finally:
        os.close(fd)


def verify(folder: Path) -> list[str]:
    """Why the folder's analysis files are not the generation `analysis.json` records
    (empty when they are): a file missing, changed, or a commit cut short."""
    record = committed(folder)
    if record is None:
        return [f"{folder / RECORD} is missing or unreadable"]
    problems = [f"{folder / JOURNAL}: a commit was cut short"] if interrupted_commit(folder) \
        else []
    fd = safefiles.open_dir(os.path.abspath(folder))
    try:
        for rel, (size, digest) in sorted(record["files"].items()):
            try:
                if _digest(fd, rel) != (size, digest):
                    problems.append(f"{rel} is not the one generation {record['id']} wrote")
            except OSError:
                problems.append(f"{rel} of generation {record['id']} is missing")
    finally:
        os.close(fd)
    return problems


# ---- writing ----------------------------------------------------------------------------
@contextlib.contextmanager
def new_generation(folder: Path) -> Iterator[Generation]:
    """Hold the folder's analysis lock, give a staging folder for the new generation's
    files, and commit them when the block ends without an exception (the staging folder
    is removed either way; on an exception the previous generation stays as it was)."""
    folder = Path(os.path.abspath(folder))
    folder_fd = safefiles.open_dir(folder)
    try:
        lock = _lock(folder_fd, folder)
        try:
            finish_interrupted(folder_fd, folder)
            _remove_stale_staging(folder_fd)
            name = f"{STAGING_PREFIX}{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"
            os.mkdir(name, 0o755, dir_fd=folder_fd)
            gen = Generation(folder, folder_fd, name)
            try:
                yield gen
                commit(gen)
            finally:
                # a commit that failed half-way keeps its journal and the files it has
                # still to move: the next analysis finishes it
                if not _exists(folder_fd, JOURNAL):
                    with contextlib.suppress(FileNotFoundError):
                        shutil.rmtree(name, dir_fd=folder_fd)
        finally:
            os.close(lock)  # releases the lock
    finally:
        os.close(folder_fd)


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _lock(folder_fd: int, folder: Path) -> int:
    fd = safefiles.open_beneath(folder_fd, LOCK, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK,
                                0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise GenerationError(errno.EINVAL, f"{folder / LOCK} is not a regular file; "
                                            "pathdiv locks the analysis with a file of its "
                                            "own: remove it")
    fcntl.lockf(fd, fcntl.LOCK_EX)
    return fd


def _remove_stale_staging(folder_fd: int) -> None:
    """Staging folders of analyses that were killed before they committed."""
    for name, info in safefiles.iter_names(folder_fd):
        if name.startswith(STAGING_PREFIX) and stat.S_ISDIR(info.st_mode):
            with contextlib.suppress(OSError):
                shutil.rmtree(name, dir_fd=folder_fd)


def _staged_files(gen: Generation) -> list[str]:
    staging_fd = safefiles.open_subdir(gen.folder_fd, gen.name)
    try:
        out = []
        for root, _dirs, files, rootfd in os.fwalk(".", dir_fd=staging_fd,
                                                   follow_symlinks=False):
            for name in files:
                if stat.S_ISREG(os.stat(name, dir_fd=rootfd, follow_symlinks=False).st_mode):
                    out.append(os.path.normpath(os.path.join(root, name)))
        return sorted(out)
    finally:
        os.close(staging_fd)


def commit(gen: Generation) -> None:
    """Move the staged generation into the folder (see the module's docstring)."""
    files = _staged_files(gen)
    staging_fd = safefiles.open_subdir(gen.folder_fd, gen.name)
    try:
        digests = {rel: list(_digest(staging_fd, rel)) for rel in files}
    finally:
        os.close(staging_fd)
    for rel in files:  # every destination folder reachable before anything moves
        parent = os.path.dirname(rel)
        if parent:
            try:
                os.close(safefiles.open_subdir(gen.folder_fd, parent, create=True))
            except OSError as exc:
                raise GenerationError(exc.errno or errno.EINVAL,
                                      f"{gen.folder / parent} cannot take the analysis' "
                                      f"files: {exc}; nothing was changed") from None
    previous = committed(gen.folder) or {"files": {}}
    kept = {}
    below = tuple(c for c in gen.carried if c.endswith("/"))
    wanted = {c for c in gen.carried if not c.endswith("/")} | \
        {r for r in previous["files"] if below and r.startswith(below)}
    for rel in sorted(wanted - set(digests)):
        with contextlib.suppress(OSError):
            kept[rel] = list(_digest(gen.folder_fd, rel))
    journal = {"id": gen.id, "staging": gen.name, "files": digests, "kept": kept,
               "remove": sorted(rel for rel in set(previous["files"]) - set(digests)
                                - set(kept) if removable(rel)),
               "written": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    held = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        safefiles.write_atomic(gen.folder_fd, JOURNAL, json.dumps(journal).encode())
        _apply(gen.folder_fd, journal)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


# What the runs and the user wrote: never removed as an earlier analysis' file, whatever
# its record says (a folder's owner or a guest may have edited analysis.json)
INPUTS = frozenset({"config.yaml", "plan.json", "plan.json.lock", "run.txt",
                    ".pathdiv-results", LOCK, RECORD, JOURNAL})


def removable(rel: str) -> bool:
    """Whether `rel`, a file an earlier generation wrote, may be removed when this one
    does not write it again: no input, and in a run's folder only its timeline.csv."""
    parts = rel.split("/")
    if rel in INPUTS or ".." in parts or rel.startswith("/"):
        return False
    return parts[0] != "runs" or (len(parts) == 3 and parts[2] == "timeline.csv")


def _apply(folder_fd: int, journal: dict[str, Any]) -> None:
    """Carry out a journal (again, after a crash: moves already done are skipped)."""
    staging = str(journal["staging"])
    for rel in journal["files"]:
        parent, name = os.path.split(rel)
        try:
            src = safefiles.open_subdir(folder_fd, os.path.join(staging, parent))
        except FileNotFoundError:
            continue  # moved before the crash, staging folder already gone
        try:
            dst = safefiles.open_subdir(folder_fd, parent, create=True)
            try:
                with contextlib.suppress(FileNotFoundError):  # moved before the crash
                    os.replace(name, name, src_dir_fd=src, dst_dir_fd=dst)
                os.fsync(dst)
            finally:
                os.close(dst)
        finally:
            os.close(src)
    for rel in journal["remove"]:
        if not removable(str(rel)):
            continue
        parent, name = os.path.split(rel)
        with contextlib.suppress(OSError):
            dst = safefiles.open_subdir(folder_fd, parent)
            try:
                os.unlink(name, dir_fd=dst)
            finally:
                os.close(dst)
    record = {"id": journal["id"], "written": journal["written"],
              "files": {**journal["files"], **(journal.get("kept") or {})}}
    safefiles.write_atomic(folder_fd, RECORD, (json.dumps(record, indent=1) + "\n").encode())
    os.unlink(JOURNAL, dir_fd=folder_fd)
    os.fsync(folder_fd)


def finish(folder: Path) -> bool:
    """Under the folder's analysis lock, finish a commit cut short; True when there was
    one (`pathdiv analyze` does this first; here for a reader that may write)."""
    folder = Path(os.path.abspath(folder))
    folder_fd = safefiles.open_dir(folder)
    try:
        lock = _lock(folder_fd, folder)
        try:
            return finish_interrupted(folder_fd, folder)
        finally:
            os.close(lock)
    finally:
        os.close(folder_fd)


def finish_interrupted(folder_fd: int, folder: Path) -> bool:
    """Finish a commit cut short (its journal is there); True when there was one."""
    try:
        data = safefiles.read_beneath(folder_fd, JOURNAL, MAX_JOURNAL_BYTES)
    except FileNotFoundError:
        return False
    try:
        journal = json.loads(data)
        files, remove = journal["files"], journal["remove"]
        ok = isinstance(files, dict) and isinstance(remove, list) and \
            str(journal["staging"]).startswith(STAGING_PREFIX) and \
            "/" not in str(journal["staging"])
    except (ValueError, KeyError, TypeError, RecursionError):
        ok = False
    if not ok:
        raise GenerationError(errno.EINVAL, f"{folder / JOURNAL} is not a journal pathdiv "
                                            "wrote; remove it and analyse again")
    _apply(folder_fd, journal)
    with contextlib.suppress(OSError):
        shutil.rmtree(str(journal["staging"]), dir_fd=folder_fd)
    return True
