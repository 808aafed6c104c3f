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
