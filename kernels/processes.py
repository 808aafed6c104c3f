"""The processes pathdiv starts, found again and stopped (lowest layer: the lab kernel's
boot and the emulated network both start processes).

Every process a lab starts (namespace shells, tools, the lab kernel's UML) carries
PATHDIV_OWNER=<pid of its pathdiv>, so `pathdiv clean` finds those whose owner died.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

OWNER_ENV = "PATHDIV_OWNER"


def restore_sigint() -> bool:
    """Make SIGINT stop this process again when it was started with SIGINT ignored.

    POSIX shells start `cmd &` from a script with SIGINT ignored, and an ignored signal
    stays ignored across exec: such a pathdiv would not stop on `kill -INT`, and neither
    would the servers and agents it starts. Restoring Python's handler also gives every
    process started afterwards the default disposition. Returns whether it was ignored.
    """
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        return False
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return True


def owned_processes() -> Iterator[tuple[int, int]]:
    """(pid, owner pid) of every process carrying a PATHDIV_OWNER marker."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        for item in env.split(b"\0"):
            if item.startswith(OWNER_ENV.encode() + b"="):
                with contextlib.suppress(ValueError):
                    yield int(entry.name), int(item.split(b"=", 1)[1])
                break


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(owner: int | None = None) -> list[int]:
    """Kill lab processes of `owner` (None: of every owner no longer alive)."""
    victims = [
        pid for pid, own in owned_processes()
        if (own == owner if owner is not None else not pid_alive(own))
        and pid != os.getpid()
    ]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and any(_exists(p) for p in victims):
            time.sleep(0.05)
    return victims


def _exists(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"
