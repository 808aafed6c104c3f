"""Seed 000 (MPTCP-RB) in the reference experiment: RB against the default scheduler on
burstiness and on what its retransmissions are, from a results folder of configs/noisy.yaml
(or any plan with a `host` factor of levels vanilla and rb).

    python scripts/seed000_rb.py bursts results/noisy-burst
    python scripts/seed000_rb.py retrans results/noisy-burst        # needs the captures
    python scripts/seed000_rb.py wire results/noisy-burst --flow-type short  # captures
    python scripts/seed000_rb.py shares results/noisy-burst --flow-type short  # captures
    python scripts/seed000_rb.py drops results/rb-drops-short       # fidelity.json
    python scripts/seed000_rb.py losses results/rb-drops-short      # captures
    python scripts/seed000_rb.py windows results/rb-drops-short     # captures

`bursts`: per flow type and MPTCP switching level, metrics.csv's burstiness (the
packet-weighted mean burst at the server's access link), the largest burst, the
retransmitted share and FCT, each other host level (rb, roundrobin, an ablation) against
vanilla, with 95 % intervals (Welch) of its effect in % of vanilla's mean.

`drops`: per host level, the egress queues' drops per run (fidelity.json) by where they
sit on the data's way from a server to its client (server access, edge to agg, agg to
core, core to agg, agg to edge, client access).

`losses`: per transfer, every data packet the server sent followed along its subflow's
path through the captures of every link: the packets that never reached the client's
access link by the queue that dropped them (the first link on the path whose capture
lacks them), the resends by what became of the packet they repeat, and the packets sent
in re-timed bursts of at least BIG_BURST packets and of fewer with how many of each were
lost; then each host level against vanilla over the runs' means (Welch).

`windows`: per transfer, how often the connection-level receive window (the client's
data ACK plus its window) held the server, and the share of the long later bursts that
ended at the window's edge.

`retrans`: per transfer of the MPTCP runs, from the captures at the server's access link:
the retransmitted data packets split by what preceded them on their subflow (a timeout: the
subflow sent nothing for at least MIN_RTO_S before; otherwise fast recovery), the subflows'
share of the data (how evenly the scheduler spread it: the largest subflow's share), and
the packets sent in the connection's first round trip (slow start's first burst, all
subflows together); means per cell.

`wire`: per transfer of the MPTCP runs, how its data left the server, from the captures at
the server's access link (capture order): burstiness as metrics.csv has it (the frames
re-timed as a link of its rate sends them, one at a time), split into the bursts that
began before the first ACK of data reached that link (the subflows' initial windows) and
the later ones, with the packet-weighted subflows per later burst; the same gap rule on the capture
times themselves (`burstiness_at_capture`, metrics.csv's definition before the re-timing);
the share of the packet pairs inside a burst at capture times captured at the same instant
(under SAME_INSTANT_S apart: segments of one GSO skb, which the emulated link's shaper lets
out together); the packet-weighted mean run of
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
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from pathdiv.analysis.capture import pcap
from pathdiv.analysis.capture.flows import (
    group_connections,
    match_transfers,
    read_link_captures,
    split_subflows,
)
from pathdiv.analysis.metrics.reorder_queue import Segment, segments_from_pcap
from pathdiv.analysis.metrics.table import load_manifest, load_transfers
from pathdiv.analysis.metrics.transfer import (
    BURST_GAP,
    PairGeometry,
    burst_sizes,
    burstiness,
    gap_runs,
    serialised,
    signed_offset,
)
from pathdiv.topologies.conditions import topology_of

MPTCP_LEVELS = ("ecmp-mptcp", "ps-mptcp")
MIN_RTO_S = 0.2  # Linux's TCP_RTO_MIN: a subflow silent this long before a resend timed out
SAME_INSTANT_S = 50e-6  # a tenth of a full frame's time at 20 Mbit/s: not serialised
RB_RESOLUTION, RB_EQUAL_PCT = 4, 20  # the rb module parameters' defaults (kernels/README.md)
SYN, ACK = 0x02, 0x10
MPTCP_OPTION = 30  # TCP option kind of every MPTCP option
BIG_BURST = 10  # packets: the bursts `windows` looks at


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
    metrics.csv), each other host level (rb, or an ablation) against vanilla with
    intervals; the largest burst per transfer (transfer_metrics.csv); then FCT the same
    way."""
    m = pd.read_csv(folder / "metrics.csv")
    m = m[m["switching"].isin(MPTCP_LEVELS)]
    t = pd.read_csv(folder / "transfer_metrics.csv").merge(
        m[["run_id", "switching", "host"]].drop_duplicates(), on="run_id")
    out = ["| flow type | switching | host | burstiness vanilla | host's | host vs vanilla | "
           "largest burst vanilla / host's | retrans % vanilla / host's | "
           "host vs vanilla (retrans) | FCT s vanilla / host's | host vs vanilla (FCT) |",
           "| --- " * 11 + "|"]

    def values(frame: pd.DataFrame, col: str) -> np.ndarray:
        return frame[col].dropna().to_numpy(float)

    for (flow, sw), g in m.groupby(["flow_type", "switching"]):
        v = g[g["host"] == "vanilla"]
        tg = t[(t["flow_type"] == flow) & (t["switching"] == sw)]
        tv = tg[tg["host"] == "vanilla"]["burst_pkts_max"].mean()
        for host in sorted(set(g["host"]) - {"vanilla"}):
            r = g[g["host"] == host]
            tr = tg[tg["host"] == host]["burst_pkts_max"].mean()
            out.append(
                f"| {flow} | {sw} | {host} | {values(v, 'burstiness').mean():.2f} | "
                f"{values(r, 'burstiness').mean():.2f} | "
                f"{welch_ci(values(r, 'burstiness'), values(v, 'burstiness'))} | "
                f"{tv:.1f} / {tr:.1f} | "
                f"{values(v, 'retrans_pct').mean():.2f} / "
                f"{values(r, 'retrans_pct').mean():.2f} | "
                f"{welch_ci(values(r, 'retrans_pct'), values(v, 'retrans_pct'))} | "
                f"{values(v, 'fct_s').mean():.3f} / {values(r, 'fct_s').mean():.3f} | "
                f"{welch_ci(values(r, 'fct_s'), values(v, 'fct_s'))} |")
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
                    run_dir, factors, topo, tr,
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


def burst_ids(ts: np.ndarray, wire_bytes: np.ndarray, rate_mbps: float) -> np.ndarray:
    """Per frame, the number of its re-timed burst (as `burst_sizes` counts them)."""
    times = serialised(ts, wire_bytes, rate_mbps)
    tx = np.asarray(wire_bytes, dtype=float)[1:] * 8 / (rate_mbps * 1e6)
    return np.concatenate(([0], np.cumsum(np.diff(times) > BURST_GAP * tx))).astype(np.int64)


def later_burst_subflows(ts: np.ndarray, wire_bytes: np.ndarray, rate_mbps: float,
                         subflows: np.ndarray, t0: float) -> float:
    """Packet-weighted mean number of subflows in the re-timed bursts that began at or
    after `t0` (one: a subflow's own ACK clock or a stand-in run; several: a release over
    the connection's subflows at once); NaN without such bursts."""
    if not len(ts):
        return math.nan
    ids = burst_ids(ts, wire_bytes, rate_mbps)
    frame = pd.DataFrame({"id": ids, "sf": np.asarray(subflows)})
    g = frame.groupby("id")
    n, k = g.size().to_numpy(float), g["sf"].nunique().to_numpy(float)
    first = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    late = np.asarray(ts, dtype=float)[first] >= t0
    return float((n[late] * k[late]).sum() / n[late].sum()) if late.any() else math.nan


def burst_parts(ts: np.ndarray, wire_bytes: np.ndarray, rate_mbps: float,
                t0: float) -> tuple[float, float]:
    """burstiness (Σn²/Σn over the re-timed bursts, as `burst_sizes`) split in two parts
    that add up to it: the bursts whose first frame was captured before `t0`, and the
    others."""
    if not len(ts):
        return math.nan, math.nan
    ids = burst_ids(ts, wire_bytes, rate_mbps)
    n = np.bincount(ids).astype(float)
    first = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    early = np.asarray(ts, dtype=float)[first] < t0
    return float((n[early] ** 2).sum() / n.sum()), float((n[~early] ** 2).sum() / n.sum())


def transfer_wire(sent: pd.DataFrame, rate_mbps: float, dsns: Sequence[int],
                  first_ack_ts: float = math.inf) -> dict[str, float]:
    """One transfer's data packets at the server's link (ts, wire_len, subflow, capture
    order) and their DSNs; `first_ack_ts`: when the first ACK of data reached that link
    (burstiness's part from bursts that began before it: the initial windows)."""
    ts, wire = sent["ts"].to_numpy(), sent["wire_len"].to_numpy()
    initial, later = burst_parts(ts, wire, rate_mbps, first_ack_ts)
    gaps = np.diff(ts)
    inside = gaps <= 1.5 * wire[1:] * 8 / (rate_mbps * 1e6)
    return {
        "burstiness": burstiness(burst_sizes(ts, wire, rate_mbps))[0],
        "burstiness_initial_windows": initial,
        "burstiness_later": later,
        "later_burst_subflows": later_burst_subflows(ts, wire, rate_mbps,
                                                     sent["subflow"].to_numpy(), first_ack_ts),
        "burstiness_at_capture": burstiness(gap_runs(ts, wire, rate_mbps))[0],
        "same_instant_pct": float(100 * (gaps[inside] < SAME_INSTANT_S).mean())
        if inside.any() else math.nan,
        "subflow_run": run_lengths(sent["subflow"].to_numpy()),
        "dsn_behind_pct": behind_pct(dsns),
    }


def wire(folder: Path, flow_types: Sequence[str] = ()) -> str:
    rows = []
    segments: dict[tuple[Path, str, int], list[Segment]] = {}
    for t in mptcp_transfers(folder, flow_types):
        tr, tp, geo, topo = t.transfer, t.packets, t.geo, t.topo
        rate = float(geo.server_mbps or math.nan)
        server_addrs = {int(a) for a in tp[tp["sport"] == tr.server_port]["src"]}
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
                     **transfer_wire(sent, rate, dsns, first_data_ack(
                         tp[tp["link"].to_numpy() == geo.server_link], int(tr.server_port))),
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


HOP_NAMES = {("host", "up"): "server access", ("edge", "up"): "edge to agg",
             ("core", "up"): "agg to core", ("core", "down"): "core to agg",
             ("edge", "down"): "agg to edge", ("host", "down"): "client access"}


def egress_kind(topo: Any, name: str) -> str:
    """What a fidelity.json egress ('node:intf') is on the data's way from a server to a
    client: its link's tier and whether it sends up (towards the core) or down, named as
    HOP_NAMES (a host's own egress is 'server access': the data leaves it there; a
    switch's egress to a host is 'client access': where the subflows meet again)."""
    node, intf = name.split(":", 1)
    link = topo.link_of_intf(intf)
    return HOP_NAMES[(str(link.tier), "up" if node == link.a.node else "down")]


def drops(folder: Path) -> str:
    """Per host level: qdisc drops per run by egress kind (fidelity.json), mean per run."""
    rows = []
    for run_dir in sorted((folder / "runs").iterdir()):
        fid = run_dir / "fidelity.json"
        if not fid.is_file():
            continue
        manifest = load_manifest(run_dir)
        topo = topology_of(manifest["config"])
        record = pd.read_json(fid, typ="series")
        per: dict[str, int] = dict.fromkeys(HOP_NAMES.values(), 0)
        for link in record["links"]:
            if link.get("drops"):
                per[egress_kind(topo, str(link["link"]))] += int(link["drops"])
        rows.append({"host": manifest.get("factors", {}).get("host"),
                     "flow_type": manifest.get("flow_type"), **per,
                     "all": sum(per.values())})
    t = pd.DataFrame(rows)
    if t.empty:
        return "(no run with fidelity.json)"
    means = t.groupby(["flow_type", "host"]).mean(numeric_only=True)
    means["runs"] = t.groupby(["flow_type", "host"]).size()
    return markdown(means.round(1))


def hop_names(path: Sequence[int], tiers: Sequence[str]) -> list[str]:
    """HOP_NAMES of the links of a server-to-client path (link indices in the order the
    data crosses them, `tiers` their tiers): the first half climbs, the rest descends."""
    half = len(path) / 2
    return [HOP_NAMES[(tiers[i], "up" if i < half else "down")] for i in range(len(path))]


def drop_hop(seen: set[int], path: Sequence[int]) -> int | None:
    """Index into `path` of the first link a packet seen on the links `seen` did not
    cross (it was dropped at that link's egress queue); None when it crossed all."""
    for i, link in enumerate(path):
        if link not in seen:
            return i
    return None


def subflow_paths(data: pd.DataFrame, client_link: int) -> dict[Any, tuple[int, ...]]:
    """Per subflow, the links its data crossed in order (each packet's captures sorted by
    time), from the most common sequence among its packets that reached `client_link`;
    columns subflow, seq, ip_id, link, ts."""
    out: dict[Any, tuple[int, ...]] = {}
    got = data.groupby(["subflow", "seq", "ip_id"])["link"].transform(
        lambda s: client_link in set(s))
    for sf, rows in data[got.to_numpy(bool)].groupby("subflow").indices.items():
        d = data[got.to_numpy(bool)].iloc[rows].sort_values("ts", kind="stable")
        seqs = d.groupby(["seq", "ip_id"], sort=False)["link"].agg(tuple)
        out[sf] = seqs.value_counts().index[0]
    return out


def transfer_losses(data: pd.DataFrame, server_link: int, client_link: int,
                    tiers: Sequence[str], first_ack_ts: float,
                    rate_mbps: float = math.nan) -> dict[str, float]:
    """One transfer's data packets on every link (subflow, seq, ip_id, payload, link, ts;
    the server's sends), each sent packet followed along its subflow's path: the packets
    that did not reach the client's access link by the hop that dropped them, the resends
    by what became of the packet they repeat (lost at a hop, or delivered), and the
    losses among the packets sent before the first ACK of data reached the server's link
    (the initial windows); with the server link's `rate_mbps` (and a wire_len column),
    the packets that left the server in re-timed bursts of at least BIG_BURST packets
    and of fewer, and how many of each were lost."""
    paths = subflow_paths(data, client_link)
    links = data.groupby(["subflow", "seq", "ip_id"])["link"].agg(set)
    sent = data[data["link"].to_numpy() == server_link]
    in_big = np.zeros(len(sent), dtype=bool)
    if not math.isnan(rate_mbps) and len(sent):
        ids = burst_ids(sent["ts"].to_numpy(), sent["wire_len"].to_numpy(), rate_mbps)
        in_big = np.bincount(ids)[ids] >= BIG_BURST
    sent = sent.assign(in_big=in_big)
    out: dict[str, float] = {f"lost {h}": 0 for h in HOP_NAMES.values()}
    out.update({"sent": len(sent), "lost": 0, "lost_initial_windows": 0,
                "resent": 0, "resent_after_loss_client_access": 0,
                "resent_after_loss_elsewhere": 0, "resent_not_lost": 0,
                "sent_in_big_bursts": int(in_big.sum()), "lost_in_big_bursts": 0,
                "sent_in_small_bursts": int((~in_big).sum()), "lost_in_small_bursts": 0})
    lost_keys: dict[tuple[Any, int], str] = {}  # (subflow, seq) -> hop of a loss
    for sf, rows in sent.groupby("subflow").indices.items():
        d = sent.iloc[rows]
        path = paths.get(sf)
        if path is None:
            continue
        names = hop_names(path, [tiers[i] for i in path])
        base = d["seq"].to_numpy()[:1]
        start = signed_offset(d["seq"].to_numpy(), np.repeat(base, len(d)))
        end = start + d["payload"].to_numpy().astype(np.int64)
        prev_max = np.concatenate(([np.iinfo(np.int64).min],
                                   np.maximum.accumulate(end)[:-1]))
        for (seq, ip_id, ts, big), s, resend in zip(
                d[["seq", "ip_id", "ts", "in_big"]].itertuples(index=False), start,
                start < prev_max, strict=True):
            if resend:
                out["resent"] += 1
                hop = lost_keys.get((sf, int(s)))
                if hop is None:
                    out["resent_not_lost"] += 1
                elif hop == "client access":
                    out["resent_after_loss_client_access"] += 1
                else:
                    out["resent_after_loss_elsewhere"] += 1
            i = drop_hop(links.get((sf, seq, ip_id), set()), path)
            if i is not None:
                out["lost"] += 1
                out[f"lost {names[i]}"] += 1
                out["lost_initial_windows"] += int(ts < first_ack_ts)
                out["lost_in_big_bursts" if big else "lost_in_small_bursts"] += 1
                lost_keys.setdefault((sf, int(s)), names[i])
    return out


def first_data_ack(at_link: pd.DataFrame, server_port: int) -> float:
    """Time of the first ACK from the client that acknowledges data, at one link (packets
    of one transfer's subflows, capture order); inf when none."""
    sent = at_link[(at_link["sport"] == server_port) & (at_link["payload"] > 0)]
    acks = at_link[(at_link["dport"] == server_port) & (at_link["flags"] & ACK > 0)]
    best = math.inf
    for sf, rows in sent.groupby("subflow").indices.items():
        first = sent.iloc[rows[0]]
        a = acks[acks["subflow"].to_numpy() == sf]
        covered = signed_offset(a["ack"].to_numpy(), np.repeat(
            np.array([first["seq"]]), len(a))) > 0
        later = a["ts"].to_numpy()[covered & (a["ts"].to_numpy() > first["ts"])]
        if len(later):
            best = min(best, float(later[0]))
    return best


def losses(folder: Path, flow_types: Sequence[str] = ()) -> str:
    rows = []
    for t in mptcp_transfers(folder, flow_types):
        tr, tp, geo = t.transfer, t.packets, t.geo
        port = int(tr.server_port)
        data = tp[(tp["sport"] == port).to_numpy() & (tp["payload"] > 0).to_numpy()]
        if data.empty:
            continue
        tiers = [str(lk.tier) for lk in t.topo.links]
        at_server = tp[tp["link"].to_numpy() == geo.server_link]
        rows.append({"switching": t.factors["switching"], "host": t.factors.get("host"),
                     "flow_type": tr.flow_type, "run": t.run_dir.name,
                     **transfer_losses(data, geo.server_link, geo.client_link, tiers,
                                       first_data_ack(at_server, port),
                                       float(geo.server_mbps or math.nan))})
    t = pd.DataFrame(rows)
    if t.empty:
        return "(no MPTCP run with captures)"
    keys = ["flow_type", "switching", "host"]
    means = t.groupby(keys).mean(numeric_only=True)
    means = means.loc[:, (means != 0).any(axis=0)]
    sums = t.groupby(keys).sum(numeric_only=True)
    for size in ("big", "small"):  # pooled: lost per 100 packets sent in such bursts
        means[f"lost_pct_in_{size}_bursts"] = (
            100 * sums[f"lost_in_{size}_bursts"] / sums[f"sent_in_{size}_bursts"])
    means["transfers"] = t.groupby(keys).size()
    return markdown(means.round(2)) + "\n\n" + against_vanilla(
        t, ["lost", "lost client access", "lost agg to edge", "resent",
            "lost_in_big_bursts", "lost_in_small_bursts", "sent_in_big_bursts"])


def against_vanilla(t: pd.DataFrame, columns: Sequence[str]) -> str:
    """Each other host level against vanilla per flow type and switching level: the runs'
    means of each column (a run's transfers share its network, so the run is the unit),
    Welch's interval in % of vanilla's."""
    per_run = t.groupby(["flow_type", "switching", "host", "run"]).mean(numeric_only=True)
    out = ["| flow type | switching | host | " + " | ".join(columns) + " |",
           "| --- " * (3 + len(columns)) + "|"]
    for (flow, sw), g in per_run.groupby(level=["flow_type", "switching"]):
        hosts = g.index.get_level_values("host")
        base = g[hosts == "vanilla"]
        for host in sorted(set(hosts) - {"vanilla"}):
            other = g[hosts == host]
            out.append(f"| {flow} | {sw} | {host} | " + " | ".join(
                welch_ci(other[c].dropna().to_numpy(float), base[c].dropna().to_numpy(float))
                for c in columns) + " |")
    return "\n".join(out)



@dataclass(frozen=True)
class DataAck:
    """A client's ACK at the server's link with an MPTCP data ACK: when, on which subflow
    (the client's port), the data ACK and the right edge of the connection-level receive
    window it announces (data ACK + the TCP window, scaled by the subflow's SYN)."""

    ts: float
    port: int
    data_ack: int
    right_edge: int


def tcp_options(opts: bytes) -> Iterator[tuple[int, bytes]]:
    """(kind, whole option) of raw TCP options."""
    i = 0
    while i < len(opts):
        kind = opts[i]
        if kind == 0:
            return
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(opts) or opts[i + 1] < 2:
            return
        yield kind, opts[i:i + opts[i + 1]]
        i += opts[i + 1]


def dss_data_ack(opts: bytes) -> tuple[int, int] | None:
    """(data ACK, its bytes: 4 or 8) of the DSS option among raw TCP options, or None."""
    for kind, body in tcp_options(opts):
        if kind == MPTCP_OPTION and len(body) >= 4 and body[2] >> 4 == 2 and body[3] & 0x01:
            size = 8 if body[3] & 0x02 else 4
            if len(body) >= 4 + size:
                return int.from_bytes(body[4:4 + size], "big"), size
    return None


def data_acks(path: Path, server_port: int) -> list[DataAck]:
    """The client's data ACKs to `server_port` in one capture, with the receive window's
    right edge (a 4-byte data ACK takes the upper bits of the last 8-byte one)."""
    scale: dict[int, int] = {}
    out: list[DataAck] = []
    high = 0
    for ts, frame in pcap.frames(path):
        if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
            continue
        tcp = frame[14 + (frame[14] & 0x0F) * 4:]
        if len(tcp) < 20:
            continue
        sport, dport = struct.unpack_from("!HH", tcp, 0)
        if dport != server_port:
            continue
        off, flags = (tcp[12] >> 4) * 4, tcp[13]
        window = struct.unpack_from("!H", tcp, 14)[0]
        opts = tcp[20:off]
        if flags & SYN:
            scale[sport] = next((b[2] for k, b in tcp_options(opts) if k == 3 and len(b) >= 3),
                                0)
            continue
        found = dss_data_ack(opts)
        if found is None:
            continue
        ack, size = found
        if size == 8:
            high = ack >> 32
        else:
            ack |= high << 32
        out.append(DataAck(ts, sport, ack, ack + (window << scale.get(sport, 0))))
    return out


def window_headroom(sent: Sequence[Segment], acks: Sequence[DataAck]) -> np.ndarray:
    """For each data segment the server sent (capture order), the bytes the connection's
    receive window still allowed after it: the highest right edge announced before it
    minus the highest DSN sent so far; NaN before the first data ACK."""
    out = np.full(len(sent), np.nan)
    edge = -1
    top = 0
    j = 0
    for i, seg in enumerate(sent):
        while j < len(acks) and acks[j].ts <= seg.ts:
            edge = max(edge, acks[j].right_edge)
            j += 1
        top = max(top, seg.dsn + seg.length)
        if edge >= 0:
            out[i] = edge - top
    return out


def windows(folder: Path, flow_types: Sequence[str] = ()) -> str:
    """Per transfer: how often the connection-level receive window held the server (data
    packets sent with less than two segments of window left), and for the re-timed bursts
    of at least BIG_BURST packets after the first ACK, the share that ended at the
    window's edge."""
    rows = []
    cache: dict[tuple[Path, str, int], tuple[list[Segment], list[DataAck]]] = {}
    for t in mptcp_transfers(folder, flow_types):
        tr, geo, topo = t.transfer, t.geo, t.topo
        port = int(tr.server_port)
        intf = topo.links[geo.server_link].b.intf
        key = (t.run_dir, intf, port)
        if key not in cache:
            path = t.run_dir / "captures" / f"{intf}.pcap"
            cache[key] = (segments_from_pcap(path, port), data_acks(path, port))
        segs, acks = cache[key]
        ports = set(t.packets[t.packets["sport"] == port]["dport"].astype(int))
        first, last = float(t.packets["ts"].min()), float(t.packets["ts"].max())
        mine = [s for s in segs if s.subflow[3] in ports and first <= s.ts <= last]
        my_acks = [a for a in acks if a.port in ports and first <= a.ts <= last]
        if len(mine) < 2 or not my_acks:
            continue
        room = window_headroom(mine, my_acks)
        mss = max(s.length for s in mine)
        ts = np.array([s.ts for s in mine])
        wire = np.array([s.length + 66 for s in mine], dtype=float)
        ids = burst_ids(ts, wire, float(geo.server_mbps or math.nan))
        t0 = my_acks[0].ts
        ends = np.r_[np.flatnonzero(ids[1:] != ids[:-1]), len(ids) - 1]
        starts = np.r_[0, ends[:-1] + 1]
        big = [(a, b) for a, b in zip(starts, ends, strict=True)
               if b - a + 1 >= BIG_BURST and ts[a] >= t0]
        rows.append({"switching": t.factors["switching"], "host": t.factors.get("host"),
                     "flow_type": tr.flow_type,
                     "window_limited_pct": float(100 * np.nanmean(room < 2 * mss)),
                     "big_bursts": len(big),
                     "big_bursts_to_window_edge_pct": 100 * float(np.mean(
                         [room[b] < 2 * mss for _, b in big])) if big else math.nan})
    t = pd.DataFrame(rows)
    if t.empty:
        return "(no MPTCP run with captures)"
    keys = ["flow_type", "switching", "host"]
    means = t.groupby(keys).mean(numeric_only=True)
    means["transfers"] = t.groupby(keys).size()
    return markdown(means.round(2))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("bursts", "retrans", "wire", "shares", "drops",
                                         "losses", "windows"))
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
    elif args.what == "drops":
        print(drops(args.results))
    elif args.what == "losses":
        print(losses(args.results, args.flow_type))
    elif args.what == "windows":
        print(windows(args.results, args.flow_type))
    else:
        print(shares(args.results, args.flow_type))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
