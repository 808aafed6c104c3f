"""The lia coupled congestion control's window arithmetic (RFC 6356), compiled from the
kernel patch and run in user space.

The C file comes straight out of kernels/patches (the kernel builds the same text); a small
driver (kernels/test/lia_wnd_driver.c) answers one question per line.
"""

from __future__ import annotations

import random
import subprocess

import pytest

from tests.conftest import build_patch_driver

LIA_PATCH = "0004-mptcp-add-the-lia-coupled-congestion-control.patch"


@pytest.fixture(scope="module")
def lia(tmp_path_factory):
    binary = build_patch_driver(tmp_path_factory.mktemp("lia"), LIA_PATCH,
                                ["net/mptcp/cc_lia_wnd.c", "net/mptcp/cc_lia_wnd.h"],
                                "lia_wnd_driver", ["cc_lia_wnd.c"])
    proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)

    def window(own: int, paths: list[tuple[int, int]]) -> int:
        assert proc.stdin and proc.stdout
        proc.stdin.write(f"{own} " + " ".join(f"{c}:{r}" for c, r in paths) + "\n")
        proc.stdin.flush()
        return int(proc.stdout.readline())

    yield window
    assert proc.stdin
    proc.stdin.close()
    proc.wait(timeout=5)


def rfc6356_window(own: int, paths: list[tuple[int, int]]) -> float:
    """cwnd_total / alpha of RFC 6356 section 4 in floating point, at least own cwnd."""
    live = [(c, r) for c, r in paths if c]
    total = sum(c for c, _ in live)
    alpha = total * max(c / r**2 for c, r in live) / sum(c / r for c, r in live) ** 2
    return max(own, total / alpha)


def test_one_subflow_is_reno(lia):
    for cwnd, rtt in ((10, 1000), (1, 20), (300, 250_000)):
        assert lia(cwnd, [(cwnd, rtt)]) == cwnd


def test_equal_subflows_grow_together_like_one_tcp_flow(lia):
    # n subflows of cwnd c: each grows by one packet per n^2 * c packets acked, that is
    # by 1/n^2 packet per RTT, so the connection grows by 1/n packet per RTT in all
    for n in (2, 3, 4, 8):
        w = lia(10, [(10, 2000)] * n)
        assert w == n * n * 10
        assert n * 10 / w == pytest.approx(1 / n)


def test_matches_the_rfc_formula(lia):
    rng = random.Random(6356)
    for _ in range(500):
        n = rng.randint(1, 8)
        paths = [(rng.randint(1, 2000), rng.randint(50, 400_000)) for _ in range(n)]
        own = rng.choice(paths)[0]
        got, want = lia(own, paths), rfc6356_window(own, paths)
        assert got >= own
        assert got == pytest.approx(want, rel=0.01, abs=1), (paths, own)


def test_never_faster_than_tcp_on_its_own_path(lia):
    # the min() of RFC 6356: a slow subflow beside a fast one grows no faster than Reno
    assert lia(50, [(50, 100_000), (5, 1000)]) >= 50


def test_empty_slots_are_not_counted(lia):
    assert lia(10, [(10, 2000), (0, 0), (10, 2000), (0, 5)]) == lia(10, [(10, 2000)] * 2)
    assert lia(7, []) == 7
    assert lia(0, []) == 1


def test_extreme_values_stay_in_range(lia):
    big = lia(2**31, [(2**31, 1), (2**31, 2**31), (1, 1)])
    assert 1 <= big <= 2**32 - 1
    assert lia(1, [(1, 2**32 - 1), (2**20, 1)]) >= 1
