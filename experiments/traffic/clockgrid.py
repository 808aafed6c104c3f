"""Start every run's traffic at the same phase of the guest's clock (virtual clock only).

On the lab kernel's virtual clock a run is deterministic given the moment it starts,
but not independent of that moment: the kernel's timers are not all relative to it.
Its jiffies tick every 10 ms (HZ=100) at fixed points of the clock, and a timer of the
timer wheel (TCP's retransmission, delayed-ACK and probe timers, MPTCP's) fires on a
tick, rounded to a granularity that grows with its timeout (1 tick below 0.64 s, 8
ticks below 5.12 s, 64 below 41 s). Two runs that do the same things from different
starting points (a run that built its network first, one that reused it) therefore
see some timers fire at different distances from their traffic, and the order of two
packets at a queue can flip.

So before its captures start, a run sleeps until the next multiple of GRID_S of the
guest's CLOCK_MONOTONIC (512 ticks: a multiple of every granularity of the timers a run
uses). On the virtual clock idle time is skipped, so the wait costs no wall time. The
sleep is absolute (clock_nanosleep with TIMER_ABSTIME) with the thread's timer slack set
to 1 ns for it: with the default 50 us slack the wake-up would land anywhere in that
window, wherever another timer happened to fire. The guest's heartbeat sleeps to
multiples of a divisor of GRID_S the same way, so it too wakes at the same distances
from every run's start.

The grid point is where a run's preparation starts (captures, the fidelity monitor,
servers), not yet its traffic: what those processes do costs guest time, and not the
same amount in every run (User-Mode Linux charges 256 ns of guest time per clock read
in process context, and a run's arguments, files and network, built or reused, change
how often they read it). So the traffic has an instant of its own: the first
round's fetches sleep until FIRST_ROUND_NS after the grid point, each later round's
until ROUND_GAP_NS after the previous round's last transfer ended (`start_at`, in the
fetch process, after its own start-up), and the monitor samples at multiples of its
interval from the grid point. Within a round the i-th fetch wakes i ns after the round's
instant, so the fetches always wake in the same order (equal timers wake in the order
they were set, which is the order the processes happened to finish starting); in TCP
runs the servers and fetches (and bmv2's switch threads) run under SCHED_FIFO
(transfer.py, `first_in_first_out`; rounds.py, `at_instant`), so they also run in that
order. docs/decisions/0008-network-reuse.md has the figures.

This module uses only the standard library: `transfer.py fetch`, run by path, imports
it as its sibling.

`next_point` is pure; `sleep_until_ns`, `start_at`, `sleep_to_next` and `align` act.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import time
from collections.abc import Iterator

GRID_S = 5.12  # 512 jiffies at HZ=100: what each run's traffic starts on
GRID_NS = 5_120_000_000
FIRST_ROUND_NS = 1_280_000_000  # grid point -> first round (the preparation takes ~ms)
ROUND_GAP_NS = 100_000_000  # a round's last transfer's end -> the next round
CLOCK_MONOTONIC = 1
TIMER_ABSTIME = 1
PR_SET_TIMERSLACK, PR_GET_TIMERSLACK = 29, 30


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def next_point(now_ns: int, period_ns: int = GRID_NS) -> int:
    """The first multiple of `period_ns` strictly after `now_ns`."""
    return (now_ns // period_ns + 1) * period_ns


@contextlib.contextmanager
def exact_timers() -> Iterator[None]:
    """This thread's timer slack at 1 ns inside the block, restored after."""
    old = _libc.prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)
    _libc.prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    try:
        yield
    finally:
        if old > 0:
            _libc.prctl(PR_SET_TIMERSLACK, old, 0, 0, 0)


def sleep_until_ns(deadline_ns: int) -> None:
    """Sleep until CLOCK_MONOTONIC reads `deadline_ns` (absolute; signals resumed)."""
    spec = _Timespec(deadline_ns // 1_000_000_000, deadline_ns % 1_000_000_000)
    while True:
        err = _libc.clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, ctypes.byref(spec), None)
        if err == 0:
            return
        if err != 4:  # EINTR: sleep again to the same deadline
            raise OSError(err, f"clock_nanosleep failed ({err})")


def start_at(deadline_ns: int) -> int:
    """Sleep, with exact timers, until CLOCK_MONOTONIC reads `deadline_ns`; return how
    late the call came (ns past the deadline; 0 when it came before it)."""
    with exact_timers():
        late = time.monotonic_ns() - deadline_ns
        if late < 0:
            sleep_until_ns(deadline_ns)
    return max(0, late)


def sleep_to_next(origin_ns: int, step_ns: int) -> int:
    """Sleep, with exact timers, to the first instant origin_ns + k * step_ns after now;
    return it (the fidelity monitor's samples, on the run's grid)."""
    target = origin_ns + next_point(time.monotonic_ns() - origin_ns, step_ns)
    start_at(target)
    return target


def align(period_ns: int = GRID_NS) -> int:
    """Sleep, with exact timers, to the next multiple of `period_ns`; return it (ns)."""
    with exact_timers():
        target = next_point(time.monotonic_ns(), period_ns)
        sleep_until_ns(target)
    return target
