"""minrtt's receive-buffer optimisation (MPTCP v0.94's, patch 0025): its three decisions,
compiled from the kernel patch and run in user space.

When the peer's connection-level window blocks new data, the slower subflows that carried
the data at the window's left edge have their congestion window halved, at most once per
smoothed RTT of the fast subflow, and that data is sent again on the fast subflow when a
carrier can hardly deliver it: a window of 4 packets or less, or a smoothed RTT more than
4 times the fast one's.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import build_patch_driver
from tests.support.line_driver import LineDriver

PATCH = "0025-mptcp-minrtt-resends-and-penalises-when-the-window-b.patch"


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    return build_patch_driver(tmp_path_factory.mktemp("rbuf_opti"), PATCH,
                              ["net/mptcp/sched_rbuf_opti.h"], "rbuf_opti_driver", [])


@pytest.fixture
def driver(binary) -> Iterator[LineDriver]:
    d = LineDriver(binary)
    yield d
    d.close()


def may(d: LineDriver, now: int, last: int, fast_srtt: int) -> bool:
    return d.ask(f"may {now} {last} {fast_srtt}") == "1"


def halve(d: LineDriver, cwnd: int, ssthresh: int) -> tuple[int, int]:
    new_cwnd, new_ssthresh = d.ask(f"halve {cwnd} {ssthresh}").split()
    return int(new_cwnd), int(new_ssthresh)


def resend(d: LineDriver, cwnd: int, srtt: int, fast_srtt: int) -> bool:
    return d.ask(f"resend {cwnd} {srtt} {fast_srtt}") == "1"


def test_one_penalisation_per_round_trip_of_the_fast_subflow(driver):
    assert may(driver, 5_000_000, 0, 50_000)  # never before
    assert not may(driver, 5_049_999, 5_000_000, 50_000)
    assert may(driver, 5_050_000, 5_000_000, 50_000)
    # a faster subflow allows the next one sooner
    assert may(driver, 5_010_000, 5_000_000, 10_000)


def test_a_penalised_window_halves_and_its_threshold_with_it_out_of_slow_start(driver):
    # BBR's 48-79 packets of the traced weak subflows; ssthresh below cwnd: halved too
    assert halve(driver, 64, 40) == (32, 20)
    assert halve(driver, 79, 79) == (39, 39)
    # in slow start (cwnd below ssthresh) the threshold stays
    assert halve(driver, 10, 1_000) == (5, 1_000)
    # floors: one packet of window, two of threshold
    assert halve(driver, 1, 1) == (1, 2)
    assert halve(driver, 3, 3) == (1, 2)
    # BBR's "infinite" threshold (TCP_INFINITE_SSTHRESH) is never reached, so it stays
    assert halve(driver, 64, 0x7FFFFFFF) == (32, 0x7FFFFFFF)


def test_resend_when_the_carrier_can_hardly_deliver(driver):
    # a carrier with 4 packets of window or less, whatever its RTT
    assert resend(driver, 4, 100, 100)
    assert resend(driver, 1, 50, 100)
    assert not resend(driver, 5, 100, 100)
    # or more than 4 times the fast subflow's RTT away
    assert not resend(driver, 60, 400, 100)
    assert resend(driver, 60, 401, 100)
    # no overflow with RTTs in the kernel's unit (1/8 us) near the top of u32
    assert not resend(driver, 60, 0xFFFFFFFF, 0x40000000)
    assert resend(driver, 60, 0xFFFFFFFF, 0x3FFFFFFF)
