"""The reorder hold's decisions (`hosts.reordering: gro`), compiled from the kernel patch
and run in user space: what a receiver acknowledges while segments arrive out of order.

The header comes straight out of kernels/patches (the kernel builds the same text); a small
driver (kernels/test/reorder_hold_driver.c) keeps one socket's state.
"""

from __future__ import annotations

import pytest

from tests.conftest import build_patch_driver
from tests.support.line_driver import LineDriver

HOLD_PATCH = "0005-tcp-add-a-reorder-hold-for-sprayed-flows.patch"
PASS, START, START_ACK, ACK, WAIT, CANCEL = range(6)
MSS = 1000


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    return build_patch_driver(tmp_path_factory.mktemp("reorder_hold"), HOLD_PATCH,
                              ["net/ipv4/tcp_reorder_hold.h"], "reorder_hold_driver", [])


class Receiver(LineDriver):
    """A TCP receiver's sequence space with the hold's state in the driver: feeds segments
    (numbered by MSS) and records which ACKs go out and whether they carry SACKs."""

    def __init__(self, binary) -> None:
        super().__init__(binary)
        self.rcv_nxt = self.rcv_wup = 0
        self.ofo: set[int] = set()
        self.acks: list[tuple[int, bool]] = []  # (cumulative ACK, SACK blocks shown)

    def send_ack(self) -> None:
        shown = self.ask(f"hides {int(not self.ofo)} {self.rcv_nxt}") == "0" and bool(self.ofo)
        self.acks.append((self.rcv_nxt, shown))
        self.rcv_wup = self.rcv_nxt

    def segment(self, k: int) -> int:
        start = k * MSS
        if start == self.rcv_nxt:
            self.rcv_nxt += MSS
            while self.rcv_nxt in self.ofo:
                self.ofo.discard(self.rcv_nxt)
                self.rcv_nxt += MSS
        elif start > self.rcv_nxt:
            self.ofo.add(start)
        action = int(self.ask(f"seg {int(not self.ofo)} {self.rcv_nxt} {self.rcv_wup}"))
        if action in (START_ACK, ACK, PASS, CANCEL):
            self.send_ack()  # PASS/CANCEL: TCP without a hold, here ACKing every segment
        return action

    def expire(self) -> None:
        if self.ask("expire") == "1":
            self.send_ack()

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=5)


@pytest.fixture
def rx(driver):
    r = Receiver(driver)
    yield r
    r.close()


def test_in_order_segments_pass_untouched(rx):
    assert [rx.segment(k) for k in range(4)] == [PASS] * 4
    assert rx.acks == [(MSS, False), (2 * MSS, False), (3 * MSS, False), (4 * MSS, False)]


def test_reordering_shorter_than_the_hold_shows_no_sack(rx):
    # sprayed over paths of different delay: 0 2 3 1 5 6 4 7
    actions = [rx.segment(k) for k in (0, 2, 3, 1, 5, 6, 4, 7)]
    assert actions[1] == START      # 2 beyond the hole at 1: hold, send nothing
    assert actions[2] == WAIT       # 3 beyond the same hole: nothing goes out
    assert actions[3] == CANCEL     # 1 fills the hole: the cumulative ACK goes out
    assert not [ack for ack in rx.acks if ack[1]], rx.acks  # the sender never saw a SACK
    assert rx.acks[-1] == (8 * MSS, False)
    # no duplicate ACK either: every ACK advanced
    cumulative = [a for a, _ in rx.acks]
    assert cumulative == sorted(set(cumulative))


def test_a_hole_still_open_when_the_hold_ends_is_sacked(rx):
    for k in (0, 1, 3, 4):  # segment 2 lost
        rx.segment(k)
    assert not [ack for ack in rx.acks if ack[1]]
    rx.expire()
    assert rx.acks[-1] == (2 * MSS, True)  # one ACK with SACK blocks: loss detection starts
    assert rx.segment(5) == PASS           # from then on as without a hold
    assert rx.ask(f"hides 0 {2 * MSS}") == "0"
    rx.segment(2)                          # the retransmission fills the hole
    assert rx.rcv_nxt == 6 * MSS


def test_progress_behind_a_second_hole_starts_a_new_hold(rx):
    for k in (0, 2, 4):
        rx.segment(k)
    assert rx.segment(1) == START_ACK  # hole at 1 filled, hole at 3 remains: new hold
    assert rx.ask("state") == f"1 {3 * MSS}"
    assert rx.acks[-1] == (3 * MSS, False)
    assert rx.segment(5) == WAIT
    assert rx.segment(3) == CANCEL
    assert rx.acks[-1] == (6 * MSS, False)


def test_expiry_without_a_hold_sends_nothing(rx):
    assert rx.ask("expire") == "0"
    rx.segment(0)
    assert rx.ask("expire") == "0"
