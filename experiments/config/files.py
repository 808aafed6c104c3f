"""Files a config names (`workload.sizes: my.cdf`), opened as carefully as pathdiv runs.

pathdiv runs as root on configs students write, so a file a config names is read only
if it is:

- a path relative to the config's folder (made absolute when the config is loaded,
  `load._resolve_files`) or an absolute path;
- reached without any symbolic link on the way (each component is opened with
  O_NOFOLLOW from the one before it, so a link swapped in after a check is refused too);
- a regular file (not /dev/zero, a FIFO or a folder) of at most MAX_FILE_BYTES.

Errors name the file and the reason, never its content: a config must not be a way to
print a line of a file its author cannot read.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

MAX_FILE_BYTES = 1_000_000
FILE_SUFFIXES = (".txt", ".cdf", ".csv")


class ConfigFileError(ValueError):
    """A file named by a config cannot be read (the message names file and reason)."""


def is_file_reference(value: str) -> bool:
    """Whether a `workload.sizes` value names a file (else a built-in distribution)."""
    return value.endswith(FILE_SUFFIXES)


def _open_nofollow(path: Path) -> int:
    """A read-only descriptor of `path`, walking it one component at a time with
    O_NOFOLLOW: any symbolic link on the way raises ConfigFileError."""
    parts = path.parts
    fd = os.open(parts[0], os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i, part in enumerate(parts[1:], 1):
            last = i == len(parts) - 1
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | (0 if last else os.O_DIRECTORY)
            try:
                nxt = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and \
                        os.path.islink(os.path.join(*parts[: i + 1])):
                    raise ConfigFileError(
                        f"{path}: {os.path.join(*parts[: i + 1])} is a symbolic link; a file "
                        "a config names is read only through real folders (copy the file "
                        "next to the config)") from None
                raise
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_config_file(path: str | Path) -> str:
    """The text of a file a config names, within the rules above."""
    p = Path(os.path.abspath(path))
    try:
        fd = _open_nofollow(p)
    except ConfigFileError:
        raise
    except OSError as exc:
        raise ConfigFileError(f"cannot read {p}: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ConfigFileError(f"{p} is not a regular file; expected a text file")
    if info.st_size > MAX_FILE_BYTES:
        os.close(fd)
        raise ConfigFileError(f"{p} has {info.st_size} bytes; a file a config names is "
                              f"at most {MAX_FILE_BYTES // 1000} kB")
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ConfigFileError(f"{p} is larger than {MAX_FILE_BYTES // 1000} kB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigFileError(f"{p} is not UTF-8 text") from None
