"""Juggler's decisions (`hosts.reordering: juggler`), compiled from the kernel patch and run
in user space: which segments a receiver holds at the entry of GRO, and in which order and
when they go up to TCP.

The C file comes straight out of kernels/patches (the kernel builds the same text); a small
driver (kernels/test/juggler_driver.c) exposes it on stdin/stdout. `Receiver` composes the
calls as net/core/juggler.c does for one flow (make room, arrive, hand up what is due).
"""

from __future__ import annotations

import random

import pytest

from tests.conftest import build_patch_driver
from tests.support.line_driver import LineDriver

JUGGLER_PATCH = "0016-net-add-Juggler-a-reordering-buffer-at-the-entry-of-GRO.patch"
PASS, HELD, HELD_OOO = range(3)
FOUND, FREE, EVICT, EVICT_HELD = range(4)
NEVER = 2**64 - 1
MSS = 1000
US = 1000  # ns


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    return build_patch_driver(tmp_path_factory.mktemp("juggler"), JUGGLER_PATCH,
                              ["net/core/juggler_queue.h", "net/core/juggler_queue.c"],
                              "juggler_driver", ["juggler_queue.c"])


class Driver(LineDriver):
    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=5)


class Receiver:
    """One flow at a receiver: segments numbered k (sequence k * MSS + base) arrive at
    times in µs; `up` records what went up to TCP, in order, with the time."""

    def __init__(self, drv: Driver, inseq_us: int = 0, ooo_us: int = 1000,
                 base: int = 0, flow: int = 0) -> None:
        self.drv, self.flow, self.base = drv, flow, base
        self.up: list[tuple[int, int]] = []  # (packet, time µs)
        self.held_us: list[float] = []
        self.passed: list[int] = []
        self.started = False
        drv.ask(f"times {inseq_us * US} {ooo_us * US}")

    def seq(self, k: int) -> int:
        return (self.base + k * MSS) % 2**32

    def settle(self, t_us: int) -> int:
        """Hand up what is due at t; the next deadline in µs (NEVER when none)."""
        if not self.started:
            return NEVER
        while True:
            count, deadline = map(int, self.drv.ask(f"due {self.flow} {t_us * US}").split())
            if not count:
                return deadline if deadline == NEVER else deadline // US
            for _ in range(count):
                pkt, held = map(int, self.drv.ask(f"pop {self.flow} {t_us * US}").split())
                self.up.append((pkt, t_us))
                self.held_us.append(held / US)

    def arrive(self, k: int, t_us: int, length: int = MSS, fin: bool = False,
               pkt: int | None = None) -> int:
        if not self.started:
            self.drv.ask(f"start {self.flow} {self.seq(k)} {t_us * US}")
            self.started = True
        _, held, _ = self.state()
        if held >= MAX_HELD:  # juggler_full(): everything goes up first
            self.flush_all(t_us)
        pkt = k if pkt is None else pkt
        result = int(self.drv.ask(f"arrive {self.flow} {self.seq(k)} {length} {int(fin)} "
                                  f"{pkt} {t_us * US}"))
        if result == PASS:
            self.up.append((pkt, t_us))
            self.passed.append(pkt)
        else:
            self.settle(t_us)
        return result

    def advance(self, t_us: int) -> None:
        """Let time pass up to t as the kernel's timer does: hand up at each deadline."""
        deadline = self.next_deadline()
        while deadline != NEVER and deadline <= t_us:
            deadline = self.settle(deadline)

    def next_deadline(self) -> int:
        if not self.started:
            return NEVER
        _, deadline = map(int, self.drv.ask(f"due {self.flow} 0").split())
        return deadline if deadline == NEVER else deadline // US

    def flush_all(self, t_us: int) -> None:
        while self.state()[1]:
            pkt, held = map(int, self.drv.ask(f"pop {self.flow} {t_us * US}").split())
            self.up.append((pkt, t_us))
            self.held_us.append(held / US)

    def state(self) -> tuple[int, int, int]:
        a, b, c = map(int, self.drv.ask(f"state {self.flow}").split())
        return a, b, c

    def order(self) -> list[int]:
        return [pkt for pkt, _ in self.up]


MAX_HELD = 120


@pytest.fixture
def drv(driver):
    d = Driver(driver)
    yield d
    d.close()


def test_the_bounds_are_the_documented_ones(drv):
    assert drv.ask("max") == f"{MAX_HELD} 64"


def test_in_order_segments_go_up_at_once_without_an_in_sequence_timeout(drv):
    rx = Receiver(drv, inseq_us=0)
    assert [rx.arrive(k, 10 * k) for k in range(5)] == [HELD] * 5
    assert rx.up == [(k, 10 * k) for k in range(5)]
    assert rx.held_us == [0.0] * 5


def test_a_sprayed_flow_goes_up_in_order(drv):
    # over two paths of different delay: 0 2 3 1 5 6 4 7 arrive, 0..7 go up
    rx = Receiver(drv, ooo_us=1000)
    arrivals = (0, 2, 3, 1, 5, 6, 4, 7)
    results = [rx.arrive(k, 100 * i) for i, k in enumerate(arrivals)]
    assert results == [HELD, HELD_OOO, HELD_OOO, HELD, HELD_OOO, HELD_OOO, HELD, HELD]
    assert rx.order() == list(range(8))
    # 2 and 3 waited for 1 (from 100 and 200 µs to 300 µs), 5 and 6 for 4
    assert dict(zip(rx.order(), rx.held_us, strict=True))[2] == 200.0
    assert max(rx.held_us) == 200.0
    assert rx.state() == (8 * MSS, 0, 1)


def test_a_lost_segment_releases_the_rest_after_the_out_of_order_timeout(drv):
    rx = Receiver(drv, ooo_us=500)
    for i, k in enumerate((0, 1, 3, 4)):  # 2 is lost
        rx.arrive(k, 100 * i)
    assert rx.order() == [0, 1]
    # 3 has waited since 200 µs: nothing goes up before 700 µs
    assert rx.settle(699) == 700
    assert rx.order() == [0, 1]
    rx.settle(700)
    assert rx.order() == [0, 1, 3, 4]
    assert rx.held_us[-2:] == [500.0, 400.0]
    # the hole is TCP's now: the retransmission is old data and goes up at once
    assert rx.arrive(2, 900) == PASS
    assert rx.order() == [0, 1, 3, 4, 2]
    assert rx.state() == (5 * MSS, 0, 1)


def test_no_segment_waits_longer_than_the_out_of_order_timeout(drv):
    # random spraying over four paths whose delays differ by up to 300 µs, every 40th
    # segment lost: with a 500 µs timeout every segment that arrives goes up in order
    # (losses aside) and none waits longer than 500 µs. (The flow starts with the
    # first segment it sees: segment 0 takes the fastest path.)
    rng = random.Random(45)
    rx = Receiver(drv, ooo_us=500)
    delays = (0, 100, 200, 300)
    sent = [k for k in range(400) if k % 40 != 39]
    arrivals = sorted((10 * k + (rng.choice(delays) if k else 0), k) for k in sent)
    for t, k in arrivals:
        rx.advance(t)
        rx.arrive(k, t)
    rx.advance(arrivals[-1][0] + 1000)
    assert sorted(rx.order()) == sent
    assert rx.order() == sent  # losses are the only holes: no segment went up early
    assert max(rx.held_us) <= 500.0
    assert rx.passed == []


def test_a_timed_out_hole_releases_only_up_to_the_next_hole(drv):
    rx = Receiver(drv, ooo_us=500)
    rx.arrive(0, 0)
    rx.arrive(2, 100)  # 1 is lost
    rx.arrive(3, 200)
    rx.arrive(5, 550)  # 4 is only late: it comes at 700 µs
    assert drv.ask("skips 0") == "1"  # the next hand-over gives up the hole at 1
    rx.settle(600)     # 2 waited 500 µs: 1 is given up, 2 and 3 go up, 5 waits for 4
    assert drv.ask("skips 0") == "1"  # 5 lies beyond the next hole, at 4 ...
    assert rx.settle(650) == 1050     # ... which has time until 1050 µs
    assert rx.order() == [0, 2, 3]
    rx.arrive(4, 700)
    assert drv.ask("skips 0") == "0"
    assert rx.order() == [0, 2, 3, 4, 5]


def test_reordering_longer_than_the_timeout_reaches_tcp_late_but_bounded(drv):
    rx = Receiver(drv, ooo_us=200)
    rx.arrive(0, 0)
    rx.arrive(2, 10)
    rx.settle(210)          # 1 did not come within 200 µs: 2 goes up
    assert rx.order() == [0, 2]
    assert rx.arrive(1, 300) == PASS  # late: TCP sees this reordering
    assert rx.order() == [0, 2, 1]


def test_in_sequence_timeout_batches_in_order_segments(drv):
    rx = Receiver(drv, inseq_us=100, ooo_us=1000)
    rx.arrive(0, 0)
    rx.arrive(1, 30)
    assert rx.up == []
    assert rx.settle(60) == 100  # the oldest in-order segment is due at 100 µs
    rx.settle(100)
    assert rx.up == [(0, 100), (1, 100)]
    assert rx.held_us == [100.0, 70.0]


def test_a_fin_goes_up_at_once_when_in_sequence(drv):
    rx = Receiver(drv, inseq_us=100, ooo_us=1000)
    rx.arrive(0, 0)
    rx.arrive(2, 10, length=0, fin=True)  # the FIN overtook segment 1
    assert rx.up == []
    rx.arrive(1, 20)
    assert rx.order() == [0, 1, 2] and {t for _, t in rx.up} == {20}
    assert rx.state() == (2 * MSS + 1, 0, 1)  # the FIN takes one sequence number


def test_a_run_of_64_kilobytes_goes_up_without_waiting(drv):
    rx = Receiver(drv, inseq_us=10_000, ooo_us=20_000)
    for k in range(65):
        rx.arrive(k, k)
    assert rx.order() == []  # 65,000 bytes: below GRO's largest merge
    rx.arrive(65, 65)
    assert rx.order() == list(range(66))


def test_a_duplicate_of_a_held_segment_goes_up_after_it(drv):
    rx = Receiver(drv, ooo_us=1000)
    rx.arrive(0, 0)
    rx.arrive(2, 10, pkt=20)
    rx.arrive(2, 20, pkt=21)  # the sender retransmitted 2 while it was held
    rx.arrive(1, 30)
    assert rx.order() == [0, 1, 20, 21]


def test_a_new_flow_starts_at_its_earliest_segment_within_the_in_sequence_time(drv):
    rx = Receiver(drv, inseq_us=100, ooo_us=1000)
    rx.arrive(2, 0)          # first segment seen is 2 ...
    rx.arrive(1, 40)         # ... 1 comes before anything went up: the flow starts at 1
    rx.arrive(0, 60)
    rx.settle(100)
    assert rx.order() == [0, 1, 2]


def test_sequence_numbers_wrap(drv):
    rx = Receiver(drv, ooo_us=1000, base=2**32 - 2 * MSS)
    for i, k in enumerate((0, 3, 2, 1, 4)):
        rx.arrive(k, i)
    assert rx.order() == [0, 1, 2, 3, 4]
    assert rx.state()[0] == 3 * MSS


def test_a_full_queue_goes_up_entirely(drv):
    rx = Receiver(drv, ooo_us=1_000_000)
    rx.arrive(0, 0)
    for k in range(2, 1 + MAX_HELD):  # segment 1 missing
        rx.arrive(k, k)
    assert rx.order() == [0] and rx.state()[1] == MAX_HELD - 1
    rx.arrive(1 + MAX_HELD, 500)  # the flow holds its most: all of it goes up
    assert rx.order() == [0, *range(2, 2 + MAX_HELD)]
    assert rx.state()[1] == 0
    assert rx.arrive(1, 600) == PASS


def test_the_deadline_is_the_earliest_of_both_timeouts(drv):
    rx = Receiver(drv, inseq_us=300, ooo_us=500)
    rx.arrive(0, 0)   # in sequence: due at 300
    rx.arrive(2, 100)  # beyond the hole at 1: due at 600
    assert rx.settle(200) == 300
    assert rx.settle(300) == 600  # 0 went up; 2 still waits for 1
    assert rx.order() == [0]


# ---- the table of flows ----------------------------------------------------------------

def start(drv: Driver, flow: int, t_us: int, held: int = 0) -> None:
    drv.ask(f"start {flow} 0 {t_us * US}")
    for k in range(held):
        drv.ask(f"arrive {flow} {(k + 2) * MSS} {MSS} 0 {k} {t_us * US}")  # beyond a hole


def slot(drv: Driver, n: int, key: int, t_us: int, idle_us: int = 100_000) -> tuple[int, int]:
    i, kind = map(int, drv.ask(f"slot {n} {key} {t_us * US} {idle_us * US}").split())
    return i, kind


def test_a_known_flow_is_found_and_a_new_one_takes_a_free_slot(drv):
    start(drv, 0, 0)
    start(drv, 2, 0)
    assert slot(drv, 4, 2, 10) == (2, FOUND)
    assert slot(drv, 4, 7, 10) == (1, FREE)


def test_a_full_table_evicts_the_least_recently_used_flow_holding_nothing(drv):
    start(drv, 0, 30)
    start(drv, 1, 10, held=1)  # older, but holds a segment
    start(drv, 2, 20)
    assert slot(drv, 3, 9, 40) == (2, EVICT)


def test_when_every_flow_holds_packets_the_least_recently_used_is_evicted(drv):
    start(drv, 0, 30, held=1)
    start(drv, 1, 10, held=2)
    assert slot(drv, 2, 9, 40) == (1, EVICT_HELD)


def test_an_idle_flow_is_forgotten_rather_than_evicted(drv):
    start(drv, 0, 0)
    start(drv, 1, 50)
    # flow 0 has held nothing for 100 ms: its slot is free, not an eviction
    assert slot(drv, 2, 9, 100_000, idle_us=100_000) == (0, FREE)
    assert slot(drv, 2, 9, 99_999, idle_us=100_000) == (0, EVICT)


def test_flows_beyond_the_configured_number_are_not_considered(drv):
    start(drv, 0, 0)
    start(drv, 1, 0)
    assert slot(drv, 1, 1, 10) == (0, EVICT)  # net.core.juggler_flows = 1
