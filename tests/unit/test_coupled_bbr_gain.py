"""Coupled BBR's pacing gains (β of Eq. 2, α of Eq. 1, the 4-packets-per-RTT floor of
Algorithm 1, held for every α), compiled from the kernel patch and run in user space.

The C file comes straight out of kernels/patches (the kernel builds the same text); a small
driver (kernels/test/coupled_bbr_gain_driver.c) answers "BETA ALPHA GAIN" per question.
"""

from __future__ import annotations

import random
import subprocess

import pytest

from tests.conftest import build_patch_driver

CBBR_PATCH = "0007-tcp_bbr-add-coupled-bbr-for-the-subflows-of-an-MPTCP.patch"
BETA_ONE, UNIT = 1 << 16, 256


@pytest.fixture(scope="module")
def cbbr(tmp_path_factory):
    binary = build_patch_driver(
        tmp_path_factory.mktemp("cbbr"), CBBR_PATCH,
        ["net/mptcp/cc_coupled_bbr_gain.c", "net/mptcp/cc_coupled_bbr_gain.h"],
        "coupled_bbr_gain_driver", ["cc_coupled_bbr_gain.c"])
    proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)

    def ask(own: int, bws: list[int], bdp: int = 100) -> tuple[float, float, float]:
        """(β, α, gain) of subflow `own`, as fractions."""
        assert proc.stdin and proc.stdout
        proc.stdin.write(f"{own} {bdp} " + " ".join(map(str, bws)) + "\n")
        proc.stdin.flush()
        beta, alpha, gain = (int(v) for v in proc.stdout.readline().split())
        return beta / BETA_ONE, alpha / UNIT, gain / UNIT

    yield ask
    assert proc.stdin
    proc.stdin.close()
    proc.wait(timeout=5)


@pytest.fixture(scope="module")
def cbbr_cycle(tmp_path_factory):
    binary = build_patch_driver(
        tmp_path_factory.mktemp("cbbr-cycle"), CBBR_PATCH,
        ["net/mptcp/cc_coupled_bbr_gain.c", "net/mptcp/cc_coupled_bbr_gain.h"],
        "coupled_bbr_gain_driver", ["cc_coupled_bbr_gain.c"])
    proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)

    def ask(gain: int) -> int:
        """The mean gain (1/256) of a PROBE_BW cycle whose six α phases pace at `gain`."""
        assert proc.stdin and proc.stdout
        proc.stdin.write(f"cycle {gain}\n")
        proc.stdin.flush()
        return int(proc.stdout.readline())

    yield ask
    assert proc.stdin
    proc.stdin.close()
    proc.wait(timeout=5)


def paper_beta(own: int, bws: list[int]) -> float:
    """Eq. 2 in floating point."""
    return bws[own] * max(bws) / sum(b * b for b in bws)


def test_one_subflow_is_plain_bbr(cbbr):
    for bw in (1, 139_810, 2**31):
        assert cbbr(0, [bw]) == (1.0, 1.0, 1.0)


def test_equal_paths_share_one_bbr_rate(cbbr):
    # two equal subflows: β = 1/2, α = 1/3, average gain (1.25 + 0.75 + 6α) / 8 = β
    beta, alpha, gain = cbbr(0, [5000, 5000])
    assert beta == 0.5
    assert alpha == pytest.approx(1 / 3, abs=1 / UNIT)
    assert (1.25 + 0.75 + 6 * gain) / 8 == pytest.approx(beta, abs=1 / UNIT)


def test_connection_gets_the_best_paths_rate(cbbr):
    # Σ β_i BW_i = max BW (the paper's derivation after Algorithm 1), and β_i / BW_i is
    # the same for every subflow: the better path carries more
    rng = random.Random(31)
    for _ in range(300):
        bws = [rng.randint(1, 2**31) for _ in range(rng.randint(1, 8))]
        betas = [cbbr(i, bws)[0] for i in range(len(bws))]
        for i, b in enumerate(betas):
            assert b == pytest.approx(paper_beta(i, bws), abs=2 / BETA_ONE)
        total = sum(b * bw for b, bw in zip(betas, bws, strict=True))
        assert total == pytest.approx(max(bws), rel=1e-3)


def floor_gain(bdp: int) -> float:
    """The gain that sends 4 packets per RTT on a BDP of `bdp` packets, rounded up to the
    next 1/256 and within [1/256, 1] (Algorithm 1's floor)."""
    return min(max(-(-4 * UNIT // max(bdp, 1)), 1), UNIT) / UNIT


def test_alpha_follows_eq_1(cbbr):
    rng = random.Random(1)
    for _ in range(300):
        bws = [rng.randint(1000, 200_000) for _ in range(rng.randint(2, 4))]
        own = rng.randrange(len(bws))
        beta, alpha, gain = cbbr(own, bws)
        assert alpha == pytest.approx((4 * beta - 1) / 3, abs=1 / UNIT)
        assert gain == max(alpha, floor_gain(100))


def test_a_poor_path_keeps_four_packets_per_rtt(cbbr):
    # β = 100·1000 / (1000² + 100²) < 1/4, so α < 0: the gain paces 4 packets per RTT,
    # 4 / BDP of the bandwidth, rounded up to the next 1/256
    beta, alpha, gain = cbbr(1, [1000, 100], bdp=100)
    assert beta < 0.25 and alpha < 0
    assert 4 <= gain * 100 < 4 + 100 / UNIT
    # never above BBR's own gain, whatever the BDP
    assert cbbr(1, [1000, 100], bdp=2)[2] == 1.0
    assert cbbr(1, [1000, 100], bdp=0)[2] == 1.0
    assert cbbr(1, [1000, 100], bdp=10**6)[2] == 1 / UNIT


def test_a_small_positive_alpha_keeps_four_packets_per_rtt(cbbr):
    # Algorithm 1 as printed paces at α·BW for any α > 0, so a subflow just above α = 0
    # would send less than the floor gives one at α <= 0 (at α = 1/256 and a BDP of 16
    # packets, one packet in 16 RTTs): the floor bounds the rate from below for every α
    bws = [1000, 268]  # β ≈ 0.2500 + ε: α rounds to 0
    beta, alpha, gain = cbbr(1, bws, bdp=16)
    assert beta > 0.25 and alpha == 0
    assert gain * 16 == pytest.approx(4, abs=16 / UNIT)
    # along a path that grows from nothing to the other's bandwidth, the α phases never
    # send fewer than 4 packets per RTT, and where α·BDP reaches 4 the gain is α itself
    for bdp in (8, 16, 100, 1000):
        for poor in range(10, 1001, 10):
            beta, alpha, gain = cbbr(1, [1000, poor], bdp=bdp)
            assert gain * bdp >= 4 or gain == 1.0
            if alpha * bdp >= 4:
                assert gain == alpha
    assert cbbr(0, [1000, 0]) == (1.0, 1.0, 1.0)  # a subflow not yet measured counts not
    assert cbbr(1, [1000, 0])[0] == 1.0            # and is not slowed before it measures


def test_the_cycle_mean_of_the_gains_is_beta(cbbr_cycle, cbbr):
    # the sending rate AR&P takes as x_i (section IV: T_i = β_i BW_i): the mean of 1.25,
    # 0.75 and six phases at the coupled gain is β_i while α_i > 0
    assert cbbr_cycle(UNIT) == UNIT  # plain BBR: 1
    rng = random.Random(7)
    for _ in range(200):
        bws = [rng.randint(1000, 200_000) for _ in range(rng.randint(2, 4))]
        own = rng.randrange(len(bws))
        beta, alpha, gain = cbbr(own, bws)
        if alpha >= floor_gain(100):
            assert cbbr_cycle(round(gain * UNIT)) / UNIT == pytest.approx(beta, abs=1.5 / UNIT)
    # below α = 0 the floor's 4 packets per RTT keep the mean above 1/4
    assert cbbr_cycle(1) == round((2 * UNIT + 6) / 8)
