"""One lifecycle for everything pathdiv starts and must tear down (a network, a switch)."""

from __future__ import annotations

import signal
from typing import Self


class StartStop:
    """`with X(...) as x:` runs `start()`, and `stop()` on exit or when start fails.

    Subclasses implement `start` and an idempotent, never-raising `stop`; a start that
    fails half-way (or Ctrl-C during it) still tears down what it built.
    """

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


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
