"""The olia coupled congestion control's window arithmetic, compiled from the kernel patch
and run in user space.

The C file comes straight out of kernels/patches (the kernel builds the same text); a small
driver (kernels/test/olia_inc_driver.c) answers one question per line: the change of one
subflow's window per acknowledged packet, in 1/2^16 packet.
"""

from __future__ import annotations

import random
import subprocess

import pytest

from tests.conftest import build_patch_driver

OLIA_PATCH = "0006-mptcp-add-the-olia-coupled-congestion-control.patch"
ONE = 1 << 16


@pytest.fixture(scope="module")
def olia(tmp_path_factory):
    binary = build_patch_driver(tmp_path_factory.mktemp("olia"), OLIA_PATCH,
                                ["net/mptcp/cc_olia_inc.c", "net/mptcp/cc_olia_inc.h"],
                                "olia_inc_driver", ["cc_olia_inc.c"])
    proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)

    def increase(own: int, paths: list[tuple[int, int, int]]) -> int:
        assert proc.stdin and proc.stdout
        proc.stdin.write(f"{own} " + " ".join(f"{c}:{r}:{e}" for c, r, e in paths) + "\n")
        proc.stdin.flush()
        return int(proc.stdout.readline())

    yield increase
    assert proc.stdin
    proc.stdin.close()
    proc.wait(timeout=5)


def olia_formula(own: int, paths: list[tuple[int, int, int]]) -> float:
    """OLIA's per-ACK increase of subflow `own` in packets, in floating point."""
    live = [i for i, (c, _, _) in enumerate(paths) if c]
    w, rtt = {i: paths[i][0] for i in live}, {i: paths[i][1] for i in live}
    quality = {i: paths[i][2] / rtt[i] ** 2 for i in live}
    best = max(quality.values())
    big = max(w.values())
    m = {i for i in live if w[i] == big}
    b_not_m = {i for i in live if quality[i] == best} - m
    coupled = (w[own] / rtt[own] ** 2) / sum(w[i] / rtt[i] for i in live) ** 2
    if b_not_m and own in b_not_m:
        alpha = 1 / (len(live) * len(b_not_m))
    elif b_not_m and own in m:
        alpha = -1 / (len(live) * len(m))
    else:
        alpha = 0.0
    return coupled + alpha / w[own]


def test_one_subflow_is_reno(olia):
    for cwnd, rtt in ((10, 1000), (1, 20), (300, 250_000)):
        assert olia(0, [(cwnd, rtt, 40)]) == ONE // cwnd


def test_equal_subflows_grow_together_like_one_tcp_flow(olia):
    # n equal subflows: no path is better, every one has the largest window, so only the
    # coupled term acts: 1/(n^2 w) per ACK, the connection grows by 1/n packet per RTT
    for n in (2, 3, 4):
        inc = olia(0, [(10, 2000, 100)] * n)
        assert inc / ONE == pytest.approx(1 / (n * n * 10), abs=1 / ONE)


def test_window_moves_to_the_better_path(olia):
    # path 1 loses less (longer inter-loss distance) but has the smaller window: it grows
    # faster than the coupled term alone gives, the large-window path shrinks
    paths = [(20, 1000, 100), (10, 1000, 500)]
    assert olia(0, paths) < 0
    assert olia(1, paths) > ONE * (10 / 30**2)
    # opportunistic terms add up to zero: the connection grows as the coupled terms say
    total = sum(olia(i, paths) * paths[i][0] for i in range(2))
    coupled = sum(ONE * paths[i][0] ** 2 / 30**2 for i in range(2))
    assert total == pytest.approx(coupled, abs=40)


def test_the_best_path_with_the_largest_window_takes_no_extra(olia):
    paths = [(20, 1000, 500), (10, 1000, 100)]
    for own in (0, 1):
        assert olia(own, paths) / ONE == pytest.approx(olia_formula(own, paths), abs=2 / ONE)
    assert olia(1, paths) / ONE == pytest.approx(10 / 900, abs=2 / ONE)


def test_matches_the_formula(olia):
    rng = random.Random(2012)
    for _ in range(500):
        n = rng.randint(1, 8)
        paths = [(rng.randint(1, 2000), rng.randint(50, 400_000), rng.choice((0, 10, 5000)))
                 for _ in range(n)]
        own = rng.randrange(n)
        got, want = olia(own, paths), olia_formula(own, paths)
        assert got / ONE == pytest.approx(want, abs=2 / ONE), (own, paths)


def test_empty_slots_and_bad_index(olia):
    full = [(10, 2000, 7), (12, 3000, 9)]
    holes = [(10, 2000, 7), (0, 0, 0), (12, 3000, 9)]
    assert olia(0, full) == olia(0, holes)
    assert olia(1, holes) == 0
    assert olia(5, full) == 0


def test_extreme_values_stay_in_range(olia):
    for paths in ([(2**31, 1, 2**31), (1, 2**31, 0)], [(1, 1, 0), (2**19, 2**22, 2**20)]):
        for own in (0, 1):
            assert -ONE <= olia(own, paths) <= ONE
