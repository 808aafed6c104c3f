"""MPTCP-D's arithmetic (the mptcp-d congestion control of the lab kernel), compiled from
the kernel patch and run in user space: the window increase of equations 1-2 and extra
subflow elimination's decisions (Algorithm 1) on planted RTT traces.

The C file comes straight out of kernels/patches (the kernel builds the same text); a small
driver (kernels/test/mptcp_d_driver.c) answers one command per line.
"""

from __future__ import annotations

import random

import pytest

from pathdiv.experiments.config.load import ConfigError, validate
from pathdiv.kernels.abilities import lab_kernel_abilities
from tests.conftest import build_patch_driver
from tests.support.line_driver import LineDriver

PATCH = "0010-mptcp-add-the-mptcp-d-congestion-control.patch"


class Driver(LineDriver):
    def window(self, self_slot: int, paths: list[tuple[int, int]]) -> int:
        return int(self.ask(f"W {self_slot} " + " ".join(f"{c}:{r}" for c, r in paths)))

    def connection(self, candidates: int = 80, alpha: float = 1.3, beta: float = 0.1) -> None:
        assert self.ask(f"P {candidates} {round(alpha * 100)} {round(beta * 100)}") == "ok"

    def trace(self, samples: list[tuple[int, int]]) -> dict[int, str]:
        """Feed (subflow, rtt_us) samples in order; each subflow's last decision that was
        not 'keep' (trigger or close), else 'keep'."""
        out: dict[int, str] = {}
        for slot, rtt in samples:
            verdict = self.ask(f"S {slot} {rtt}")
            assert verdict in ("keep", "trigger", "close", "closed"), verdict
            if verdict in ("trigger", "close"):
                out[slot] = verdict
            out.setdefault(slot, "keep")
        return out


@pytest.fixture(scope="module")
def drv(tmp_path_factory):
    binary = build_patch_driver(tmp_path_factory.mktemp("mptcp_d"), PATCH,
                                ["net/mptcp/cc_mptcp_d_alg.c", "net/mptcp/cc_mptcp_d_alg.h"],
                                "mptcp_d_driver", ["cc_mptcp_d_alg.c"])
    d = Driver(binary)
    yield d
    assert d.proc.stdin
    d.proc.stdin.close()
    d.proc.wait(timeout=5)


def equation_window(self_slot: int, paths: list[tuple[int, int]]) -> float:
    """Acked packets per one-packet increase from Algorithm 1's per-ACK step,
    psi_r * (w_r / RTT_r^2) / (sum_k w_k / RTT_k)^2, in floating point."""
    live = [(c, r) for c, r in paths if c]
    own_c, own_r = paths[self_slot]
    psi = min(r for _, r in live) / own_r
    step = psi * (own_c / own_r**2) / sum(c / r for c, r in live) ** 2
    return 1 / step


# ------------------------------------------------------------------ window (eq. 1-2)

def test_one_subflow_is_reno(drv):
    for cwnd, rtt in ((10, 1000), (1, 20), (300, 250_000)):
        assert drv.window(0, [(cwnd, rtt)]) == cwnd


def test_equal_subflows_each_grow_a_quarter_packet_per_rtt_for_two(drv):
    # two subflows of window w and equal RTT: W = (2w)^2 / w = 4w, so each grows by 1/4
    # packet per RTT and the connection by 1/2: less than one TCP flow's 1
    assert drv.window(0, [(10, 2000), (10, 2000)]) == 40
    assert drv.window(1, [(10, 2000)] * 4) == 160


def test_matches_the_equation(drv):
    rng = random.Random(4)
    for _ in range(500):
        n = rng.randint(1, 8)
        paths = [(rng.randint(1, 2000), rng.randint(50, 400_000)) for _ in range(n)]
        me = rng.randrange(n)
        got, want = drv.window(me, paths), equation_window(me, paths)
        assert got == pytest.approx(min(want, 2**32 - 1), rel=0.01, abs=1), (paths, me)


def test_never_faster_than_tcp_on_its_own_path(drv):
    # Theorem 1: psi <= 1 and the sum holds w_r, so W >= w_r for any mix
    rng = random.Random(5)
    for _ in range(300):
        paths = [(rng.randint(1, 500), rng.randint(100, 100_000)) for _ in range(4)]
        me = rng.randrange(4)
        assert drv.window(me, paths) >= paths[me][0]


def test_traffic_shifts_to_the_lowest_rtt_subflow(drv):
    # equal windows, RTT 1 ms and 4 ms: the slow one needs psi^-1 * 4^2 times as many
    # acks per packet of growth relative to its rate, so it grows far more slowly
    paths = [(20, 1000), (20, 4000)]
    fast, slow = drv.window(0, paths), drv.window(1, paths)
    # per unit time: growth rate ~ (1 / W) * (w / RTT) acks per second
    fast_rate = 20 / 1000 / fast
    slow_rate = 20 / 4000 / slow
    assert fast_rate > 16 * slow_rate  # psi 1/4 and RTT^2 in equation 1


def test_closed_and_empty_slots_are_not_counted(drv):
    assert drv.window(0, [(10, 2000), (0, 0), (10, 2000), (0, 5)]) == \
        drv.window(0, [(10, 2000), (10, 2000)])


# ------------------------------------------------------------------ ESE (Algorithm 1)

def rising(slot: int, base: int, top: int, steps: int, flat: int = 0) -> list[tuple[int, int]]:
    """A subflow's samples: `flat` at base, then a linear climb to top in `steps`."""
    return [(slot, base)] * flat + [(slot, base + (top - base) * (i + 1) // steps)
                                    for i in range(steps)]


def interleave(*traces: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for group in zip(*traces, strict=False):
        out.extend(group)
    return out


def test_two_subflows_on_one_link_lose_one_window(drv):
    # both RTTs climb together from 1 ms to 1.6 ms (their shared queue), the first over
    # 1.3 ms triggers and keeps its window, the other's matching RTT closes it
    drv.connection()
    got = drv.trace(interleave(rising(1, 1000, 1600, 30, flat=5),
                               rising(2, 1000, 1600, 30, flat=5)))
    assert got == {1: "trigger", 2: "close"}


def test_a_subflow_on_a_disjoint_slower_path_is_kept(drv):
    # subflows 1 and 2 share a link (base 1 ms); subflow 3 has its own path of base 5 ms
    # whose RTT also rises (its own queue), but never to within 0.1 * 5 ms of 1.3 ms
    drv.connection()
    got = drv.trace(interleave(rising(1, 1000, 1600, 30, flat=5),
                               rising(2, 1000, 1600, 30, flat=5),
                               rising(3, 5000, 8000, 30, flat=5)))
    assert got == {1: "trigger", 2: "close", 3: "keep"}


def test_cross_traffic_on_one_path_closes_nothing(drv):
    # only subflow 2's RTT rises (cross traffic on its own link): it triggers; the
    # others never change significantly, so nothing is closed
    drv.connection()
    got = drv.trace(interleave(rising(1, 1000, 1100, 40), rising(2, 1000, 3000, 40),
                               rising(3, 1000, 1050, 40)))
    assert got == {1: "keep", 2: "trigger", 3: "keep"}


def test_a_change_within_alpha_is_not_significant(drv):
    # two subflows on one path raise each other's RTT by ~1.2 (the paper's D2/D1): with
    # alpha 1.3 that is no trigger; with alpha 1.1 it is, and the partner is closed
    trace = interleave(rising(1, 1000, 1250, 20, flat=3), rising(2, 1000, 1250, 20, flat=3))
    drv.connection(alpha=1.3)
    assert drv.trace(trace) == {1: "keep", 2: "keep"}
    drv.connection(alpha=1.1)
    assert drv.trace(trace) == {1: "trigger", 2: "close"}


def test_beta_decides_how_close_the_match_must_be(drv):
    # the second subflow's RTT jumps to 1.5 ms while the reference is 1.35 ms:
    # |1.5 - 1.35| = 0.15 ms is outside 0.1 * 1 ms, inside 0.2 * 1 ms
    trace = [(1, 1000), (2, 1000), (1, 1350), (2, 1500), (2, 1500)]
    drv.connection(beta=0.1)
    assert drv.trace(trace) == {1: "trigger", 2: "keep"}
    drv.connection(beta=0.2)
    assert drv.trace(trace) == {1: "trigger", 2: "close"}


def test_only_the_first_candidates_samples_are_examined(drv):
    # the sharing shows after 100 flat samples: with 80 candidates it comes too late;
    # with 200 it is caught
    trace = interleave(rising(1, 1000, 1600, 30, flat=100), rising(2, 1000, 1600, 30, flat=100))
    drv.connection(candidates=80)
    assert drv.trace(trace) == {1: "keep", 2: "keep"}
    drv.connection(candidates=200)
    assert drv.trace(trace) == {1: "trigger", 2: "close"}


def test_a_short_flow_is_decided_within_its_few_samples(drv):
    # 8 samples each, far fewer than 80 candidates: decided all the same (the paper's
    # adaptive NUM_candidate = NUM_pkt)
    drv.connection()
    got = drv.trace(interleave(rising(1, 1000, 1500, 6, flat=2),
                               rising(2, 1000, 1500, 6, flat=2)))
    assert got == {1: "trigger", 2: "close"}


def shared_queue_in_slow_start(base_us: int, rate_mbit: float, samples: int,
                               subflows: int = 2) -> list[tuple[int, int]]:
    """RTT samples of `subflows` subflows filling one FIFO queue in slow start: each ACK
    lets its subflow send two packets for the one acknowledged, so the queue, and the
    next sample, grows by one full frame's transmission time at `rate_mbit` per sample;
    the subflows' ACKs alternate. Each subflow's first sample sees the empty queue."""
    frame_us = 1514 * 8 / rate_mbit
    first = [(1 + k, base_us) for k in range(subflows)]
    return first + [(1 + k % subflows, round(base_us + (k + 1) * frame_us))
                    for k in range(samples)]


def test_in_slow_start_a_shared_queue_is_caught_only_where_a_frame_is_inside_beta(drv):
    # The lab's 10 Mbit/s anomaly (ese_lab: no subflow closed at 10 Mbit/s, one of two at
    # 100): the trigger's sample becomes the reference, and the partner's next sample is
    # one queued frame later. Beta's band is 0.1 x base RTT = 0.5 ms at a 5 ms base; a
    # frame takes 1.21 ms at 10 Mbit/s (outside: kept, and every later sample is further
    # off as the queue grows) and 0.12 ms at 100 Mbit/s (inside: closed).
    def verdicts(base_us: int, rate_mbit: float, samples: int) -> list[str]:
        drv.connection()
        return sorted(drv.trace(shared_queue_in_slow_start(base_us, rate_mbit, samples))
                      .values())

    # whichever subflow triggers first, the other is kept at 10 Mbit/s, closed at 100
    assert verdicts(5000, 10, 60) == ["keep", "trigger"]
    assert verdicts(5000, 100, 120) == ["close", "trigger"]
    # the same 10 Mbit/s queue under a base RTT with a frame inside beta's band
    # (15 ms: 1.5 ms > 1.21 ms) is caught
    assert verdicts(15000, 10, 60) == ["close", "trigger"]


def test_the_trigger_is_never_closed_and_a_closed_subflow_stays_closed(drv):
    drv.connection()
    assert drv.trace([(1, 1000), (1, 1400), (1, 1400), (1, 1410)]) == {1: "trigger"}
    assert drv.ask("S 2 1000") == "keep"
    assert drv.ask("S 2 1400") == "close"
    assert drv.ask("S 2 1000") == "closed"


# ------------------------------------------------------------------ the keys

def test_alpha_and_beta_are_keys_with_the_papers_defaults():
    assert validate({}).mptcp_d == (1.3, 0.1)
    assert validate({"hosts": {"mptcp_d_alpha": 2, "mptcp_d_beta": 0.2}}).mptcp_d == (2.0, 0.2)
    for key, bad in (("mptcp_d_alpha", 1.0), ("mptcp_d_alpha", 11), ("mptcp_d_beta", 0),
                     ("mptcp_d_beta", 1.5)):
        with pytest.raises(ConfigError) as info:
            validate({"hosts": {key: bad}})
        assert info.value.problems[0].startswith(f"hosts.{key}: {bad} is not allowed")


def test_the_lab_kernel_offers_mptcp_d():
    assert "mptcp-d" in lab_kernel_abilities().ccs
    assert validate({"hosts": {"cc": "mptcp-d", "kernel": "lab"}}).cc == "mptcp-d"
