"""The rbstrict scheduler's sending decision (rb without the stand-in), compiled from the
kernel patch and run in user space.

The header comes straight out of kernels/patches (patch 0023), on top of rb's allocation
(sched_rb_alloc.c, patch 0002); a small driver (kernels/test/rb_strict_driver.c) exposes
both decisions on stdin/stdout, so every test can set rbstrict beside rb.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from tests.conftest import build_patch_driver
from tests.support.line_driver import LineDriver

ALLOC_PATCH = "0002-mptcp-add-the-packet-allocation-of-the-rb-scheduler.patch"
STRICT_PATCH = "0023-mptcp-add-rbstrict-rb-without-the-stand-in.patch"


class Decide(LineDriver):
    """One allocation pattern inside a running driver process."""

    def compute(self, rtts: dict[int, int]) -> list[int]:
        pairs = " ".join(f"{i}:{r}" for i, r in rtts.items())
        return [int(x) for x in self.ask(f"compute {pairs}").split()]

    def strict(self, room: int) -> int:
        return int(self.ask(f"strict {room}"))

    def rb(self, room: int) -> int:
        return int(self.ask(f"next {room}"))

    def pos(self) -> int:
        return int(self.ask("pos"))

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=5)


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    return build_patch_driver(
        tmp_path_factory.mktemp("rb_strict"), STRICT_PATCH, ["net/mptcp/sched_rb_strict.h"],
        "rb_strict_driver", ["sched_rb_alloc.c"],
        earlier=[(ALLOC_PATCH, ["net/mptcp/sched_rb_alloc.c", "net/mptcp/sched_rb_alloc.h"])])


@pytest.fixture
def decide(driver) -> Iterator[Decide]:
    d = Decide(driver)
    yield d
    d.close()


def test_with_room_everywhere_it_sends_the_pattern_as_rb_does(decide):
    pattern = decide.compute({1: 1000, 2: 2000})  # RTTs 1:2, pattern B A A B A A ...
    assert [decide.strict(0b11) for _ in range(3 * len(pattern))] == pattern * 3
    decide.compute({1: 1000, 2: 2000})
    assert [decide.rb(0b11) for _ in range(3 * len(pattern))] == pattern * 3


def test_the_due_subflow_without_room_holds_the_packet_back(decide):
    decide.compute({1: 1000, 2: 1000, 3: 1000, 4: 1000})
    assert decide.strict(0b1111) == 0
    # subflow 1 is due but has no window: nothing is sent and the position stays ...
    assert decide.strict(0b1101) == -1
    assert decide.strict(0b1101) == -1
    assert decide.pos() == 1
    # ... until subflow 1 has room again; the round goes on in pattern order
    assert [decide.strict(0b1111) for _ in range(7)] == [1, 2, 3, 0, 1, 2, 3]


def test_rb_would_have_let_the_next_subflow_stand_in(decide):
    """The same situation under rb: the test above can tell the two apart."""
    decide.compute({1: 1000, 2: 1000, 3: 1000, 4: 1000})
    assert decide.rb(0b1111) == 0
    assert decide.rb(0b1101) == 2


@pytest.mark.parametrize("rtts", [{1: 1000, 2: 1000, 3: 1000, 4: 1000},
                                  {1: 1000, 2: 2000, 3: 3000, 4: 4000},
                                  {7: 500, 9: 1600}])
def test_whatever_the_windows_the_packets_follow_the_pattern_exactly(decide, rtts):
    rng = random.Random(11)
    pattern = decide.compute(rtts)
    every = (1 << len(rtts)) - 1
    sent = []
    for _ in range(2000):
        room = rng.randrange(every + 1)
        got = decide.strict(room)
        if got >= 0:
            assert room >> got & 1, (room, got)  # only a subflow with room sends
            sent.append(got)
        else:
            assert not room >> pattern[decide.pos()] & 1, room  # it held back for its own
    assert len(sent) > 500
    assert sent == (pattern * (len(sent) // len(pattern) + 1))[:len(sent)]
    # rb on the same windows strays from the pattern (its stand-ins)
    decide.compute(rtts)
    rng = random.Random(11)
    stood_in = [decide.rb(rng.randrange(every + 1)) for _ in range(2000)]
    stood_in = [s for s in stood_in if s >= 0]
    assert stood_in[:len(sent)] != (pattern * (len(sent) // len(pattern) + 1))[:len(sent)]


def test_no_pattern_sends_nothing(decide):
    assert decide.compute({}) == []
    assert decide.strict(0b1) == -1
