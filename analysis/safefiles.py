"""Files root opens in folders other people (or a lab-kernel guest) can write: no link
followed, nothing read unbounded, nothing written in place.

pathdiv runs as root and writes into results folders that a student owns and a guest
writes into, and reads files the guest wrote. A path checked once and used later by
name can be swapped for a symbolic link in between, so everything here works on
directory file descriptors instead, the way container runtimes and systemd's tmpfiles do:

- a folder is opened one component at a time from ``/`` (or from a folder already
  open), each with ``O_NOFOLLOW``: a link anywhere on the way raises :class:`FileRefused`
  (what ``openat2``'s ``RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH`` does in one call; ``..``
  and absolute names are refused below a folder);
- a file is read only when ``fstat`` on the open descriptor says it is a regular file,
  and at most ``limit`` bytes of it (opened ``O_NONBLOCK``: a FIFO does not hang);
- a file is written as a temporary file beside it, synced, then renamed over the name
  (:func:`write_atomic`): a link planted at the name is replaced, never written through;
- a tree is given to a user by walking it with ``os.fwalk`` (each folder held open, a
  folder swapped for a link is not entered) and ``fchown`` on each open file
  (:func:`chown_tree`); a file with a second hard link is skipped (it may be someone
  else's file linked in).

Standard library only; the lowest layer (kernels and analysis both use it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class FileRefused(OSError):
    """A path is not followed or read (a link on the way, not a regular file, too large);
    the message names the path and the reason, never the content."""


def _parts(rel: str | Path) -> list[str]:
    """The components of a relative path below a folder; '..', '' and absolute refused."""
    text = str(rel)
    if text.startswith("/"):
        raise FileRefused(errno.EINVAL, f"{text}: expected a path relative to its folder")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise FileRefused(errno.EINVAL, f"{text}: '..' leaves its folder; not followed")
    return parts


def _open_step(dirfd: int, name: str, flags: int, mode: int, shown: str) -> int:
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dirfd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) and _is_link(dirfd, name):
            raise FileRefused(errno.ELOOP, f"{shown} is a symbolic link; pathdiv follows "
                                           "no link here") from None
        raise


def _is_link(dirfd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_dir(path: str | Path, create: bool = False, mode: int = 0o755) -> int:
    """A descriptor of the folder at the absolute ``path``, reached through no link
    (``create``: folders missing on the way are made with ``mode``, less the umask)."""
    text = str(path)
    if not text.startswith("/"):
        raise FileRefused(errno.EINVAL, f"{text}: expected an absolute path")
    top = os.open("/", DIR_FLAGS)
    try:
        return open_subdir(top, text[1:], create=create, mode=mode, shown_root="/")
    finally:
        os.close(top)


def open_subdir(dirfd: int, rel: str | Path, create: bool = False, mode: int = 0o755,
                shown_root: str = "") -> int:
    """A new descriptor of folder ``rel`` below the open folder ``dirfd``, reached through
    no link and never above ``dirfd`` (``create``: missing folders are made)."""
    fd = os.dup(dirfd)
    shown = shown_root
    try:
        for part in _parts(rel):
            shown = os.path.join(shown, part) if shown else part
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, mode, dir_fd=fd)
            nxt = _open_step(fd, part, os.O_RDONLY | os.O_DIRECTORY, 0, shown)
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_beneath(dirfd: int, rel: str | Path, flags: int = os.O_RDONLY,
                 mode: int = 0o644) -> int:
    """A descriptor of ``rel`` below the open folder ``dirfd`` (no link on the way nor at
    the end, never above ``dirfd``), opened with ``flags``."""
    parts = _parts(rel)
    if not parts:
        raise FileRefused(errno.EINVAL, f"{rel!s}: names no file")
    parent = open_subdir(dirfd, "/".join(parts[:-1]))
    try:
        return _open_step(parent, parts[-1], flags, mode, str(rel))
    finally:
        os.close(parent)


def _read_fd(fd: int, shown: str, limit: int) -> bytes:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise FileRefused(errno.EINVAL, f"{shown} is not a regular file; not read")
    if info.st_size > limit:
        raise FileRefused(errno.EFBIG, f"{shown} has {info.st_size} bytes, more than the "
                                       f"{limit} read here; not read")
    chunks: list[bytes] = []
    got = 0
    while got <= limit:
        chunk = os.read(fd, min(1 << 20, limit + 1 - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    if got > limit:  # grew while read
        raise FileRefused(errno.EFBIG, f"{shown} grew past the {limit} bytes read here; "
                                       "not read")
    return b"".join(chunks)


def read_beneath(dirfd: int, rel: str | Path, limit: int) -> bytes:
    """At most ``limit`` bytes: the whole of regular file ``rel`` below ``dirfd``, else
    :class:`FileRefused` (a link, a FIFO, a device, a folder, a larger file)."""
    fd = open_beneath(dirfd, rel, os.O_RDONLY | os.O_NONBLOCK)
    try:
        return _read_fd(fd, str(rel), limit)
    finally:
        os.close(fd)


def read_tail_beneath(dirfd: int, rel: str | Path, limit: int) -> tuple[bytes, int]:
    """The last ``limit`` bytes of regular file ``rel`` below ``dirfd`` and its size (a
    log whose end is what matters); :class:`FileRefused` for a link or no regular file."""
    fd = open_beneath(dirfd, rel, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(errno.EINVAL, f"{rel!s} is not a regular file; not read")
        start = max(0, info.st_size - limit)
        os.lseek(fd, start, os.SEEK_SET)
        data = os.read(fd, limit)
        return data, max(info.st_size, start + len(data))
    finally:
        os.close(fd)


def copy_beneath(src_dirfd: int, name: str, dst_dirfd: int, limit: int) -> int:
    """Copy regular file ``name`` of the open folder ``src_dirfd`` (no link followed, a
    FIFO or device refused at once) to ``name`` in ``dst_dirfd`` (made new: a link or
    file planted there is replaced, never written through), at most ``limit`` bytes:
    :class:`FileRefused` for a larger file, or one that grows past ``limit`` while
    copied (the partial copy is removed). Returns the bytes copied."""
    if "/" in name or name in ("", ".", ".."):
        raise FileRefused(errno.EINVAL, f"{name!r}: expected a file name")
    src = _open_step(src_dirfd, name, os.O_RDONLY | os.O_NONBLOCK, 0, name)
    try:
        info = os.fstat(src)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(errno.EINVAL, f"{name} is not a regular file; not copied")
        if info.st_size > limit:
            raise FileRefused(errno.EFBIG, f"{name} has {info.st_size} bytes, more than "
                                           f"the {limit} copied here; not copied")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dst_dirfd)
        dst = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                      | os.O_CLOEXEC, 0o644 & ~_umask(), dir_fd=dst_dirfd)
        copied = 0
        try:
            while True:
                chunk = os.read(src, min(1 << 20, limit + 1 - copied))
                if not chunk:
                    break
                copied += len(chunk)
                if copied > limit:
                    raise FileRefused(errno.EFBIG, f"{name} grew past the {limit} bytes "
                                                   "copied here; not copied")
                view = memoryview(chunk)
                while view:
                    view = view[os.write(dst, view):]
        except BaseException:
            os.close(dst)
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=dst_dirfd)
            raise
        os.close(dst)
        return copied
    finally:
        os.close(src)


def _absolute(path: str | Path) -> Path:
    """``path`` made absolute against the working folder, its ``..`` kept (and refused
    when walked): normalising it away would take ``runs/../../etc`` out of a folder."""
    text = os.fspath(path)
    return Path(text if text.startswith("/") else os.path.join(os.getcwd(), text))


def read_file(path: str | Path, limit: int) -> bytes:
    """:func:`read_beneath` for ``path`` (no link anywhere on it, no ``..``)."""
    p = _absolute(path)
    top = open_dir(p.parent)
    try:
        fd = _open_step(top, p.name, os.O_RDONLY | os.O_NONBLOCK, 0, str(p))
    finally:
        os.close(top)
    try:
        return _read_fd(fd, str(p), limit)
    finally:
        os.close(fd)


def read_text(path: str | Path, limit: int) -> str:
    """:func:`read_file` decoded as UTF-8, undecodable bytes replaced."""
    return read_file(path, limit).decode("utf-8", errors="replace")


# C0 controls but tab and newline, DEL and C1 controls: what moves a terminal's cursor,
# rewrites its title or answers back when a hostile file is printed on it
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]
            if c not in (0x09, 0x0A)}


def printable(text: str) -> str:
    """``text`` with every terminal control character shown as ``\\xNN``: what another
    user (or a guest) wrote is never echoed raw."""
    return text.translate(_CONTROL)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def write_atomic(dirfd: int, name: str, data: bytes, mode: int = 0o644,
                 sync: bool = True) -> None:
    """Write ``data`` as file ``name`` of the open folder ``dirfd``: a new temporary file
    (``O_EXCL``, no link followed), synced, then renamed over ``name``, so ``name`` is
    the old file or the whole new one, and a link planted at ``name`` is replaced, not
    written through. ``mode`` less the umask (not mkstemp's 0600)."""
    if "/" in name or name in ("", ".", ".."):
        raise FileRefused(errno.EINVAL, f"{name!r}: expected a file name")
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600, dir_fd=dirfd)
    try:
        try:
            os.fchmod(fd, mode & ~_umask())
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dirfd)
        raise
    if sync:
        os.fsync(dirfd)


def write_file_atomic(path: str | Path, data: bytes, mode: int = 0o644,
                      sync: bool = True) -> None:
    """:func:`write_atomic` at ``path``; its folders (made when missing) are reached
    through no link and no ``..``."""
    p = _absolute(path)
    fd = open_dir(p.parent, create=True)
    try:
        write_atomic(fd, p.name, data, mode, sync)
    finally:
        os.close(fd)


def resolve_physical(path: str | Path) -> Path:
    """``path`` made absolute the way the kernel resolves it: links followed and ``..``
    taken after them (``x/link/..`` is the link target's parent, not ``x``), the
    missing end kept as written. Resolve once, then use only the result."""
    return Path(os.path.realpath(path))


def walk_links(path: str | Path) -> Path | None:
    """The first component of ``path`` (absolute, or relative to the working folder) that
    is a symbolic link, taking ``..`` where the kernel takes it (after the folder before
    it); None when there is none. A missing component ends the search."""
    text = os.fspath(path)
    current = Path("/") if text.startswith("/") else Path.cwd()
    for part in [p for p in text.split("/") if p not in ("", ".")]:
        if part == "..":
            current = current.parent
            continue
        nxt = current / part
        try:
            info = os.lstat(nxt)
        except OSError:
            return None
        if stat.S_ISLNK(info.st_mode):
            return nxt
        current = nxt
    return None


def chown_tree(dirfd: int, uid: int, gid: int) -> int:
    """Give the open folder ``dirfd`` and everything below it to ``uid``:``gid`` without
    following a link (a link itself is given, never its target) and without a path race:
    ``os.fwalk`` holds each folder open, and each file is opened (``O_NOFOLLOW``) and
    changed through its descriptor. A file with more than one hard link is skipped (it
    may be another user's file linked in). The kernel clears set-user-ID and
    set-group-ID bits of a file whose owner changes. Returns how many entries changed."""
    os.fchown(dirfd, uid, gid)
    changed = 1
    for root, dirs, files, rootfd in os.fwalk(".", dir_fd=dirfd, follow_symlinks=False):
        if root != ".":
            with contextlib.suppress(OSError):
                os.fchown(rootfd, uid, gid)
                changed += 1
        # fwalk lists a link to a folder among the folders and does not enter it
        for name in files + [d for d in dirs if _is_link(rootfd, d)]:
            changed += _chown_entry(rootfd, name, uid, gid)
    return changed


def _chown_entry(dirfd: int, name: str, uid: int, gid: int) -> int:
    try:
        info = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except OSError:
        return 0
    if stat.S_ISLNK(info.st_mode):
        with contextlib.suppress(OSError):
            os.chown(name, uid, gid, dir_fd=dirfd, follow_symlinks=False)
            return 1
        return 0
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                     | os.O_NOCTTY, dir_fd=dirfd)
    except OSError:
        return 0
    try:
        now = os.fstat(fd)
        if now.st_nlink > 1 and not stat.S_ISDIR(now.st_mode):
            return 0
        os.fchown(fd, uid, gid)
        return 1
    except OSError:
        return 0
    finally:
        os.close(fd)


def sync_tree(dirfd: int) -> int:
    """fsync every regular file below the open folder ``dirfd`` and every folder (no
    link followed), so a record written after this (a manifest saying the captures are
    complete) never survives a crash that the files it declares did not. Returns how
    many files were synced."""
    synced = 0
    for _root, _dirs, files, rootfd in os.fwalk(".", dir_fd=dirfd, follow_symlinks=False):
        for name in files:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                             dir_fd=rootfd)
            except OSError:
                continue
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    os.fsync(fd)
                    synced += 1
            finally:
                os.close(fd)
        os.fsync(rootfd)
    return synced


def iter_names(dirfd: int) -> Iterator[tuple[str, os.stat_result]]:
    """(name, lstat) of each entry of the open folder ``dirfd``, sorted by name."""
    for name in sorted(os.listdir(dirfd)):
        with contextlib.suppress(OSError):
            yield name, os.stat(name, dir_fd=dirfd, follow_symlinks=False)
