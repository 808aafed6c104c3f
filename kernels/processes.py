"""The processes pathdiv starts, found again and stopped (lowest layer: the lab kernel's
boot and the emulated network both start processes), and the signals that stop pathdiv.

Every process a lab starts (namespace shells, tools, the lab kernel's UML) carries
PATHDIV_OWNER=<pid>:<start> of its pathdiv (the start time in clock ticks since boot
tells a reused pid apart), so `pathdiv clean` finds those whose owner died.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

OWNER_ENV = "PATHDIV_OWNER"
SCRATCH_PREFIX = "pathdiv-"
SCRATCH_MARK = ".pathdiv-owner"


def process_start(pid: int) -> int | None:
    """The start time of process `pid` in clock ticks since boot (None when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
    return int(fields[19]) if len(fields) > 19 else None


def owner_mark(pid: int | None = None) -> str:
    """`<pid>:<start time>` of process `pid` (this one by default): who owns a network,
    a boot of the lab kernel or a host setting."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{process_start(pid) or 0}"


def parse_owner(mark: str) -> tuple[int, int | None] | None:
    """(pid, start time) from an owner mark; a bare pid (older pathdiv) has no start."""
    pid, _, start = mark.strip().partition(":")
    try:
        return int(pid), (int(start) if start else None)
    except ValueError:
        return None


def owner_alive(mark: str) -> bool:
    """Whether the process an owner mark names still runs (the same process, not a later
    one given its pid)."""
    owner = parse_owner(mark)
    if owner is None:
        return False
    started = process_start(owner[0])
    return started is not None and owner[1] in (None, started)


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


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
Handlers = dict[int, object]


def stop_on_signals() -> Handlers:
    """SIGINT (Ctrl-C), SIGTERM (`kill`, `timeout`, Slurm) and SIGHUP (a closed terminal
    or ssh session) all stop this process the same way: KeyboardInterrupt, raised once.
    From then on the three are ignored, so the teardown that follows (`finally`, `with`)
    runs to its end whatever else arrives. Returns the previous handlers, for
    :func:`restore_handlers`."""
    def interrupt(signum: int, frame: object) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous: Handlers = {}
    for sig in STOP_SIGNALS:
        previous[sig] = signal.getsignal(sig)
        signal.signal(sig, interrupt)
    return previous


def restore_handlers(previous: Handlers) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)  # type: ignore[arg-type]


def owner_marks() -> Iterator[tuple[int, str]]:
    """(pid, owner mark) of every process carrying a PATHDIV_OWNER marker."""
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
                yield int(entry.name), item.split(b"=", 1)[1].decode(errors="replace")
                break


def owned_processes() -> Iterator[tuple[int, int]]:
    """(pid, owner pid) of every process carrying a PATHDIV_OWNER marker."""
    for pid, mark in owner_marks():
        owner = parse_owner(mark)
        if owner is not None:
            yield pid, owner[0]


def sweep(owner: int | None = None) -> list[int]:
    """Kill lab processes of `owner` (None: of every owner no longer alive, a reused pid
    included: the mark's start time differs)."""
    def victim(mark: str) -> bool:
        if owner is None:
            return not owner_alive(mark)
        parsed = parse_owner(mark)
        return parsed is not None and parsed[0] == owner

    victims = [pid for pid, mark in owner_marks() if victim(mark) and pid != os.getpid()]
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


def scratch_folder(kind: str) -> Path:
    """A new private folder `pathdiv-<kind>-*` under the temp dir, holding this process's
    owner mark in SCRATCH_MARK: its owner removes it when done, and `pathdiv clean`
    removes it once the owner is gone (SIGKILL leaves no `finally`)."""
    path = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{kind}-"))
    (path / SCRATCH_MARK).write_text(owner_mark())
    return path


def remove_scratch(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def scratch(kind: str) -> Iterator[Path]:
    """A scratch folder for the length of a `with` block (see :func:`scratch_folder`)."""
    path = scratch_folder(kind)
    try:
        yield path
    finally:
        remove_scratch(path)


def orphaned_scratch(root: Path | None = None) -> list[Path]:
    """Scratch folders under `root` (the temp dir) whose owner is gone. Only folders
    carrying pathdiv's owner mark are candidates; links are never followed."""
    base = Path(tempfile.gettempdir()) if root is None else root
    found = []
    for entry in sorted(base.glob(f"{SCRATCH_PREFIX}*")):
        mark = entry / SCRATCH_MARK
        if entry.is_symlink() or not entry.is_dir() or mark.is_symlink() or not mark.is_file():
            continue
        try:
            owner = mark.read_text(errors="replace")[:64]
        except OSError:
            continue
        if not owner_alive(owner):
            found.append(entry)
    return found
