"""The AR&P scheduler's decisions (seed 003's paper, section V): AR-Scheduling's greedy split
(Algorithm 2, Eq. 3), P-Scheduling's arrival times (Eq. 4, Algorithm 3) and its scheduling
window, compiled from the kernel patch and run in user space
(kernels/test/arp_plan_driver.c answers one question per line)."""

from __future__ import annotations

import itertools
import math
import random
import subprocess

import pytest

from tests.conftest import build_patch_driver

ARP_PATCH = "0008-mptcp-add-the-AR-P-scheduler.patch"


@pytest.fixture(scope="module")
def arp(tmp_path_factory):
    binary = build_patch_driver(tmp_path_factory.mktemp("arp"), ARP_PATCH,
                                ["net/mptcp/sched_arp_plan.c", "net/mptcp/sched_arp_plan.h"],
                                "arp_plan_driver", ["sched_arp_plan.c"])
    proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)

    def ask(line: str) -> int:
        assert proc.stdin and proc.stdout
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        return int(proc.stdout.readline())

    yield ask
    assert proc.stdin
    proc.stdin.close()
    proc.wait(timeout=5)


def split(arp, paths: list[tuple[int, int, int]]) -> set[int]:
    """Indexes of the non-redundant subflows for (rate B/s, rtt µs, inflight) each."""
    mask = arp("split " + " ".join(f"{x}:{r}:{f}" for x, r, f in paths))
    return {i for i in range(len(paths)) if mask >> i & 1}


def eq3(paths: list[tuple[int, int, int]], chosen: set[int]) -> float:
    sx = sum(paths[i][0] for i in chosen)
    sxr = sum(paths[i][0] * paths[i][1] for i in chosen)
    return math.log(sx) - math.log(sxr / sx)


def greedy(paths: list[tuple[int, int, int]]) -> set[int]:
    """Algorithm 2 in floating point."""
    order = sorted(range(len(paths)), key=lambda i: -paths[i][0] / paths[i][1])
    chosen = {order[0]}
    for j in order[1:]:
        x, r, inflight = paths[j]
        sx = sum(paths[i][0] for i in chosen)
        sxr = sum(paths[i][0] * paths[i][1] for i in chosen)
        if inflight >= 4 and x / sx > (r * sx - 2 * sxr) / sxr:
            chosen.add(j)
    return chosen


def test_equal_paths_both_carry_new_data(arp):
    assert split(arp, [(12_500_000, 50_000, 20)] * 2) == {0, 1}


def test_a_slow_long_path_becomes_redundant(arp):
    # Fig. 11's setting: equal bandwidths, 50 ms against 250 ms: the long path only adds
    # to Eq. 3 while r_j < 2 × the rate-weighted RTT of N (here 100 ms)
    assert split(arp, [(2_500_000, 50_000, 20), (2_500_000, 250_000, 20)]) == {0}
    assert split(arp, [(2_500_000, 50_000, 20), (2_500_000, 90_000, 20)]) == {0, 1}
    # the better subflow is found whatever its index
    assert split(arp, [(2_500_000, 250_000, 20), (2_500_000, 50_000, 20)]) == {1}


def test_few_packets_in_flight_make_a_subflow_redundant(arp):
    assert split(arp, [(2_500_000, 50_000, 20), (2_500_000, 50_000, 3)]) == {0}
    assert split(arp, [(2_500_000, 50_000, 20), (2_500_000, 50_000, 4)]) == {0, 1}
    # ... but never the best one: N is never empty
    assert split(arp, [(2_500_000, 50_000, 0), (100_000, 50_000, 0)]) == {0}


def test_greedy_matches_the_paper_and_is_optimal_for_two(arp):
    rng = random.Random(3)
    for _ in range(400):
        n = rng.randint(1, 5)
        paths = [(rng.randint(10_000, 125_000_000), rng.randint(1000, 400_000),
                  rng.choice((2, 50))) for _ in range(n)]
        got = split(arp, paths)
        assert got == greedy(paths), paths
        if n == 2 and all(f >= 4 for _, _, f in paths):
            best = max(eq3(paths, set(c)) for k in (1, 2)
                       for c in itertools.combinations(range(2), k))
            assert eq3(paths, got) == pytest.approx(best), paths


def test_a_packet_goes_where_it_arrives_first(arp):
    # Eq. 4: A_i = queued_i / x_i + r_i / 2
    fast, slow = "1000000:50000", "1000000:250000"
    assert arp(f"pick 3 {fast}:0 {slow}:0") == 0
    # 200 KB queued at 1 MB/s waits 200 ms: it would arrive at 225 ms against 125 ms
    assert arp(f"pick 3 {fast}:200000 {slow}:0") == 1
    assert arp(f"pick 3 {fast}:99000 {slow}:0") == 0
    # only subflows in the mask (the non-redundant ones) are candidates
    assert arp(f"pick 2 {fast}:0 {slow}:0") == 1
    assert arp(f"pick 0 {fast}:0 {slow}:0") == -1


def test_scheduled_packets_keep_their_order(arp):
    # placing packets one by one at the earliest arrival, each arrives no earlier than
    # the one before: in-order arrival in an asymmetric network (section V.B)
    paths = [(1_250_000, 20_000), (5_000_000, 60_000), (2_500_000, 35_000)]
    queued, arrivals = [0, 0, 0], []
    for _ in range(300):
        line = " ".join(f"{x}:{r}:{q}" for (x, r), q in zip(paths, queued, strict=True))
        i = arp(f"pick 7 {line}")
        x, r = paths[i]
        arrivals.append(queued[i] * 1e6 / x + r / 2)
        queued[i] += 1448
    assert all(b >= a - 1 for a, b in itertools.pairwise(arrivals))
    assert all(q > 0 for q in queued)


def test_scheduling_window_is_max_rtt_times_total_bandwidth(arp):
    # section V.B: max_N RTT_i × Σ_N BW_i; without a bandwidth estimate (not BBR) the
    # sending rate stands in for it
    line = "1000000:50000 2000000:250000 4000000:10000"
    assert arp(f"window 7 {line}") == 0.25 * 7_000_000
    assert arp(f"window 5 {line}") == 0.05 * 5_000_000
    assert arp(f"window 0 {line}") == 0
    # Coupled BBR paces at α_i × BW_i (here α = 1/3) for 6 RTTs of 8: the window still
    # counts BW_i, not the momentary rate
    line = "1000000:50000:3000000 1000000:50000:3000000"
    assert arp(f"window 3 {line}") == 0.05 * 6_000_000
    # one subflow with an estimate, one without
    assert arp("window 3 1000000:50000:3000000 2000000:100000") == 0.1 * 5_000_000


def test_best_subflow_by_rate_over_rtt(arp):
    assert arp("best 1000000:50000 1000000:40000 2000000:100000") == 1
    assert arp("best 1000000:50000 2000000:100000") == 0  # ties: lower index
    assert arp("best") == -1
