"""scripts/seed003_trace.py: Coupled BBR's probing cycles read from a planted trace."""

from __future__ import annotations

from tests.conftest import load_script

GAINS = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]  # one PROBE_BW cycle, a phase per sample


def _socket(best: list[float], bw: float = 10.0, t0: float = 0.0) -> list[dict]:
    """Samples of one socket: a cycle per entry of `best` (its largest delivery rate)."""
    out = []
    t = t0
    for peak in best:
        for i, gain in enumerate(GAINS):
            out.append({"t": t, "cc": "coupled-bbr", "bbr_pacing_gain": gain,
                        "bbr_bw_mbps": bw, "delivery_mbps": peak if i == 1 else bw * 0.5,
                        "rtt_us": 100_000, "min_rtt_us": 50_000, "notsent_bytes": 1,
                        "unacked": 10})
            t += 0.1
    return out


def test_each_cycle_gives_its_best_sample_over_the_estimate_at_its_start():
    trace = load_script("scripts/seed003_trace.py")
    samples = _socket([9.0, 10.5, 11.0, 12.0])
    # a cycle is counted from one start of the probe to the next: the last has no end
    assert trace.cycle_ratios(samples) == [0.9, 1.05, 1.1]
    summary = trace.cycles(samples)
    assert summary["cycles"] == 3 and summary["max_sample_over_bw_median"] == 1.05
    assert summary["probe_ms_median"] == 100.0


def test_a_socket_with_no_samples_after_the_start_has_no_cycles():
    # a subflow reset at its join leaves samples only before `from_s`
    trace = load_script("scripts/seed003_trace.py")
    samples = _socket([9.0, 10.5], t0=0.0)
    assert trace.cycle_ratios(samples, from_s=10.0) == []
    summary = trace.cycles(samples, from_s=10.0)
    assert summary["cycles"] == 0 and summary["max_sample_over_bw_median"] is None
