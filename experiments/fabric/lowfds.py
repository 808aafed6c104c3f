"""Descriptor numbers below select()'s FD_SETSIZE, kept for a C library that waits on
the descriptors it opens with select().

libnftables (fabric/nftlib.py) waits for the kernel's answer to a ruleset load with
select() on its netlink socket: FD_SET on a descriptor at or above FD_SETSIZE (1024) is,
in a program built with _FORTIFY_SOURCE (Debian's is), glibc's `*** bit out of range 0 -
FD_SETSIZE on fd_set ***` and the abort of the whole process. A socket gets the lowest
free number, and the process that builds a network holds two descriptors per node (the
pseudo-terminal pair of each node's shell, which Mininet keeps: 2,688 at k=16's 1,344
nodes; 1,224 at k=12), so without a reserve the socket of a call after the nodes
started lands above 1024 in any network of more than about 510 nodes.

`LowDescriptors` holds a few numbers below FD_SETSIZE (copies of /dev/null, close-on-exec)
taken while they are free, before the nodes start; `released()` closes them for the
length of one library call (so the library's sockets and files take them) and takes
them back after it. The lock keeps two of this process's calls from sharing the
reserve. Each release says how many numbers it freed: none when the reserve was taken
too late (no number below the limit was free) or another thread kept them; the caller
then runs the program (a fresh process, whose descriptors are few) instead.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

FD_SETSIZE = 1024  # glibc's fixed fd_set size (sys/select.h)


class LowDescriptors:
    """Up to `size` open descriptors numbered below `limit`, released around a call."""

    def __init__(self, size: int, limit: int = FD_SETSIZE) -> None:
        self.size = size
        self.limit = limit
        self.fds: list[int] = []
        self._anchor: int | None = None  # what the reserve's numbers are copies of
        self._lock = threading.Lock()

    def _copy(self) -> int:
        """The lowest free number, as a close-on-exec copy of /dev/null (one dup, a
        third of an open's cost)."""
        if self._anchor is None:
            self._anchor = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        return os.dup(self._anchor)

    def fill(self) -> int:
        """Top the reserve up from the lowest free numbers, keeping those below the
        limit; how many it holds."""
        while len(self.fds) < self.size:
            try:
                fd = self._copy()
            except OSError:  # the open-file limit
                break
            if fd >= self.limit:  # the lowest free number: none lower is free
                os.close(fd)
                break
            self.fds.append(fd)
        return len(self.fds)

    @contextlib.contextmanager
    def released(self) -> Iterator[int]:
        """The reserve closed inside the block (which gets how many numbers below the
        limit it freed), filled again after it; one block at a time in this process."""
        with self._lock:
            fds, self.fds = self.fds, []
            for fd in fds:
                os.close(fd)
            try:
                yield len(fds)
            finally:
                self.fill()

    def close(self) -> None:
        """Give the numbers back for good."""
        with self._lock:
            fds, self.fds = self.fds, []
            if self._anchor is not None:
                fds.append(self._anchor)
                self._anchor = None
            for fd in fds:
                os.close(fd)
