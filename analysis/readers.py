"""A results folder read as hostile: what `pathdiv analyze`, `status`, `compare` and
`results.open` read of a folder that a student owns and a lab-kernel guest wrote into.

- every file is opened without following a symbolic link (analysis/safefiles.py), read
  only if it is a regular file and only up to a bound (a FIFO does not hang, a link to
  /dev/zero or a sparse file of terabytes does not fill memory);
- `config.yaml` goes through the bounds `pathdiv check` puts on a config
  (analysis/safe_yaml.py: no tags, no alias or depth bombs, no duplicate keys);
- JSON records (manifests, plan.json) are bounded in size and nesting;
- a run folder is a real folder below `runs/` whose name is a plain run id (a link or a
  name with a newline is skipped and said);
- what cannot be read is reported with its path, never its content, and skipped where
  the rest can go on: one bad run does not stop an analysis.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import pandas as pd

import pathdiv.analysis.safefiles as safefiles
from pathdiv.analysis.safe_yaml import MAX_TEXT_BYTES, YamlRefused, load_text

MAX_RECORD_BYTES = 16_000_000     # a manifest, plan.json, stats.json
MAX_TABLE_BYTES = 512_000_000     # metrics.csv, transfer_metrics.csv, a run's transfers.csv
MAX_CAPTURE_BYTES = 4_000_000_000  # one link's pcap file
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")


class FolderError(ValueError):
    """A results folder's file that cannot be read (the message names it and why)."""


def read_bytes(path: Path, limit: int) -> bytes:
    """The bytes of regular file `path`, through no link, at most `limit`; FileNotFoundError
    when missing, FolderError when it is no regular file or larger."""
    try:
        return safefiles.read_file(path, limit)
    except FileNotFoundError:
        raise
    except safefiles.FileRefused as exc:
        raise FolderError(str(exc)) from None
    except OSError as exc:
        raise FolderError(f"{path} cannot be read: {exc.strerror or exc}") from None


def read_config(folder: Path) -> dict[str, Any] | None:
    """The folder's config.yaml as a mapping, within a config's bounds; None when the
    folder has none; FolderError when it cannot be read (a bomb, a link, not YAML)."""
    path = Path(folder) / "config.yaml"
    try:
        return _config_of(read_bytes(path, MAX_TEXT_BYTES), path)
    except FileNotFoundError:
        return None


def read_named_config(path: Path) -> dict[str, Any] | None:
    """A config the user names (`--design CONFIG`), read as `pathdiv check` reads one: a
    regular file (opened without waiting: a FIFO is refused at once), bounded, YAML
    within a config's bounds; a link to it is followed, as for any path a user gives."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise FolderError(f"cannot read {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise FolderError(f"{path} is not a regular file; a config is a YAML file")
        data = f.read(MAX_TEXT_BYTES + 1)
    if len(data) > MAX_TEXT_BYTES:
        raise FolderError(f"{path} is larger than {MAX_TEXT_BYTES // 1000} kB")
    return _config_of(data, path)


def _config_of(data: bytes, path: Path) -> dict[str, Any] | None:
    try:
        value = load_text(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise FolderError(f"{path} is not UTF-8 text") from None
    except YamlRefused as exc:
        raise FolderError(f"{path} cannot be read ({exc})") from None
    if value is None:
        return None
    if not isinstance(value, dict):
        raise FolderError(f"{path} does not hold a mapping of config keys")
    return value


def read_record(path: Path, notes: list[str] | None = None,
                limit: int = MAX_RECORD_BYTES) -> Any:
    """A JSON document from `path`; None when it is missing or, with `notes`, cannot be
    read (the reason appended there); FolderError otherwise."""
    try:
        return json.loads(read_bytes(path, limit))
    except FileNotFoundError:
        return None
    except (FolderError, ValueError, RecursionError) as exc:
        why = str(exc) if isinstance(exc, FolderError) else \
            f"{path} is not JSON ({type(exc).__name__})"
        if notes is None:
            raise FolderError(why) from None
        notes.append(f"{why}; ignored.")
        return None


def read_table(path: Path, limit: int = MAX_TABLE_BYTES, **options: Any) -> pd.DataFrame:
    """A CSV table from `path` (pandas' read_csv `options`), through no link, at most
    `limit` bytes; FileNotFoundError when missing, FolderError when it cannot be read."""
    data = read_bytes(path, limit)
    try:
        return pd.read_csv(io.BytesIO(data), **options)
    except (ValueError, pd.errors.ParserError) as exc:
        raise FolderError(f"{path} is not a CSV table ({type(exc).__name__})") from None


def run_folders(folder: Path, notes: list[str] | None = None) -> list[Path]:
    """The run folders below `folder`/runs, sorted: real folders (a symbolic link is
    skipped) whose names are plain run ids; each skipped entry said in `notes`."""
    runs = Path(folder) / "runs"
    try:
        fd = safefiles.open_dir(os.path.abspath(runs))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise FolderError(f"{runs} cannot be read: {exc}") from None
    found = []
    try:
        for name, info in safefiles.iter_names(fd):
            if stat.S_ISLNK(info.st_mode):
                why = "is a symbolic link"
            elif not stat.S_ISDIR(info.st_mode):
                continue
            elif not RUN_ID.fullmatch(name):
                why = "is not a run id"
            else:
                found.append(runs / name)
                continue
            if notes is not None:
                notes.append(f"runs/{name!r} {why}; skipped.")
    finally:
        os.close(fd)
    return found


def manifests(folder: Path, notes: list[str] | None = None) -> list[tuple[Path, dict]]:
    """(run folder, manifest) of every run folder holding a readable manifest.json
    object; the others said in `notes`."""
    out = []
    for run_dir in run_folders(folder, notes):
        doc = read_record(run_dir / "manifest.json", notes if notes is not None else [])
        if isinstance(doc, dict):
            out.append((run_dir, doc))
        elif doc is not None and notes is not None:
            notes.append(f"{run_dir / 'manifest.json'} is not a JSON object; ignored.")
    return out
