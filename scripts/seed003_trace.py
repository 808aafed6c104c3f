"""Coupled BBR's state over time, from the congestion-control traces of paths runs
(`capture.cc_trace_ms`, experiments/traffic/sockdiag.py): what it measured, what it paced
at, and whether its probes could be measured.

    python scripts/seed003_trace.py cycles RESULTS/runs/*/captures/cc_trace-pdp-h2.jsonl
    python scripts/seed003_trace.py series TRACE --step 2
    python scripts/seed003_trace.py compact TRACE... --out trace.csv.gz --step 0.1

`cycles`: per socket, over the PROBE_BW cycles after `--from-s` (a cycle starts where the
pacing gain turns 1.25): cycles seen, the median length of the probing phase, median RTT
and min RTT, and the largest delivery-rate sample of each cycle over the bandwidth
estimate at the cycle's start (median and mean: below 1, the estimate cannot grow and any
shortfall lowers it; BBR's estimate is the windowed maximum of these samples), and the
share of samples with nothing queued and nothing in flight (the subflow had no data).
`series`: per socket, every `--step` seconds: throughput from bytes acked, the bandwidth
estimate, the pacing gain and rate, cwnd, packets in flight, RTT, bytes queued.
`compact`: the same rows for several traces as one CSV (gzipped if the name ends in .gz),
small enough to commit beside a reproduction.
`eq2`: per run (a run's captures folder), after the measured sender's start-up (from the
first sample where every one of its sockets has paced at 1.25 or 0.75, PROBE_BW's
probing gains) to its last sample: each sender socket's throughput, mean bandwidth
estimate BW_i, pacing rate, β_i (Eq. 2 from the sampled BW_j) and median min RTT (the
measured connection's and the background flows'; path = the second octet of the peer's
address, docs/paths.md), the connection's
throughput against Eq. 2's prediction, the time mean of max_j BW_j, and the bytes the
connection had acknowledged when its start-up ended.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import itertools
import json
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pathdiv.analysis.capture.dss import MASK, dss_fields
from pathdiv.analysis.capture.pcap import ip_to_int, read_pcap

PROBE_GAIN = 1.25
PROBE_BW_FIRST_GAINS = (1.25, 0.75)
MEASURED_SENDER = "pdp-h2"  # the measured server's namespace
MEASURED_TRACE = f"cc_trace-{MEASURED_SENDER}.jsonl"
RECEIVER_CAPTURES = "h1-eth*.pcap"  # the measured client's interfaces
WINDOW_BIN_S = 0.1
WINDOW_FULL = 0.9
STALL_S = 0.1  # a gap in new data at the receiver counted as a stall
SERIES_FIELDS = ("t_s", "thr_mbps", "bw_mbps", "pacing_gain", "pacing_mbps", "cwnd",
                 "inflight", "rtt_ms", "min_rtt_ms", "notsent_bytes", "retrans")


def read(path: Path) -> dict[str, list[dict[str, Any]]]:
    """A trace -> {socket 'remote:rport': its samples in time order}."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with path.open() as fh:
        for line in fh:
            d = json.loads(line)
            out[f"{d['remote']}:{d['rport']}"].append(d)
    return dict(out)


def _in_bw(samples: Sequence[dict[str, Any]], from_s: float) -> list[dict[str, Any]]:
    return [d for d in samples if d["t"] >= from_s and d.get("bbr_pacing_gain") is not None]


def _cycle_starts(s: Sequence[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """Where each PROBE_BW cycle starts (the gain turns 1.25) and each probe's length."""
    starts: list[float] = []
    probe_ms: list[float] = []
    run_start = None
    for prev, d in zip([None, *s[:-1]], s, strict=True) if s else ():
        probing = d["bbr_pacing_gain"] == PROBE_GAIN
        if probing and (prev is None or prev["bbr_pacing_gain"] != PROBE_GAIN):
            starts.append(d["t"])
            run_start = d["t"]
        if run_start is not None and not probing and prev is not None \
                and prev["bbr_pacing_gain"] == PROBE_GAIN:
            probe_ms.append(1000 * (d["t"] - run_start))
            run_start = None
    return starts, probe_ms


def cycle_ratios(samples: Sequence[dict[str, Any]], from_s: float = 0.0) -> list[float]:
    """Per PROBE_BW cycle after `from_s`: its largest delivery-rate sample over the
    bandwidth estimate at its start (a socket with no samples then has none)."""
    s = _in_bw(samples, from_s)
    ratios = []
    for a, b in itertools.pairwise(_cycle_starts(s)[0]):
        seg = [d for d in s if a <= d["t"] < b]
        if seg and seg[0]["bbr_bw_mbps"] > 0:
            ratios.append(max(d["delivery_mbps"] for d in seg) / seg[0]["bbr_bw_mbps"])
    return ratios


def cycles(samples: Sequence[dict[str, Any]], from_s: float = 0.0) -> dict[str, Any]:
    """The PROBE_BW cycles of one socket's samples (see the module's description)."""
    s = _in_bw(samples, from_s)
    probe_ms = _cycle_starts(s)[1]
    ratios = cycle_ratios(samples, from_s)
    idle = [d for d in s if d["notsent_bytes"] == 0 and d["unacked"] == 0]
    return {
        "cc": s[0]["cc"] if s else "",
        "cycles": len(ratios),
        "probe_ms_median": round(statistics.median(probe_ms), 1) if probe_ms else None,
        "rtt_ms_median": round(statistics.median(d["rtt_us"] for d in s) / 1000, 1)
        if s else None,
        "min_rtt_ms_median": round(statistics.median(d["min_rtt_us"] for d in s) / 1000, 1)
        if s else None,
        "max_sample_over_bw_median": round(statistics.median(ratios), 3) if ratios else None,
        "max_sample_over_bw_mean": round(statistics.mean(ratios), 3) if ratios else None,
        "idle_share": round(len(idle) / len(s), 3) if s else None,
    }


def series(samples: Sequence[dict[str, Any]], step: float) -> list[dict[str, Any]]:
    """One row per `step` seconds (the first sample at or after each step)."""
    rows: list[dict[str, Any]] = []
    prev: dict[str, Any] | None = None
    for d in samples:
        if prev is not None and d["t"] - prev["t"] < step:
            continue
        thr = 8 * (d["bytes_acked"] - prev["bytes_acked"]) / (d["t"] - prev["t"]) / 1e6 \
            if prev is not None else 0.0
        rows.append({
            "t_s": round(d["t"], 3), "thr_mbps": round(thr, 3),
            "bw_mbps": d.get("bbr_bw_mbps"), "pacing_gain": d.get("bbr_pacing_gain"),
            "pacing_mbps": d["pacing_mbps"], "cwnd": d["snd_cwnd"], "inflight": d["unacked"],
            "rtt_ms": round(d["rtt_us"] / 1000, 2), "min_rtt_ms": round(d["min_rtt_us"] / 1000, 2),
            "notsent_bytes": d["notsent_bytes"], "retrans": d["total_retrans"]})
        prev = d
    return rows


def compact(traces: Iterable[Path], step: float) -> str:
    """Several traces' series as one CSV: trace, socket, cc and the series fields."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["trace", "socket", "cc", *SERIES_FIELDS])
    for path in traces:
        for sock, samples in read(path).items():
            for row in series(samples, step):
                w.writerow([str(path), sock, samples[0]["cc"],
                            *(row[f] for f in SERIES_FIELDS)])
    return buf.getvalue()


def _path(sock: str) -> int:
    """The path of a socket 'remote:rport' (peers are 10.<path>.x.x, docs/paths.md)."""
    return int(sock.split(".")[1])


def _mean(values: Iterable[float]) -> float | None:
    v = list(values)
    return round(statistics.mean(v), 3) if v else None


def _rate(samples: Sequence[dict[str, Any]], start: float, end: float) -> float | None:
    """Mbit/s acknowledged between the samples nearest after `start` and before `end`."""
    inside = [d for d in samples if start <= d["t"] <= end]
    if len(inside) < 2 or inside[-1]["t"] <= inside[0]["t"]:
        return None
    acked = inside[-1]["bytes_acked"] - inside[0]["bytes_acked"]
    return round(8 * acked / (inside[-1]["t"] - inside[0]["t"]) / 1e6, 3)


def eq2(captures: Path) -> dict[str, Any]:
    """One run's sender sockets held against Eq. 2 (see the module's description)."""
    measured = read(captures / MEASURED_TRACE)
    if not measured:
        return {"run": str(captures), "error": f"no samples in {MEASURED_TRACE}"}
    starts = []
    for samples in measured.values():
        probing = [d["t"] for d in samples
                   if d.get("bbr_pacing_gain") in PROBE_BW_FIRST_GAINS]
        starts.append(probing[0] if probing else None)
    t0 = min(d["t"] for s in measured.values() for d in s)
    end = max(d["t"] for s in measured.values() for d in s)
    steady = max((t for t in starts if t is not None), default=end)
    by_t: dict[float, dict[str, float]] = defaultdict(dict)
    for sock, samples in measured.items():
        for d in samples:
            if steady <= d["t"] <= end and d.get("bbr_bw_mbps") is not None:
                by_t[d["t"]][sock] = d["bbr_bw_mbps"]
    complete = [bws for bws in by_t.values() if len(bws) == len(measured)]
    betas: dict[str, list[float]] = defaultdict(list)
    for bws in complete:
        top, squares = max(bws.values()), sum(b * b for b in bws.values())
        for sock, b in bws.items():
            betas[sock].append(b * top / squares if squares else 1.0)
    sockets = []
    for name in sorted(captures.glob("cc_trace-*.jsonl")):
        for sock, samples in read(name).items():
            inside = [d for d in samples if steady <= d["t"] <= end]
            sockets.append({
                "sender": name.stem.removeprefix("cc_trace-"), "socket": sock,
                "path": _path(sock), "cc": samples[0]["cc"],
                "thr_mbps": _rate(samples, steady, end),
                "bw_mbps": _mean(d["bbr_bw_mbps"] for d in inside
                                 if d.get("bbr_bw_mbps") is not None),
                "pacing_mbps": _mean(d["pacing_mbps"] for d in inside),
                "beta": _mean(betas[sock]) if name.name == MEASURED_TRACE else None,
                "rtt_ms": _mean(d["rtt_us"] / 1000 for d in inside),
                "min_rtt_ms": round(statistics.median(d["min_rtt_us"] for d in inside) / 1000, 1)
                if inside else None,
                "cwnd": _mean(d["snd_cwnd"] for d in inside),
                "inflight": _mean(d["unacked"] for d in inside)})
    acked_at_steady = sum(max((d["bytes_acked"] for d in s if d["t"] <= steady), default=0)
                          for s in measured.values())
    conn = [s for s in sockets if s["sender"] == MEASURED_SENDER]
    return {
        "run": str(captures), "start_s": round(t0, 3),
        "startup_s": round(steady - t0, 3), "acked_in_startup_mb": round(acked_at_steady / 1e6, 3),
        "steady_s": round(end - steady, 3),
        "conn_thr_mbps": round(sum(s["thr_mbps"] or 0 for s in conn), 3),
        "eq2_max_bw_mbps": _mean(max(bws.values()) for bws in complete),
        "conn_pacing_mbps": round(sum(s["pacing_mbps"] or 0 for s in conn), 3),
        "sockets": sockets}


def starved(samples: Sequence[dict[str, Any]], from_s: float = 0.0) -> float | None:
    """The share of a socket's samples after `from_s` with nothing queued and room in
    its congestion window (see the module's description)."""
    inside = [d for d in samples if d["t"] >= from_s]
    if not inside:
        return None
    idle = sum(1 for d in inside if d["notsent_bytes"] == 0 and d["unacked"] < d["snd_cwnd"])
    return round(idle / len(inside), 4)


def _unwrap(values: np.ndarray, base: int) -> np.ndarray:
    """Low-32-bit sequence numbers as offsets from `base` (negative: before it)."""
    rel = (values - base) & MASK
    return np.where(rel >= 2**31, rel - 2**32, rel)


def window(captures: Path, receivers: set[str], from_s: float = 10.0) -> dict[str, Any]:
    """One MPTCP run's connection-level window at its receiver (module description)."""
    files = sorted(captures.glob(RECEIVER_CAPTURES))
    if not files:
        return {"run": str(captures), "error": f"no {RECEIVER_CAPTURES} in the folder"}
    frames = []
    for path in files:
        t = read_pcap(path)[["ts", "src", "dst", "sport", "dport", "flags"]]
        frames.append(t.join(dss_fields(path)))
    pk = pd.concat(frames, ignore_index=True).sort_values("ts", kind="stable")
    rx = pk["src"].isin({ip_to_int(a) for a in receivers})
    data = pk[~rx & (pk["dsn"] >= 0) & (pk["dlen"] > 0)]
    acks = pk[rx & (pk["dack"] >= 0)]
    if data.empty or acks.empty:
        return {"run": str(captures), "error": "no DSS mapping or DATA_ACK: not an MPTCP run"}
    syn = pk[rx & (pk["wscale"] >= 0) & (pk["flags"] & 0x02 > 0)]
    scale = {(r.src, r.sport, r.dst, r.dport): int(r.wscale) for r in syn.itertuples()}
    shift = np.array([scale.get((r.src, r.sport, r.dst, r.dport), 0)
                      for r in acks.itertuples()], dtype=np.int64)
    base = int(data["dsn"].iloc[0])
    sent = np.maximum.accumulate(_unwrap(data["dsn"].to_numpy(), base)
                                 + data["dlen"].to_numpy())
    acked = np.maximum.accumulate(_unwrap(acks["dack"].to_numpy(), base))
    rwnd = acks["win"].to_numpy() * 2.0 ** shift
    t0 = float(data["ts"].iloc[0]) + from_s
    grid = np.arange(t0, float(pk["ts"].iloc[-1]), WINDOW_BIN_S)
    i_d = np.searchsorted(data["ts"].to_numpy(), grid, side="right") - 1
    i_a = np.searchsorted(acks["ts"].to_numpy(), grid, side="right") - 1
    if len(grid) < 2 or (i_a < 0).any():
        return {"run": str(captures), "error": f"under {from_s + 2 * WINDOW_BIN_S} s of data"}
    held = sent[i_d] - acked[i_a]
    wnd = rwnd[i_a]
    full = held >= WINDOW_FULL * wnd
    moved = np.diff(sent[i_d]) > 0  # new data reached the receiver in the bin
    starts_full = full[:-1]
    stalled = ~moved
    return {
        "run": str(captures), "bins": int(len(grid) - 1),
        "held_mb_median": round(float(np.median(held)) / 1e6, 3),
        "rwnd_mb_median": round(float(np.median(wnd)) / 1e6, 3),
        "window_full_share": round(float(starts_full.mean()), 4),
        "stalled_share": round(float(stalled.mean()), 4),
        "stalled_full_share": round(float(starts_full[stalled].mean()), 4)
        if stalled.any() else None,
        "stalls_ended_by": stall_ends(data, acks, base, t0)}


def stall_ends(data: pd.DataFrame, acks: pd.DataFrame, base: int, t0: float) -> dict[str, int]:
    """Per gap of over STALL_S after `t0` in which no new data reached the receiver while
    it held data behind a missing byte (head-of-line blocking, not an idle sender): the
    segment that ended it, the one carrying the byte the receiver's DATA_ACK waited for,
    counted by its path (the second octet of the receiver's address, docs/paths.md) and
    whether the receiver had seen that mapping before (a resend) or not (a first copy)."""
    ts = data["ts"].to_numpy()
    lo = _unwrap(data["dsn"].to_numpy(), base)
    hi = lo + data["dlen"].to_numpy()
    path = (data["dst"].to_numpy() >> 16) & 0xFF
    top = np.maximum.accumulate(hi)
    new = np.flatnonzero(np.r_[True, top[1:] > top[:-1]])
    first_at: dict[int, int] = {}
    for i, start in enumerate(lo.tolist()):
        first_at.setdefault(start, i)
    a_ts = acks["ts"].to_numpy()
    a_top = np.maximum.accumulate(_unwrap(acks["dack"].to_numpy(), base))
    out: dict[str, int] = defaultdict(int)
    for a, b in itertools.pairwise(new):
        if ts[a] < t0 or ts[b] - ts[a] <= STALL_S:
            continue
        j = int(np.searchsorted(a_ts, ts[a], side="right")) - 1
        if j < 0:
            continue
        waited = a_top[j]
        if top[a] <= waited:  # nothing held beyond the gap: the sender was idle
            continue
        fill = np.flatnonzero((ts > ts[a]) & (lo <= waited) & (hi > waited))
        if not len(fill):
            out["unfilled"] += 1
            continue
        k = int(fill[0])
        kind = "resend" if first_at[int(lo[k])] < k else "first copy"
        out[f"path {path[k]} {kind}"] += 1
    return dict(sorted(out.items()))

def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cycles")
    c.add_argument("traces", type=Path, nargs="+")
    c.add_argument("--from-s", type=float, default=10.0,
                   help="leave out the first seconds (start-up)")
    s = sub.add_parser("series")
    s.add_argument("trace", type=Path)
    s.add_argument("--step", type=float, default=1.0)
    k = sub.add_parser("compact")
    k.add_argument("traces", type=Path, nargs="+")
    k.add_argument("--out", type=Path, required=True)
    k.add_argument("--step", type=float, default=0.1)
    e = sub.add_parser("eq2")
    e.add_argument("captures", type=Path, nargs="+", help="runs' captures folders")
    st = sub.add_parser("starved")
    st.add_argument("traces", type=Path, nargs="+")
    st.add_argument("--from-s", type=float, default=10.0,
                    help="leave out the first seconds (start-up)")
    w = sub.add_parser("window")
    w.add_argument("captures", type=Path, nargs="+", help="runs' captures folders")
    w.add_argument("--from-s", type=float, default=10.0,
                   help="seconds after the connection's first mapping left out")
    args = parser.parse_args(argv)
    if args.cmd == "cycles":
        for path in args.traces:
            for sock, samples in read(path).items():
                print(json.dumps({"trace": str(path), "socket": sock,
                                  **cycles(samples, args.from_s)}))
    elif args.cmd == "starved":
        for path in args.traces:
            for sock, samples in read(path).items():
                print(json.dumps({"trace": str(path), "socket": sock, "cc": samples[0]["cc"],
                                  "starved_share": starved(samples, args.from_s)}))
    elif args.cmd == "window":
        for folder in args.captures:
            measured = read(folder / MEASURED_TRACE)
            receivers = {sock.split(":")[0] for sock in measured}
            print(json.dumps(window(folder, receivers, args.from_s)))
    elif args.cmd == "eq2":
        for folder in args.captures:
            print(json.dumps(eq2(folder)))
    elif args.cmd == "series":
        for sock, samples in read(args.trace).items():
            print(f"== {sock} {samples[0]['cc']}")
            for row in series(samples, args.step):
                print(" ".join(f"{k}={v}" for k, v in row.items()))
    else:
        text = compact(args.traces, args.step)
        if args.out.suffix == ".gz":
            args.out.write_bytes(gzip.compress(text.encode()))
        else:
            args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
