"""When a coupled-bbr subflow's PROBE_BW cycle moves to its next phase (patch 0020,
net/mptcp/cc_coupled_bbr_cycle.c), compiled from the kernel patch and run in user space.

Algorithm 1 of the Coupled BBR paper counts its cycle in RTT rounds; the lab kernel first
kept BBR's clock of one min RTT per phase. A driver (kernels/test/
coupled_bbr_cycle_driver.c) plays one subflow pacing through a path whose round trip a
standing queue stretches beyond the min RTT, computes BBR's delivery-rate samples and
round trips per ACK as the kernel does, and moves the cycle on by the kernel's rule
("rounds") or by one min RTT per phase ("minrtt", the rule before the fix). What the
subflow can measure is the largest sample: BW_i is BBR's windowed maximum of them.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import build_patch_driver

CYCLE_PATCH = "0020-tcp_bbr-count-coupled-bbr-s-PROBE_BW-phases-in-round.patch"
ALPHA_EQUAL = 85  # α = 1/3 in 1/256: two subflows of equal bandwidth (β = 1/2)
MIN_RTT_US = 10_000


@pytest.fixture(scope="module")
def cycle(tmp_path_factory):
    binary = build_patch_driver(
        tmp_path_factory.mktemp("cbbr-cycle"), CYCLE_PATCH,
        ["net/mptcp/cc_coupled_bbr_cycle.c", "net/mptcp/cc_coupled_bbr_cycle.h"],
        "coupled_bbr_cycle_driver", ["cc_coupled_bbr_cycle.c"])
    proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)

    def play(rtt_us: int, alpha: int, clock: str) -> tuple[float, float, float]:
        """(largest rate sample / BW, mean pacing gain, mean phase length in ms)."""
        assert proc.stdin and proc.stdout
        proc.stdin.write(f"{rtt_us} {MIN_RTT_US} {alpha} {clock}\n")
        proc.stdin.flush()
        best, gain, phase = (int(v) for v in proc.stdout.readline().split())
        return best / 1000, gain / 1000, phase / 1000

    yield play
    assert proc.stdin
    proc.stdin.close()
    proc.wait(timeout=5)


def test_a_phase_ends_at_a_round_start_once_a_min_rtt_has_passed(cycle):
    # each phase lasts one round trip, the path's RTT, whatever the queue adds to it
    for rtt_us in (10_000, 15_000, 20_000, 30_000):
        _, _, phase_ms = cycle(rtt_us, ALPHA_EQUAL, "rounds")
        assert phase_ms == pytest.approx(rtt_us / 1000, rel=0.03)


def test_the_probing_round_is_measured_whole_behind_a_standing_queue(cycle):
    # RTT twice the min RTT (beside BBR flows at a drop-tail bottleneck): with phases one
    # round long the subflow measures its 1.25 BW_i probe; with one min RTT per phase the
    # best sample spans the probe and the 0.75 phase after it, (1.25 + 0.75) / 2 = 1,
    # so BW_i never grows and any shortfall lowers it for good
    best, _, _ = cycle(20_000, ALPHA_EQUAL, "rounds")
    assert best >= 1.22
    before, _, _ = cycle(20_000, ALPHA_EQUAL, "minrtt")
    assert before <= 1.01
    # a subflow at gain 1 in its alpha phases (alone, β = 1) lost less: (1 + 1.25) / 2
    assert cycle(20_000, 256, "minrtt")[0] == pytest.approx(1.125, abs=0.01)
    assert cycle(20_000, 256, "rounds")[0] >= 1.22


def test_without_a_queue_both_clocks_measure_the_probe(cycle):
    for clock in ("rounds", "minrtt"):
        assert cycle(10_000, ALPHA_EQUAL, clock)[0] >= 1.22


def test_the_cycle_still_averages_beta(cycle):
    # section IV: (1.25 + 0.75 + 6 α) / 8 = β, now in round trips whatever the RTT
    for rtt_us in (10_000, 20_000, 30_000):
        _, gain, _ = cycle(rtt_us, ALPHA_EQUAL, "rounds")
        assert gain == pytest.approx((1.25 + 0.75 + 6 * ALPHA_EQUAL / 256) / 8, abs=0.005)
