"""Why extra subflow elimination (ESE) closed the windows it did, read from the captures
of seed004-ese runs: per transfer, each subflow's RTT samples as the server's access link
saw them (one per ACK that acknowledged new data: the newest packet it covered, as the
kernel's pkts_acked sample), and Algorithm 1 replayed on them in the order the ACKs
arrived (the kernel's rule, net/mptcp/cc_mptcp_d_alg.c: a subflow's base RTT is its
lowest sample, a sample above alpha x base is a significant change, the first one of the
connection is the trigger and its sample the reference, another subflow's significant
sample within beta x its base of the reference closes it; the first 80 samples of a
subflow are examined).

Per cell it prints how often the replay closed a window beside the kernel's own count
(run_windows_closed), and what the subflows that joined second looked like: their base
RTT against the first subflow's, and whether any of their examined samples was a
significant change at all.

    python scripts/seed004_ese_rtts.py results/reproduction/seed004-ese
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from pathdiv.analysis.capture.flows import (
    group_connections,
    match_transfers,
    read_link_captures,
    split_subflows,
)
from pathdiv.analysis.capture.pcap import TCP_ACK, ip_to_int
from pathdiv.analysis.metrics.table import load_manifest, load_transfers, run_topology
from pathdiv.analysis.metrics.transfer import PairGeometry

ALPHA, BETA, CANDIDATES = 1.3, 0.1, 80


@dataclass
class Sub:
    """What ESE keeps of one subflow (struct mptcp_d_ese_sub) and what the replay saw."""

    base: float = 0.0
    samples: int = 0
    significant: int = 0
    verdict: str = "kept"
    first_ms: float = float("nan")
    first_ts: float = float("nan")
    rtts: list[float] = field(default_factory=list)


def ese_sample(sub: Sub, ref: float | None, is_trigger: bool, rtt: float) -> str:
    """Algorithm 1 on one sample (the kernel's mptcp_d_ese_sample): keep, trigger, close."""
    if sub.samples >= CANDIDATES:
        return "keep"
    sub.samples += 1
    sub.base = rtt if not sub.base or rtt < sub.base else sub.base
    if rtt <= ALPHA * sub.base:
        return "keep"
    sub.significant += 1
    if ref is None:
        return "trigger"
    if is_trigger:
        return "keep"
    return "close" if abs(rtt - ref) < BETA * sub.base else "keep"


def ack_samples(sent: pd.DataFrame, acks: pd.DataFrame) -> list[tuple[float, int, float]]:
    """(ACK time, subflow, RTT ms) for each ACK that acknowledged new data: from the newest
    data packet it covered, when that packet's range was sent only once."""
    out = []
    for sf, d in sent.groupby("subflow"):
        a = acks[acks["subflow"] == sf]
        if a.empty:
            continue
        base = int(d["seq"].iloc[0])
        start = (d["seq"].to_numpy(np.int64) - base) % (1 << 32)
        end = start + d["payload"].to_numpy(np.int64)
        counts = pd.Series(start).value_counts()
        once = np.array([counts[s] == 1 for s in start])
        ts = d["ts"].to_numpy()
        order = np.argsort(end, kind="stable")
        high = 0
        for t_ack, ack in zip(a["ts"].to_numpy(), a["ack"].to_numpy(np.int64), strict=True):
            covered = (int(ack) - base) % (1 << 32)
            if covered <= high or covered > (1 << 31):
                continue
            high = covered
            i = np.searchsorted(end[order], covered, side="right") - 1
            if i < 0:
                continue
            k = order[i]
            if once[k] and ts[k] < t_ack:
                out.append((float(t_ack), int(sf), (t_ack - ts[k]) * 1e3))
    return sorted(out)


def replay(samples: list[tuple[float, int, float]]) -> dict[int, Sub]:
    subs: dict[int, Sub] = {}
    ref: float | None = None
    trigger: int | None = None
    for t, sf, rtt in samples:
        sub = subs.setdefault(sf, Sub(first_ms=rtt, first_ts=t))
        if sub.verdict == "closed":
            continue
        sub.rtts.append(rtt)
        v = ese_sample(sub, ref, sf == trigger, rtt)
        if v == "trigger":
            ref, trigger, sub.verdict = rtt, sf, "trigger"
        elif v == "close":
            sub.verdict = "closed"
    return subs


def transfers_of(run_dir: Path) -> list[tuple[pd.Series, dict[int, Sub]]]:
    manifest = load_manifest(run_dir)
    topo = run_topology(manifest.get("config", {}))
    transfers = load_transfers(run_dir)
    pk, table = split_subflows(read_link_captures(run_dir / "captures", topo))
    members = match_transfers(transfers, group_connections(table), topo)
    out = []
    for tr in transfers.itertuples(index=False):
        geo = PairGeometry.of(topo, str(tr.client), str(tr.server))
        sfs = members.get(int(tr.transfer_id), [])
        tp = pk[pk["subflow"].isin(sfs) & (pk["link"] == geo.server_link)]
        server = {ip_to_int(a) for a in topo.host_addresses(str(tr.server))}
        from_server = np.isin(tp["src"].to_numpy(), sorted(server))
        sent = tp[from_server & (tp["payload"].to_numpy() > 0)]
        acks = tp[~from_server & ((tp["flags"].to_numpy() & TCP_ACK) != 0)]
        out.append((pd.Series(tr._asdict()), replay(ack_samples(sent, acks))))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", type=Path, help="a seed004-ese results folder (with runs/)")
    args = ap.parse_args(argv)
    rows = []
    for run_dir in sorted((args.results / "runs").glob("*/")):
        m = load_manifest(run_dir)
        factors = m.get("factors", {})
        for tr, subs in transfers_of(run_dir):
            order = sorted(subs.values(), key=lambda s: s.first_ts)
            if len(order) < 2:
                continue
            first, later = order[0], order[1:]
            rows.append({
                "run": m.get("run_id"), "subflow_count": factors.get("subflow_count"),
                "placement": factors.get("placement"), "client": tr["client"],
                "closed": sum(s.verdict == "closed" for s in order),
                "later_base_over_first": np.mean([s.base / first.base for s in later]),
                "later_join_ms": np.mean([(s.first_ts - first.first_ts) * 1e3 for s in later]),
                "later_with_no_significant": np.mean([s.significant == 0 for s in later]),
                "first_base_ms": first.base,
            })
    df = pd.DataFrame(rows)
    if df.empty:
        print("no multi-subflow transfers found", file=sys.stderr)
        return 1
    cells = df.groupby(["subflow_count", "placement"]).agg(
        transfers=("closed", "size"), replay_closed=("closed", "sum"),
        first_base_ms=("first_base_ms", "mean"),
        later_join_ms=("later_join_ms", "mean"),
        later_base_over_first=("later_base_over_first", "mean"),
        later_never_significant=("later_with_no_significant", "mean")).round(3)
    cols = ["subflows", "placement", *cells.columns]
    print("| " + " | ".join(cols) + " |\n|" + " --- |" * len(cols))
    for (level, placement), row in cells.iterrows():
        print(f"| {str(level)[2:]} | {placement} | "
              + " | ".join(f"{v:g}" for v in row.to_numpy()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
