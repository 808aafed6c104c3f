"""Seed 000 (MPTCP-RB) in the reference experiment: RB against the default scheduler on
burstiness and on what its retransmissions are, from a results folder of configs/noisy.yaml
(or any plan with a `host` factor of levels vanilla and rb).

    python scripts/seed000_rb.py bursts results/noisy-burst
    python scripts/seed000_rb.py retrans results/noisy-burst        # needs the captures
    python scripts/seed000_rb.py wire results/noisy-burst --flow-type short  # captures
    python scripts/seed000_rb.py shares results/noisy-burst --flow-type short  # captures

`bursts`: per flow type and MPTCP switching level, metrics.csv's burstiness (the
packet-weighted mean burst at the server's access link), the largest burst and the
retransmitted share, vanilla against rb, with 95 % intervals (Welch) of RB's effect in %
of vanilla's mean.

`retrans`: per transfer of the MPTCP runs, from the captures at the server's access link:
the retransmitted data packets split by what preceded them on their subflow (a timeout: the
subflow sent nothing for at least MIN_RTO_S before; otherwise fast recovery), the subflows'
share of the data (how evenly the scheduler spread it: the largest subflow's share), and
the packets sent in the connection's first round trip (slow start's first burst, all
subflows together); means per cell.

`wire`: per transfer of the MPTCP runs, how its data left the server, from the captures at
the server's access link (capture order): burstiness as metrics.csv has it; the share of
the packet pairs inside a burst captured at the same instant (under SAME_INSTANT_S apart:
segments of one GSO skb, which the emulated link's shaper lets out together); burstiness
again after re-timing the server's frames on that link as a link of its rate sends them
(each frame leaves once the one before it is sent); the packet-weighted mean run of
consecutive packets on one subflow; the same run in DSN order (each DSN's first
transmission: the scheduler's decisions, which it takes in DSN order) and the share of the
packets in such runs longer than rb's pattern allows (4); and the data packets
sent behind a higher data sequence number already sent (out of DSN order at the sender), in
%; means per cell.

`shares`: per transfer of the MPTCP runs with rb, the shares rb's pattern gets from the
subflows' handshake RTTs (SYN-ACK out to the client's ACK in, at the server's link: the
sample TCP's minimum RTT starts from) against the least RTT of a data segment on any of the
connection's subflows (a segment sent once, out to the first ACK covering it); transfers
split by whether the handshake RTTs give equal shares; per group: transfers, the favoured
subflow's handshake RTT, the lowest data RTT, the share of transfers whose favoured
handshake RTT stays more than EQUAL_PCT below every data RTT (the pattern cannot turn
equal), the share of transfers whose subflows' least data RTTs would give equal shares,
the largest subflow's share of the data and the same-subflow run in DSN order.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from pathdiv.analysis.capture.flows import (
    group_connections,
    match_transfers,
    read_link_captures,
    split_subflows,
)
from pathdiv.analysis.capture.pcap import ip_to_int
from pathdiv.analysis.metrics.reorder_queue import Segment, segments_from_pcap
from pathdiv.analysis.metrics.table import load_manifest, load_transfers
from pathdiv.analysis.metrics.transfer import (
    PairGeometry,
    burst_sizes,
    burstiness,
    signed_offset,
)
from pathdiv.topologies.conditions import topology_of

MPTCP_LEVELS = ("ecmp-mptcp", "ps-mptcp")
MIN_RTO_S = 0.2  # Linux's TCP_RTO_MIN: a subflow silent this long before a resend timed out
SAME_INSTANT_S = 50e-6  # a tenth of a full frame's time at 20 Mbit/s: not serialised
RB_RESOLUTION, RB_EQUAL_PCT = 4, 20  # the rb module parameters' defaults (kernels/README.md)
SYN, ACK = 0x02, 0x10


def welch_ci(a: np.ndarray, b: np.ndarray) -> str:
    """a's mean against b's in % of b's mean, [95 % interval], Welch's p."""
    if len(a) < 2 or len(b) < 2 or b.mean() == 0:
        return "–"
    sa, sb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(sa + sb)
    df = (sa + sb) ** 2 / (sa**2 / (len(a) - 1) + sb**2 / (len(b) - 1)) if se else 1.0
    half = float(stats.t.ppf(0.975, df)) * se
    d = a.mean() - b.mean()
    p = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
    return (f"{100 * d / b.mean():+.1f} % [{100 * (d - half) / b.mean():+.1f}, "
            f"{100 * (d + half) / b.mean():+.1f}], p = {p:.2g}")


def bursts(folder: Path) -> str:
    """Per flow type and MPTCP switching level: burstiness and retransmitted share (groups,
    metrics.csv), RB against vanilla with intervals; the largest burst per transfer
    (transfer_metrics.csv)."""
    m = pd.read_csv(folder / "metrics.csv")
    m = m[m["switching"].isin(MPTCP_LEVELS)]
    t = pd.read_csv(folder / "transfer_metrics.csv").merge(
        m[["run_id", "switching", "host"]].drop_duplicates(), on="run_id")
    out = ["| flow type | switching | burstiness vanilla | rb | rb vs vanilla | largest burst "
           "vanilla / rb | retrans % vanilla / rb | rb vs vanilla (retrans) |",
           "| --- " * 8 + "|"]

    def values(frame: pd.DataFrame, col: str) -> np.ndarray:
        return frame[col].dropna().to_numpy(float)

    for (flow, sw), g in m.groupby(["flow_type", "switching"]):
        v, r = (g[g["host"] == h] for h in ("vanilla", "rb"))
        tg = t[(t["flow_type"] == flow) & (t["switching"] == sw)]
        tv, tr = (tg[tg["host"] == h]["burst_pkts_max"].mean() for h in ("vanilla", "rb"))
        out.append(
            f"| {flow} | {sw} | {values(v, 'burstiness').mean():.2f} | "
            f"{values(r, 'burstiness').mean():.2f} | "
            f"{welch_ci(values(r, 'burstiness'), values(v, 'burstiness'))} | "
            f"{tv:.1f} / {tr:.1f} | "
            f"{values(v, 'retrans_pct').mean():.2f} / {values(r, 'retrans_pct').mean():.2f} | "
            f"{welch_ci(values(r, 'retrans_pct'), values(v, 'retrans_pct'))} |")
    return "\n".join(out)


def markdown(frame: pd.DataFrame) -> str:
    """A table of `frame` (its index levels first) in Markdown, numbers as they are."""
    flat = frame.reset_index()
    lines = ["| " + " | ".join(map(str, flat.columns)) + " |",
             "| --- " * len(flat.columns) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |"
              for row in flat.itertuples(index=False)]
    return "\n".join(lines)


def transfer_retrans(sent: pd.DataFrame) -> dict[str, float]:
    """One transfer's data packets at the server's link (subflow, seq, payload, ts, in
    capture order): resends after a timeout and in fast recovery, and the largest
    subflow's share of the data."""
    timeout = fast = 0
    per_sf: dict[int, int] = {}
    for sf, rows in sent.groupby("subflow").indices.items():
        d = sent.iloc[rows]
        base = d["seq"].to_numpy()[:1]
        start = signed_offset(d["seq"].to_numpy(), np.repeat(base, len(d)))
        end = start + d["payload"].to_numpy().astype(np.int64)
        prev_max = np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(end)[:-1]))
        resent = start < prev_max
        gaps = np.diff(d["ts"].to_numpy(), prepend=d["ts"].to_numpy()[:1])
        timeout += int((resent & (gaps >= MIN_RTO_S)).sum())
        fast += int((resent & (gaps < MIN_RTO_S)).sum())
        per_sf[int(sf)] = int(d["payload"].sum())
    total = sum(per_sf.values())
    return {"resent_after_timeout": timeout, "resent_fast": fast,
            "largest_subflow_share": max(per_sf.values()) / total if total else math.nan}


@dataclass(frozen=True)
class MptcpTransfer:
    """One transfer of an MPTCP run with captures, and the packets it is read from."""

    run_dir: Path
    factors: dict[str, Any]
    topo: Any
    run_packets: pd.DataFrame  # every captured packet of the run, by subflow
    transfer: Any  # its row of the run's transfers
    geo: PairGeometry
    packets: pd.DataFrame  # its subflows' packets, in capture order


def mptcp_transfers(folder: Path, flow_types: Sequence[str] = ()) -> Iterator[MptcpTransfer]:
    """Each transfer with subflows in the folder's MPTCP runs that kept their captures
    (only `flow_types`' runs where given)."""
    for run_dir in sorted((folder / "runs").iterdir()):
        manifest = load_manifest(run_dir)
        factors = manifest.get("factors", {})
        if (factors.get("switching") not in MPTCP_LEVELS
                or (flow_types and manifest.get("flow_type") not in flow_types)
                or not (run_dir / "captures").is_dir()):
            continue
        topo = topology_of(manifest["config"])
        transfers = load_transfers(run_dir)
        pk, table = split_subflows(read_link_captures(run_dir / "captures", topo))
        members = match_transfers(transfers, group_connections(table), topo)
        index = pk.groupby("subflow").indices
        for tr in transfers.itertuples(index=False):
            sfs = [s for s in members.get(int(tr.transfer_id), []) if s in index]
            if sfs:
                yield MptcpTransfer(
                    run_dir, factors, topo, pk, tr,
                    PairGeometry.of(topo, str(tr.client), str(tr.server)),
                    pk.iloc[np.sort(np.concatenate([index[s] for s in sfs]))])


def retrans(folder: Path, flow_types: Sequence[str] = ()) -> str:
    rows = []
    for t in mptcp_transfers(folder, flow_types):
        tr, tp = t.transfer, t.packets
        server_addrs = {int(a) for a in tp[tp["sport"] == tr.server_port]["src"]}
        sent = tp[(tp["link"].to_numpy() == t.geo.server_link)
                  & tp["src"].isin(server_addrs).to_numpy() & (tp["payload"] > 0)]
        if sent.empty:
            continue
        rows.append({"switching": t.factors["switching"], "host": t.factors.get("host"),
                     "flow_type": tr.flow_type, **transfer_retrans(sent)})
    t = pd.DataFrame(rows)
    if t.empty:
        return "(no MPTCP run with captures)"
    means = t.groupby(["flow_type", "switching", "host"]).mean(numeric_only=True)
    return markdown(means.round(3))


def serialised(ts: np.ndarray, wire_bytes: np.ndarray, rate_mbps: float) -> np.ndarray:
    """When frames captured at times `ts` (s, in order) would leave a link of `rate_mbps`
    that sends one frame at a time: each starts once it arrived and the one before it
    has been sent."""
    out = np.empty(len(ts))
    free = -math.inf
    for i, (t, w) in enumerate(zip(ts, wire_bytes, strict=True)):
        free = max(float(t), free) + float(w) * 8 / (rate_mbps * 1e6)
        out[i] = free
    return out


def run_lengths(values: np.ndarray) -> float:
    """Packet-weighted mean length of the runs of equal consecutive `values`."""
    if not len(values):
        return math.nan
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    n = np.diff(np.r_[starts, len(values)]).astype(float)
    return float((n * n).sum() / n.sum())


def behind_pct(dsns: Sequence[int]) -> float:
    """Data packets sent after a higher data sequence number was sent, in % (capture
    order; a resend counts too)."""
    d = np.asarray(dsns, dtype=float)
    if len(d) < 2:
        return math.nan
    return float(100 * (d[1:] < np.maximum.accumulate(d)[:-1]).mean())


def dsn_order_subflows(segments: Sequence[tuple[int, Any]]) -> np.ndarray:
    """Over (DSN, subflow) pairs in capture order, each DSN's first transmission's subflow
    (numbered by first appearance) in DSN order: the subflows the scheduler dealt."""
    first: dict[int, Any] = {}
    for dsn, sf in segments:
        first.setdefault(dsn, sf)
    number: dict[Any, int] = {}
    return np.array([number.setdefault(first[d], len(number)) for d in sorted(first)],
                    dtype=np.int64)


def decision_run(segments: Sequence[tuple[int, Any]]) -> float:
    """Packet-weighted mean run of one subflow over (DSN, subflow) pairs in capture order,
    taken in DSN order over each DSN's first transmission: the runs the scheduler dealt."""
    return run_lengths(dsn_order_subflows(segments))


def longer_runs_pct(segments: Sequence[tuple[int, Any]], longer_than: int = RB_RESOLUTION
                    ) -> float:
    """Share (%) of the first transmissions that lie in DSN-order runs of one subflow longer
    than `longer_than`: rb's pattern gives no subflow more than rb_resolution slots in a
    row, so longer runs are its stand-ins for subflows without window room."""
    sfs = dsn_order_subflows(segments)
    if not len(sfs):
        return math.nan
    starts = np.flatnonzero(np.r_[True, sfs[1:] != sfs[:-1]])
    n = np.diff(np.r_[starts, len(sfs)])
    return float(100 * n[n > longer_than].sum() / n.sum())


def rb_counts(rtts_us: Sequence[float], resolution: int = RB_RESOLUTION,
              equal_pct: int = RB_EQUAL_PCT) -> list[int]:
    """Pattern slots per subflow as rb quantises them (sched_rb_alloc.c, step 1)."""
    low = min(rtts_us)
    equal = low + low * equal_pct / 100
    eff = [low if r <= equal else r for r in rtts_us]
    return [max(1, int((resolution * low + r / 2) // r)) for r in eff]


def handshake_rtts(pk: pd.DataFrame, server_port: int) -> dict[Any, float]:
    """Per subflow, seconds from the server's SYN-ACK to the client's first ACK, from one
    link's packets (ts, subflow, sport, dport, flags) in capture order."""
    out: dict[Any, float] = {}
    synack: dict[Any, float] = {}
    for ts, sf, sport, dport, flags in pk[["ts", "subflow", "sport", "dport",
                                           "flags"]].itertuples(index=False):
        if sport == server_port and flags & (SYN | ACK) == SYN | ACK:
            synack.setdefault(sf, float(ts))
        elif (dport == server_port and flags & ACK and not flags & SYN
              and sf in synack and sf not in out):
            out[sf] = float(ts) - synack[sf]
    return out


def data_rtts(pk: pd.DataFrame, server_port: int) -> dict[Any, float]:
    """Per subflow, the least seconds from a data segment the server sent once to the first
    ACK covering it, from one link's packets in capture order."""
    out: dict[Any, float] = {}
    for sf, rows in pk.groupby("subflow").indices.items():
        d = pk.iloc[rows]
        sent = d[(d["sport"] == server_port) & (d["payload"] > 0)]
        acks = d[(d["dport"] == server_port) & (d["flags"] & ACK > 0)]
        if sent.empty or acks.empty:
            continue
        base = np.repeat(sent["seq"].to_numpy()[:1], len(sent))
        end = signed_offset(sent["seq"].to_numpy(), base) + sent["payload"].to_numpy()
        once = pd.Series(end).map(pd.Series(end).value_counts()).to_numpy() == 1
        acked = signed_offset(acks["ack"].to_numpy(), np.repeat(base[:1], len(acks)))
        ack_ts = acks["ts"].to_numpy()
        best = math.inf
        for e, t in zip(end[once], sent["ts"].to_numpy()[once], strict=True):
            later = np.flatnonzero((acked >= e) & (ack_ts > t))
            if len(later):
                best = min(best, float(ack_ts[later[0]] - t))
        if best < math.inf:
            out[sf] = best
    return out


def transfer_wire(sent: pd.DataFrame, sent_at: np.ndarray, rate_mbps: float,
                  dsns: Sequence[int]) -> dict[str, float]:
    """One transfer's data packets at the server's link (ts, wire_len, subflow, capture
    order), their times on a serialising link (`sent_at`) and their DSNs."""
    ts, wire = sent["ts"].to_numpy(), sent["wire_len"].to_numpy()
    gaps = np.diff(ts)
    inside = gaps <= 1.5 * wire[1:] * 8 / (rate_mbps * 1e6)
    return {
        "burstiness": burstiness(burst_sizes(ts, wire, rate_mbps))[0],
        "same_instant_pct": float(100 * (gaps[inside] < SAME_INSTANT_S).mean())
        if inside.any() else math.nan,
        "burstiness_serialised": burstiness(burst_sizes(sent_at, wire, rate_mbps))[0],
        "subflow_run": run_lengths(sent["subflow"].to_numpy()),
        "dsn_behind_pct": behind_pct(dsns),
    }


def wire(folder: Path, flow_types: Sequence[str] = ()) -> str:
    rows = []
    segments: dict[tuple[Path, str, int], list[Segment]] = {}
    for t in mptcp_transfers(folder, flow_types):
        tr, tp, pk, geo, topo = t.transfer, t.packets, t.run_packets, t.geo, t.topo
        rate = float(geo.server_mbps or math.nan)
        server_addrs = {int(a) for a in tp[tp["sport"] == tr.server_port]["src"]}
        at_server = (pk["link"].to_numpy() == geo.server_link) & pk["src"].isin(
            {ip_to_int(a) for a in topo.host_addresses(str(tr.server))}).to_numpy()
        frames = pk[at_server]
        sent_at = pd.Series(serialised(frames["ts"].to_numpy(),
                                       frames["wire_len"].to_numpy(), rate),
                            index=frames.index)
        mine = (tp["link"].to_numpy() == geo.server_link) & tp["src"].isin(
            server_addrs).to_numpy() & (tp["payload"] > 0).to_numpy()
        sent = tp[mine]
        if len(sent) < 2:
            continue
        intf = topo.links[geo.server_link].b.intf
        key = (t.run_dir, intf, int(tr.server_port))
        if key not in segments:
            segments[key] = segments_from_pcap(
                t.run_dir / "captures" / f"{intf}.pcap", int(tr.server_port))
        ports = set(tp[tp["sport"] == tr.server_port]["dport"].astype(int))
        first, last = float(tp["ts"].min()), float(tp["ts"].max())
        mine_segs = [s for s in segments[key] if s.subflow[3] in ports and first <= s.ts <= last]
        dsns = [s.dsn for s in mine_segs]
        rows.append({"flow_type": tr.flow_type, "switching": t.factors["switching"],
                     "host": t.factors.get("host"),
                     **transfer_wire(sent, sent_at.loc[sent.index].to_numpy(), rate, dsns),
                     "dsn_order_run": decision_run([(s.dsn, s.subflow) for s in mine_segs]),
                     "dsn_order_runs_over_4_pct": longer_runs_pct(
                         [(s.dsn, s.subflow) for s in mine_segs])})
    t = pd.DataFrame(rows)
    if t.empty:
        return "(no MPTCP run with captures)"
    means = t.groupby(["flow_type", "switching", "host"]).mean(numeric_only=True)
    means["transfers"] = t.groupby(["flow_type", "switching", "host"]).size()
    return markdown(means.round(2))


def shares(folder: Path, flow_types: Sequence[str] = ()) -> str:
    rows = []
    segments: dict[tuple[Path, str, int], list[Segment]] = {}
    for t in mptcp_transfers(folder, flow_types):
        if t.factors.get("host") != "rb":
            continue
        tr, geo = t.transfer, t.geo
        port = int(tr.server_port)
        at_link = t.packets[t.packets["link"].to_numpy() == geo.server_link]
        hs = handshake_rtts(at_link, port)
        data = data_rtts(at_link, port)
        intf = t.topo.links[geo.server_link].b.intf
        key = (t.run_dir, intf, port)
        if key not in segments:
            segments[key] = segments_from_pcap(t.run_dir / "captures" / f"{intf}.pcap", port)
        ports = set(t.packets[t.packets["sport"] == port]["dport"].astype(int))
        first, last = float(t.packets["ts"].min()), float(t.packets["ts"].max())
        mine = [(s.dsn, s.subflow[3]) for s in segments[key]
                if s.subflow[3] in ports and first <= s.ts <= last]
        if len(hs) < 2 or not data or len(mine) < 2:
            continue
        sfs = sorted(hs)
        counts = rb_counts([max(hs[s], 1e-6) * 1e6 for s in sfs])
        favoured = hs[sfs[counts.index(max(counts))]]
        per_sf = pd.Series([sf for _, sf in mine]).value_counts()
        rows.append({"handshake_shares": "equal" if len(set(counts)) == 1 else "unequal",
                     "favoured_handshake_ms": 1e3 * favoured,
                     "lowest_data_rtt_ms": 1e3 * min(data.values()),
                     "stays_unequal_pct": 100.0 * (
                         favoured * (1 + RB_EQUAL_PCT / 100) < min(data.values()))
                     if len(set(counts)) > 1 else math.nan,
                     "data_rtt_equal_pct": 100.0 * (len(set(rb_counts(
                         [max(r, 1e-6) * 1e6 for r in data.values()]))) == 1)
                     if len(data) > 1 else math.nan,
                     "largest_subflow_share": float(per_sf.max() / per_sf.sum()),
                     "dsn_order_run": decision_run(mine)})
    t = pd.DataFrame(rows)
    if t.empty:
        return "(no rb run with captures)"
    g = t.groupby("handshake_shares")
    out = g.median(numeric_only=True).add_suffix(" (median)")
    out["stays_unequal_pct"] = g["stays_unequal_pct"].mean()
    out["data_rtt_equal_pct"] = g["data_rtt_equal_pct"].mean()
    out["largest_subflow_share (mean)"] = g["largest_subflow_share"].mean()
    out["dsn_order_run (mean)"] = g["dsn_order_run"].mean()
    out = out.drop(columns=["stays_unequal_pct (median)", "data_rtt_equal_pct (median)"])
    out["transfers"] = g.size()
    return markdown(out.round(2))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("bursts", "retrans", "wire", "shares"))
    parser.add_argument("results", type=Path)
    parser.add_argument("--flow-type", action="append", default=[],
                        help="retrans, wire, shares: only runs of this flow type (repeatable)")
    args = parser.parse_args(argv)
    if args.what == "bursts":
        print(bursts(args.results))
    elif args.what == "retrans":
        print(retrans(args.results, args.flow_type))
    elif args.what == "wire":
        print(wire(args.results, args.flow_type))
    else:
        print(shares(args.results, args.flow_type))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
