"""Result files written atomically: a reader (or a resumed run) never sees half a file.

A temporary file in the same folder, flushed and synced, then renamed over the name:
`path` is either the old file or the complete new one. The folder is reached from `/`
through no symbolic link (each component opened with O_NOFOLLOW; missing folders are
made), the temporary file is made with O_EXCL in that open folder, and the rename
replaces a link at `path` instead of writing through it (analysis/safefiles.py): root
writes into folders a student owns and a lab-kernel guest writes into. The file gets an
explicit mode, because mkstemp's 0600 would hide results from the user who ran pathdiv
through sudo. This is the one writer of the package: the run records
(experiments/manifest.py), metrics.csv and the reports all go through it.
"""

from __future__ import annotations

from pathlib import Path

from pathdiv.analysis.safefiles import write_file_atomic


def write_text_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Write `text` to `path` so that `path` is either old or complete, never partial;
    FileRefused (an OSError) when a folder on the way is a symbolic link."""
    write_file_atomic(path, text.encode("utf-8"), mode)


def write_bytes_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """`write_text_atomic` for bytes (a plot)."""
    write_file_atomic(path, data, mode)
