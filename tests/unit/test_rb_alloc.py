"""The rb scheduler's allocation arithmetic, compiled from the kernel patch and run in user space.

The C file comes straight out of kernels/patches (the kernel builds the same text); a small
driver (kernels/test/rb_alloc_driver.c) exposes it on stdin/stdout.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import build_patch_driver
from tests.support.line_driver import LineDriver

ALLOC_PATCH = "0002-mptcp-add-the-packet-allocation-of-the-rb-scheduler.patch"
ALL = (1 << 16) - 1


class Alloc(LineDriver):
    """One allocation state inside a running driver process."""

    def params(self, resolution: int = 4, equal_pct: int = 20, refresh_srtts: int = 4,
               default_rtt_us: int = 1000) -> None:
        self.ask(f"params {resolution} {equal_pct} {refresh_srtts} {default_rtt_us}")

    def compute(self, rtts: dict[int, int], now_us: int = 0) -> list[int]:
        pairs = " ".join(f"{i}:{r}" for i, r in rtts.items())
        return [int(x) for x in self.ask(f"compute {now_us} {pairs}").split()]

    def equal(self, ids: list[int], now_us: int = 0) -> list[int]:
        return [int(x) for x in self.ask(f"equal {now_us} {' '.join(map(str, ids))}").split()]

    def stale(self, ids: list[int], now_us: int) -> bool:
        return self.ask(f"stale {now_us} {' '.join(map(str, ids))}") == "1"

    def next(self, room: int = ALL, queue: int = ALL) -> int:
        return int(self.ask(f"next {room} {queue}"))

    def sends(self, n: int, room: int = ALL) -> list[int]:
        return [self.next(room) for _ in range(n)]

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=5)


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> Path:
    return build_patch_driver(tmp_path_factory.mktemp("rb_alloc"), ALLOC_PATCH,
                              ["net/mptcp/sched_rb_alloc.c", "net/mptcp/sched_rb_alloc.h"],
                              "rb_alloc_driver", ["sched_rb_alloc.c"])


@pytest.fixture
def alloc(driver):
    a = Alloc(driver)
    a.params()
    yield a
    a.close()


def runs(seq: list[int]) -> list[int]:
    """Lengths of runs of one subflow in a send sequence."""
    out, n = [], 1
    for a, b in itertools.pairwise(seq):
        if a == b:
            n += 1
        else:
            out.append(n)
            n = 1
    return [*out, n]


def test_equal_rtts_alternate_strictly(alloc):
    alloc.compute({10: 2000, 11: 2000})
    assert alloc.sends(12) == [0, 1] * 6


def test_nearly_equal_rtts_still_alternate(alloc):
    alloc.compute({1: 1000, 2: 1100, 3: 950, 4: 1040})
    assert alloc.sends(16) == [0, 1, 2, 3] * 4
    alloc.params(equal_pct=0)  # without the tolerance the noise shows in the shares
    alloc.compute({1: 1000, 2: 1100, 3: 950, 4: 1040})
    assert Counter(alloc.sends(15)) == {0: 4, 1: 3, 2: 4, 3: 4}


def test_refresh_with_unchanged_pattern_keeps_the_position(alloc):
    alloc.compute({1: 1000, 2: 1000, 3: 1000}, now_us=0)
    assert alloc.sends(2) == [0, 1]
    alloc.compute({1: 1000, 2: 1010, 3: 990}, now_us=50_000)
    assert alloc.sends(4) == [2, 0, 1, 2]


def test_rtt_ratio_1_to_2_gives_shares_2_to_1_interleaved(alloc):
    alloc.compute({1: 1000, 2: 2000})
    seq = alloc.sends(60)
    assert Counter(seq) == {0: 40, 1: 20}
    # consecutive sequence numbers are interleaved: the fast subflow sends at most two in
    # a row, and the slow one's packets are evenly spread (every third)
    assert max(runs(seq)) <= 2
    slow = [i for i, s in enumerate(seq) if s == 1]
    assert {b - a for a, b in itertools.pairwise(slow)} == {3}


def test_four_subflows_mixed_rtts_follow_inverse_rtt(alloc):
    rtts = {1: 1000, 2: 2000, 3: 3000, 4: 4000}
    alloc.params(resolution=8)
    pattern = alloc.compute(rtts)
    seq = alloc.sends(len(pattern) * 10)
    inv = [1 / r for r in rtts.values()]
    for i, want in enumerate(x / sum(inv) for x in inv):
        assert abs(seq.count(i) / len(seq) - want) < 1 / 16, (i, seq.count(i), want)
    # the slowest subflow's packets are evenly spread through the sequence space
    pos = [k for k, s in enumerate(seq) if s == 3]
    gaps = {b - a for a, b in itertools.pairwise(pos)}
    assert max(gaps) - min(gaps) <= 1, gaps
    # no subflow holds more than the fast one's fair run
    assert max(runs(seq)) <= 3


def test_no_rtt_sample_uses_the_default_rtt(alloc):
    alloc.params(default_rtt_us=2000)
    alloc.compute({1: 1000, 2: 0})
    assert Counter(alloc.sends(30)) == {0: 20, 1: 10}


def test_subflow_leaving_and_joining(alloc):
    ids = [5, 6, 7]
    alloc.equal(ids, now_us=0)
    assert not alloc.stale(ids, now_us=10**9)  # equal shares never age
    assert alloc.stale([5, 7], now_us=1)  # subflow 6 left
    alloc.equal([5, 7], now_us=1)
    assert alloc.sends(6) == [0, 1] * 3
    assert alloc.stale([5, 7, 8], now_us=2)  # subflow 8 joined
    alloc.equal([5, 7, 8], now_us=2)
    assert alloc.sends(6) == [0, 1, 2] * 2


def test_pattern_is_refreshed_after_some_srtts(alloc):
    alloc.params(refresh_srtts=4)
    alloc.compute({1: 1000, 2: 3000}, now_us=100)
    assert not alloc.stale([1, 2], now_us=100 + 4 * 3000 - 1)
    assert alloc.stale([1, 2], now_us=100 + 4 * 3000)


def test_full_subflow_is_skipped_for_the_next_in_allocation_order(alloc):
    alloc.equal([1, 2, 3, 4])
    assert alloc.next() == 0
    # subflow 1 is due but has no window: the next in pattern order (2) takes the packet
    # and gives subflow 1 its slot, so 2 does not send twice in a row; the next round
    # starts from the computed pattern again
    assert alloc.next(room=0b1101) == 2
    assert alloc.sends(6) == [1, 3, 0, 1, 2, 3]


def test_substitutions_keep_the_shares_and_avoid_repeats(alloc):
    rng = random.Random(7)
    alloc.equal([1, 2, 3, 4])
    seq = []
    for _ in range(400):
        room = rng.randrange(1, 16)  # at least one subflow has room
        seq.append(alloc.next(room))
    counts = Counter(seq)
    assert max(counts.values()) - min(counts.values()) <= 60, counts
    repeats = sum(a == b for a, b in itertools.pairwise(seq))
    assert repeats < 0.25 * len(seq), repeats


def test_never_returns_a_subflow_without_window_when_another_has_one(alloc):
    rng = random.Random(4)
    alloc.compute({1: 1000, 2: 2000, 3: 1500, 4: 4000})
    for _ in range(400):
        room, queue = rng.randrange(16), rng.randrange(16)
        got = alloc.next(room, queue)
        if room:
            assert room >> got & 1, (room, got)
        elif queue:
            assert queue >> got & 1, (queue, got)
        else:
            assert got == -1


def test_no_subflows_gives_nothing(alloc):
    assert alloc.compute({}) == []
    assert alloc.next() == -1
