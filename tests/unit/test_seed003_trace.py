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


def test_a_socket_is_starved_when_its_window_has_room_and_nothing_is_queued():
    trace = load_script("scripts/seed003_trace.py")
    base = {"notsent_bytes": 5000, "unacked": 10, "snd_cwnd": 10}
    samples = [{"t": t, **base} for t in (0.0, 1.0, 2.0, 3.0)]
    samples.append({"t": 4.0, "notsent_bytes": 0, "unacked": 3, "snd_cwnd": 10})  # starved
    samples.append({"t": 5.0, "notsent_bytes": 0, "unacked": 10, "snd_cwnd": 10})  # cwnd-bound
    assert trace.starved(samples, from_s=1.0) == 0.2
    assert trace.starved(samples, from_s=9.0) is None


def _mptcp_frames(hole: bool) -> list[tuple[float, object]]:
    """A receiver (10.1.1.2, window 10,000 B, scale 0) fed 1,000-B mappings every 10 ms,
    each DATA_ACKed 1 ms later; with `hole`, the mapping sent at 1.0 s arrives at 1.5 s:
    the nine after it fill the window and nothing new comes until the gap is filled."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    from tests.support.pcap_synth import dss

    rx, tx = "10.1.1.2", "10.0.0.2"
    frames = [(0.0, Ether() / IP(src=rx, dst=tx) / TCP(sport=4000, dport=80, flags="S",
                                                   options=[("WScale", 0)]))]

    def data(t: float, k: int) -> None:
        frames.append((t, Ether() / IP(src=tx, dst=rx) / TCP(
            sport=80, dport=4000, flags="A", options=[dss(dsn=k * 1000, dlen=1000)])))

    def ack(t: float, upto: int) -> None:
        frames.append((t, Ether() / IP(src=rx, dst=tx) / TCP(
            sport=4000, dport=80, flags="A", window=10000, options=[dss(dack=upto)])))

    k, t = 0, 0.01
    while t < 3.0:
        if hole and k == 100:
            for j in range(101, 110):
                data(t, j)
                ack(t + 0.001, 100_000)
                t += 0.01
            t = 1.5
            data(t, 100)
            ack(t + 0.001, 110_000)
            k, t = 110, t + 0.01
            continue
        data(t, k)
        ack(t + 0.001, (k + 1) * 1000)
        k, t = k + 1, t + 0.01
    return sorted(frames, key=lambda f: f[0])


def _write_frames(path, frames) -> None:
    from scapy.utils import PcapWriter

    w = PcapWriter(str(path), linktype=1, snaplen=128)
    w.write_header(None)
    for t, p in frames:
        raw = bytes(p)
        at = 1700000000.0 + t
        w.write_packet(raw, sec=int(at), usec=round((at - int(at)) * 1e6), wirelen=len(raw))
    w.close()


def test_window_finds_the_stall_behind_a_gap_that_filled_the_receive_window(tmp_path):
    trace = load_script("scripts/seed003_trace.py")
    for name, hole in (("gap", True), ("smooth", False)):
        (tmp_path / name).mkdir()
        _write_frames(tmp_path / name / "h1-eth1.pcap", _mptcp_frames(hole))
    gap = trace.window(tmp_path / "gap", {"10.1.1.2"}, from_s=0.5)
    smooth = trace.window(tmp_path / "smooth", {"10.1.1.2"}, from_s=0.5)
    assert gap["rwnd_mb_median"] == smooth["rwnd_mb_median"] == 0.01
    # the bins from 1.1 to 1.5 s got nothing new, and each began with the window full
    assert round(gap["stalled_share"] * gap["bins"]) == 4
    assert gap["stalled_full_share"] == 1.0
    # the late mapping itself, sent once, ended the one stall
    assert gap["stalls_ended_by"] == {"path 1 first copy": 1}
    assert smooth["stalls_ended_by"] == {}
    assert smooth["stalled_share"] == 0.0 and smooth["window_full_share"] == 0.0
    assert smooth["held_mb_median"] == 0.0


def test_window_says_when_a_run_has_no_mptcp_option(tmp_path):
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    _write_frames(tmp_path / "h1-eth0.pcap", [
        (t / 100, Ether() / IP(src="10.0.0.2", dst="10.1.1.2") / TCP(sport=80, dport=4000))
        for t in range(100)])
    trace = load_script("scripts/seed003_trace.py")
    out = trace.window(tmp_path, {"10.1.1.2"})
    assert "not an MPTCP run" in out["error"]
    assert "no h1-eth" in trace.window(tmp_path / "none", {"10.1.1.2"})["error"]
