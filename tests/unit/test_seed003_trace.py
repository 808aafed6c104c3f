"""scripts/seed003_trace.py: Coupled BBR's probing cycles read from a planted trace."""

from __future__ import annotations

import json

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


def _line(t: float, remote: str, gain: float, bw: float, acked: int) -> str:
    return json.dumps({"t": t, "remote": remote, "rport": 80, "cc": "coupled-bbr",
                       "bbr_pacing_gain": gain, "bbr_bw_mbps": bw, "pacing_mbps": gain * bw,
                       "bytes_acked": acked, "rtt_us": 100_000, "min_rtt_us": 50_000,
                       "snd_cwnd": 20, "unacked": 10})


def test_eq2_holds_the_connection_against_the_best_paths_estimate(tmp_path):
    # two subflows in start-up for 1 s, then PROBE_BW: path 1 estimates 8 Mbit/s and
    # carries 1 MB/s (8 Mbit/s), path 2 estimates 4 and carries nothing more
    trace = load_script("scripts/seed003_trace.py")
    lines = []
    for i in range(31):
        t = i / 10
        gain = 2.89 if t < 1 else 1.25
        lines.append(_line(t, "10.1.1.2", gain, 8.0, int(max(0.0, t - 1) * 1e6)))
        lines.append(_line(t, "10.2.1.2", gain, 4.0, 1000))
    (tmp_path / "cc_trace-pdp-h2.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "cc_trace-pdp-bs1.jsonl").write_text(
        _line(1.0, "10.1.3.2", 1.0, 6.0, 0) + "\n" + _line(3.0, "10.1.3.2", 1.0, 6.0,
                                                           500_000) + "\n")
    out = trace.eq2(tmp_path)
    assert out["startup_s"] == 1.0 and out["steady_s"] == 2.0
    assert out["acked_in_startup_mb"] == 0.001
    assert out["conn_thr_mbps"] == 8.0 and out["eq2_max_bw_mbps"] == 8.0
    by_path = {(s["sender"], s["path"]): s for s in out["sockets"]}
    assert by_path[("pdp-h2", 1)]["beta"] == 0.8   # 8 * 8 / (64 + 16)
    assert by_path[("pdp-h2", 2)]["beta"] == 0.4
    assert by_path[("pdp-h2", 2)]["min_rtt_ms"] == 50.0
    assert by_path[("pdp-bs1", 1)]["thr_mbps"] == 2.0 and by_path[("pdp-bs1", 1)]["beta"] is None
