"""The grid a run's traffic starts on (experiments/traffic/clockgrid.py)."""

from __future__ import annotations

import threading
import time

from pathdiv.experiments.traffic.clockgrid import (
    GRID_NS,
    PR_GET_TIMERSLACK,
    _libc,
    align,
    exact_timers,
    next_point,
    sleep_until_ns,
)


def test_the_next_point_is_strictly_after_and_on_the_grid():
    assert next_point(0, 10) == 10
    assert next_point(9, 10) == 10
    assert next_point(10, 10) == 20  # exactly on a point: the next one
    assert next_point(GRID_NS * 7 + 1) == GRID_NS * 8
    # the grid is a whole number of 10 ms ticks, and of the timer wheel's 64-tick
    # granularity, so a run started on it sees every timer at the same distance
    assert GRID_NS % (64 * 10_000_000) == 0


def test_an_absolute_sleep_wakes_at_its_deadline_not_before():
    deadline = time.monotonic_ns() + 30_000_000
    sleep_until_ns(deadline)
    assert time.monotonic_ns() >= deadline
    sleep_until_ns(deadline - 10**9)  # in the past: returns at once


def test_exact_timers_hold_only_inside_the_block_and_only_in_its_thread():
    before = _libc.prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)
    seen = []
    inside, done = threading.Event(), threading.Event()

    def other() -> None:
        with exact_timers():
            seen.append(_libc.prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0))
            inside.set()
            done.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    assert inside.wait(5)
    seen.append(_libc.prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0))  # this thread, meanwhile
    done.set()
    thread.join()
    assert seen == [1, before]
    assert _libc.prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0) == before


def test_align_returns_the_grid_point_it_slept_to():
    now = time.monotonic_ns()
    period = 20_000_000
    point = align(period)
    assert point % period == 0 and now < point <= time.monotonic_ns()
