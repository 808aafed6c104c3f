"""Which host CPU a lab kernel runs on, agreed between every pathdiv process on the host.

A lab kernel runs bound to one host CPU (kernels/uml.py `pinned` says why: its processes
hand the guest's one CPU to each other at every system call). Each process used to pick
that CPU alone, by its lane number (`boot.lane_cpu`), so every pathdiv with one lab
kernel took the last CPU: on a 2-core host, a k=16 permutation run, a k=8 plan and two
helpers' lab runs started from four shells all ran on CPU 1 while CPU 0 compiled, and the
k=16 build went at 0.31 scripts a second; with the others moved to CPU 0 by hand, at 0.51
(docs/benchmarks.md, "Bigger fat trees").

Now a lab kernel claims a **slot**: an exclusive `flock` on `/run/pathdiv/cpus/cpu<C>-<K>.lock`,
held by the host process for as long as the boot lasts and released by the kernel when
that process ends, however it ends (no stale claim to clean). Slots are tried in rounds:
round K offers slot K of every CPU, the lane's own CPU first, then the others from the
last down. So the first lab kernel on a host gets its lane's CPU, the next another idle
CPU, and only when every CPU has one does a CPU get a second: the lab kernels on a host
differ by at most one per CPU, whichever processes started them. Where the folder cannot
be used safely (not a folder this user owns and others cannot write) or every slot is
taken, the lane's CPU is used unclaimed, as before.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from pathdiv.analysis.safefiles import FileRefused, open_dir

SLOTS_DIR = Path("/run/pathdiv/cpus")
ROUNDS = 8  # slots per CPU; a ninth lab kernel on one CPU shares it unclaimed


def slot_order(own: int, cpus: list[int], rounds: int = ROUNDS) -> list[tuple[int, int]]:
    """(cpu, slot) in the order a lab kernel whose lane prefers CPU `own` tries them:
    slot 0 of its own CPU, slot 0 of the others from the last down, then slot 1, ..."""
    others = [c for c in sorted(cpus, reverse=True) if c != own]
    order = [own, *others] if own in cpus else others
    return [(cpu, k) for k in range(rounds) for cpu in order]


def _slots_folder(path: Path) -> int | None:
    """The slots folder, opened through no link, made if missing; None when it is not a
    folder this user owns that nobody else may write."""
    try:
        fd = open_dir(path, create=True, mode=0o700)
    except (FileRefused, OSError):
        return None
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        os.close(fd)
        return None
    return fd


def _try_slot(folder: int, cpu: int, slot: int) -> int | None:
    """An open descriptor holding slot `slot` of `cpu`, or None when another holds it."""
    name = f"cpu{cpu}-{slot}.lock"
    try:
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                     dir_fd=folder)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return None
        raise
    return fd


@contextlib.contextmanager
def claimed_cpu(own: int | None, cpus: list[int],
                folder: Path = SLOTS_DIR) -> Iterator[tuple[int | None, str]]:
    """The CPU a lab kernel whose lane prefers `own` (None: unbound) should run on, with
    a few words on how it was chosen; the claim lasts as long as the block."""
    if own is None:
        yield None, "unbound (no CPU given)"
        return
    dirfd = _slots_folder(folder)
    if dirfd is None:
        yield own, f"CPU {own}, unclaimed ({folder} cannot be used safely)"
        return
    held: int | None = None
    try:
        for cpu, slot in slot_order(own, cpus):
            held = _try_slot(dirfd, cpu, slot)
            if held is not None:
                shared = f", beside {slot} other lab kernel(s)" if slot else ""
                yield cpu, f"CPU {cpu} (slot {slot}{shared})"
                return
        yield own, f"CPU {own}, unclaimed (every CPU holds {ROUNDS} lab kernels)"
    finally:
        if held is not None:
            os.close(held)
        os.close(dirfd)
