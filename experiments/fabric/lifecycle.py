"""One lifecycle for everything pathdiv starts and must tear down (a network, a switch)."""

from __future__ import annotations

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
