"""Files a config names (`workload.sizes: my.cdf`), opened as carefully as pathdiv runs.

pathdiv runs as root on configs students write, so a file a config names is read only
if it is:

- a path relative to the config's folder (made absolute when the config is loaded,
  `load._resolve_files`) or an absolute path;
- reached without any symbolic link on the way (each component is opened with
  O_NOFOLLOW from the one before it, so a link swapped in after a check is refused too);
- a regular file (not /dev/zero, a FIFO or a folder) of at most MAX_FILE_BYTES;
- run through sudo, a file the user who ran sudo may read themselves (`user_cannot_read`,
  from the modes of the file and of every folder on the way): root's reading is not a
  way to reach a file its invoker could not.

Errors name the file and the reason, never its content: a config must not be a way to
print a line of a file its author cannot read.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
from pathlib import Path

MAX_FILE_BYTES = 1_000_000
FILE_SUFFIXES = (".txt", ".cdf", ".csv")


class ConfigFileError(ValueError):
    """A file named by a config cannot be read (the message names file and reason)."""


def invoking_user() -> tuple[int, int] | None:
    """(uid, gid) of the user who ran pathdiv through sudo; None when run directly."""
    if os.geteuid() != 0:
        return None
    try:
        uid, gid = int(os.environ["SUDO_UID"]), int(os.environ["SUDO_GID"])
    except (KeyError, ValueError):
        return None
    return (uid, gid) if uid > 0 else None


def user_groups(uid: int, gid: int) -> set[int]:
    try:
        return {gid, *os.getgrouplist(pwd.getpwuid(uid).pw_name, gid)}
    except KeyError:
        return {gid}


def user_may(info: os.stat_result, uid: int, groups: set[int], bits: int) -> bool:
    """Whether `uid` (in `groups`) holds every permission of `bits` (an rwx triple,
    e.g. 0o4 to read, 0o3 to write and search) on a file `info` describes."""
    if info.st_uid == uid:
        return (info.st_mode >> 6) & bits == bits
    if info.st_gid in groups:
        return (info.st_mode >> 3) & bits == bits
    return info.st_mode & bits == bits


def user_cannot_read(path: Path, user: tuple[int, int]) -> str | None:
    """Why `user` (uid, gid) could not read the file `path` themselves (a folder on the
    way they cannot enter, or the file's own mode); None when they could."""
    uid, gid = user
    groups = user_groups(uid, gid)
    p = Path(os.path.abspath(path))
    try:
        for folder in reversed(p.parents):
            if not user_may(os.stat(folder), uid, groups, 0o1):
                return f"uid {uid}, who ran pathdiv through sudo, cannot enter {folder}"
        if not user_may(os.stat(p), uid, groups, 0o4):
            return f"uid {uid}, who ran pathdiv through sudo, may not read it"
    except OSError:
        return None  # the read itself names what is missing
    return None


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
    user = invoking_user()
    denied = user_cannot_read(p, user) if user is not None else None
    if denied:
        raise ConfigFileError(f"{p}: {denied}; pathdiv reads only files you may read")
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
