"""Processes in the network's nodes: starting node shells under a small descriptor
limit, waiting for a process to say it is ready, and ending one (terminate, then kill).
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

from pathdiv.experiments.running import NetworkError


def shell_fd_limit(soft: int, highest_fd: int, nodes: int) -> int | None:
    """The open-file limit to start `nodes` node shells under, or None to keep `soft`.

    Mininet raises the soft limit to 16384, and `mnexec -c`, which starts every node's
    shell, closes each descriptor number below the limit: 16384 system calls per node,
    about 1 s in the lab kernel (User-Mode Linux; ~0.2 s per 16384 on the host kernel).
    A shell needs only the descriptors this process holds while the shells start (each
    shell adds a pty pair here), so the limit is that with room to spare, at least 1024.
    """
    need = max(1024, highest_fd + 1 + 4 * nodes + 64)
    return need if need < soft else None


@contextlib.contextmanager
def few_descriptors(nodes: int) -> Iterator[None]:
    """Start node shells under `shell_fd_limit` (they and their commands inherit it; the
    hard limit is kept, so a command may raise it), then restore this process's limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    highest = max((int(fd) for fd in os.listdir("/proc/self/fd") if fd.isdigit()),
                  default=2)
    limit = shell_fd_limit(soft, highest, nodes)
    if limit is not None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        yield
    finally:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def wait_for_line(
    proc: subprocess.Popen[str], stream: Any, marker: str, timeout_s: float, what: str
) -> str:
    """Read `stream` until a line containing `marker`; fail with what was read.

    Waits with poll(), not select(): a k=8 network holds more than 1024 descriptors
    (a capture per link, a server per host), beyond select()'s FD_SETSIZE."""
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    poller = select.poll()
    poller.register(stream, select.POLLIN)
    while time.monotonic() < deadline:
        ready = poller.poll(max(0.0, deadline - time.monotonic()) * 1000)
        if not ready:
            break
        line = stream.readline()
        if not line:
            break
        seen.append(line.rstrip())
        if marker in line:
            return str(line)
    rc = proc.poll()
    raise NetworkError(f"{what} did not become ready within {timeout_s:g} s"
                       f"{'' if rc is None else f' (exited {rc})'}; it said: "
                       f"{' | '.join(seen[-5:]) or 'nothing'}")


def stop_reading(proc: subprocess.Popen[str], timeout_s: float) -> str:
    """SIGTERM to a capture, then what it printed on stderr (killed after timeout_s).
    SIGTERM, not SIGINT: both programs flush their files on either, and a script's
    `pathdiv ... &` starts them with SIGINT ignored."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err or ""


def terminate(proc: subprocess.Popen[Any]) -> None:
    """End `proc`: SIGTERM, and SIGKILL when it has not ended 3 s later."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=3)
