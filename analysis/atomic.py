"""Result files written atomically: a reader (or a resumed run) never sees half a file.

A temporary file in the same folder, flushed and synced, then `os.replace`: `path` is
either the old file or the complete new one. The rename replaces a symbolic link at
`path` instead of writing through it, and the file gets an explicit mode, because
mkstemp's 0600 would hide results from the user who ran pathdiv through sudo. This is
the one writer of the package: the run records (experiments/manifest.py), metrics.csv
and the reports all go through it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_text_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Write `text` to `path` so that `path` is either old or complete, never partial."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
