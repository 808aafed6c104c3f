"""The study's measures of one transfer, from its packets on every link (pure logic).

Definitions (also in docs/measurement.md):

- observation points: the client's access link (host ↔ edge switch) sees every packet
  the client sends or receives; the server's access link sees every packet the server
  sends, including those lost further on.
- `fct_s`: from the first packet the client sends on the connection (its SYN) to the
  last FIN the server sends on any subflow, both as captured on the client's access
  link (the last RST if the server sent no FIN; the client's first FIN or RST if the
  server sent neither: an MPTCP client that had the DATA_FIN closed first).
- `wire_bytes`: frame bytes (Ethernet header on, as on the wire) of every packet of the
  transfer, both directions, all subflows, summed over every link that carried them,
  divided by the hop count of the host pair's shortest paths. When nothing is lost this
  is exactly the bytes the transfer put on one link of its path; a packet lost half
  way counts for the share of the path it crossed.
- `throughput_mbps` = wire_bytes · 8 / fct_s / 10⁶; `goodput_mbps` = payload · 8 / fct_s
  / 10⁶ with payload the application's `size_bytes`;
  `excess_pct` = (wire_bytes − payload) / payload · 100.
- `utilization`: the data direction's (server → client) frame bytes per shortest path
  b_1..b_n (n = number of equal-cost shortest paths between the hosts; a path's bytes
  are the most bytes seen on a link that belongs to that path only), as the effective
  number of paths over n: (Σb)² / (Σb²) / n (inverse Simpson index). n equal paths →
  1.0; one path of four → 0.25; two equal of four → 0.5.
- `retrans_pct`: data-direction payload bytes the server sent again (sequence ranges
  already sent on the same subflow, as captured on the server's access link), in
  percent of all data-direction payload bytes it sent.
- `reorder_pct`: data packets reaching the client's access link after a packet the
  server sent later on the same subflow, in percent of data packets received there.
  Packets are matched between the two links by subflow, sequence number, length and
  IP ID, so a retransmission is not counted as reordering.
- `ce_pct`: data packets reaching the client's access link marked CE (congestion
  experienced, by an ECN-marking switch: `switching.ecn_threshold_pkts`), in percent of
  the ECN-capable data packets received there (ECT or CE); NaN when none was
  ECN-capable (ECN not negotiated). `ce_pkts`, `ect_pkts_received`: the two counts.
- `rtt_ms`: the mean round-trip time of the data, as the server's access link sees it:
  per subflow, a data packet sent for the first time (its range never sent again,
  Karn's rule) until the first ACK from the client that covers its last byte, both
  captured there (what tcptrace reports from a sender-side capture; seed 004 section
  III's RTTs). `rtt_samples`: how many packets it is the mean of.
- `open_subflows`: subflows whose window was open during the second half of the data
  transfer (from midway between the server's first and last data packet): at some data
  packet sent then, more than one full segment (the largest payload of the transfer)
  was in flight (sent and not yet acknowledged, at the server's access link). A subflow
  whose window an extra-subflow elimination closed to one packet (`hosts.cc: mptcp-d`)
  is not open; seed 004's Table V counts those closures.
- `subflows`: subflows that carried payload; `subflows_opened`: all of them.
- `shared_subflows`, `distinct_paths`: subflows whose data shares a fabric link with
  another subflow's, and distinct fabric paths used (`analysis/metrics/sharing.py`).
- `burst_pkts` (metrics.csv's `burstiness`, registered in registry.py) and
  `burst_pkts_max`: how the server's data leaves it in bursts, seed 000's "bursty
  strength" (packets released at once, which queue together at the next switch). At the
  server's access link, consecutive data packets of the transfer belong to one burst
  when the gap between them is at most 1.5 times the later frame's transmission time at
  that link's rate (back to back: released faster than the link sends). `burst_pkts` is
  the packet-weighted mean burst (Σ n² / Σ n over bursts of n packets: the burst a data
  packet leaves in, on average), `burst_pkts_max` the largest; NaN on an unshaped link.
- `links_used`: links that carried any packet of the transfer; `path_bytes` and
  `path_pkts`: the data direction's frame bytes and packets per shortest path, in the
  order of `topo.paths(server, client)`, joined with ';'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pathdiv.analysis.capture.pcap import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN
from pathdiv.analysis.metrics.columns import METRIC_COLUMNS
from pathdiv.analysis.metrics.sharing import SHARING_MEASURES, link_sharing, subflow_link_sets
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.model import Tier

MEASURES = [
    *METRIC_COLUMNS,
    *SHARING_MEASURES,
    "subflows_opened",
    "wire_bytes",
    "payload_bytes",
    "paths",
    "paths_used",
    "retrans_bytes",
    "data_bytes_sent",
    "reordered_pkts",
    "data_pkts_received",
    "ce_pct",
    "ce_pkts",
    "ect_pkts_received",
    "rtt_ms",
    "rtt_samples",
    "open_subflows",
    "links_used",
    "path_bytes",
    "path_pkts",
    "burst_pkts",
    "burst_pkts_max",
]


@dataclass(frozen=True)
class PairGeometry:
    """What the topology says about a (client, server) host pair."""

    client_link: int
    server_link: int
    hops: int
    path_links: tuple[tuple[int, ...], ...]  # per shortest path, links unique to it
    fabric_links: frozenset[int] = frozenset()  # switch-to-switch links of the topology
    server_mbps: float | None = None  # the server's egress rate on its access link

    @classmethod
    def of(cls, topo: FatTree, client: str, server: str,
           server_mbps: float | None = None) -> PairGeometry:
        index = {lk.name: i for i, lk in enumerate(topo.links)}
        paths = topo.paths(server, client)
        per_path = [{index[lk.name] for lk in topo.path_links(p)} for p in paths]
        unique = []
        for i, links in enumerate(per_path):
            others = set().union(*(s for j, s in enumerate(per_path) if j != i))
            unique.append(tuple(sorted(links - others)) or tuple(sorted(links)))
        return cls(
            client_link=index[topo.links_of(client)[0].name],
            server_link=index[topo.links_of(server)[0].name],
            hops=len(paths[0]) - 1,
            path_links=tuple(unique),
            fabric_links=frozenset(i for i, lk in enumerate(topo.links)
                                   if lk.tier is not Tier.HOST),
            server_mbps=server_mbps if server_mbps is not None
            else topo.links_of(server)[0].params.bw_mbps,
        )


def balance_utilization(path_bytes: np.ndarray) -> float:
    """(Σb)² / (Σb²) / n for the bytes b of each of the n paths; NaN with no bytes."""
    b = np.asarray(path_bytes, dtype=float)
    total = b.sum()
    if len(b) == 0 or total <= 0:
        return float("nan")
    return float(total**2 / (b**2).sum() / len(b))


def signed_offset(seq: np.ndarray, base: np.ndarray) -> np.ndarray:
    """seq − base modulo 2³², as a signed distance (handles wrap-around)."""
    d = (seq.astype(np.int64) - base.astype(np.int64)) % (1 << 32)
    return np.where(d >= 1 << 31, d - (1 << 32), d)


def retransmitted_bytes(sent: pd.DataFrame) -> tuple[int, int]:
    """(bytes of payload that repeat a sequence range already sent on the same subflow,
    all payload bytes), for data packets in capture order with columns subflow, seq,
    payload."""
    if sent.empty:
        return 0, 0
    sf = sent["subflow"].to_numpy()
    first_seq = sent.groupby("subflow")["seq"].transform("first").to_numpy()
    start = signed_offset(sent["seq"].to_numpy(), first_seq)
    length = sent["payload"].to_numpy().astype(np.int64)
    end = start + length
    frame = pd.DataFrame({"sf": sf, "end": end})
    prev_max = frame.groupby("sf")["end"].cummax().groupby(frame["sf"]).shift(1)
    prev = prev_max.fillna(np.iinfo(np.int64).min).to_numpy(dtype=np.int64)
    overlap = np.clip(np.minimum(end, prev) - start, 0, length)
    return int(overlap.sum()), int(length.sum())


def reordered_packets(sent: pd.DataFrame, received: pd.DataFrame) -> tuple[int, int]:
    """(packets received after a packet sent later on the same subflow, packets
    received), matching the two captures by subflow, seq, payload and IP ID (k-th
    occurrence to k-th occurrence). Received packets with no sent match are ignored."""
    if received.empty:
        return 0, 0
    key = ["subflow", "seq", "payload", "ip_id"]
    s = sent[key].copy()
    s["occ"] = s.groupby(key).cumcount()
    s["send_idx"] = s.groupby("subflow").cumcount()
    r = received[key].copy()
    r["occ"] = r.groupby(key).cumcount()
    r["arrival"] = np.arange(len(r))
    m = r.merge(s, on=[*key, "occ"], how="inner").sort_values("arrival")
    if m.empty:
        return 0, len(r)
    prev = m.groupby("subflow")["send_idx"].cummax().groupby(m["subflow"]).shift(1)
    late = (m["send_idx"] < prev.fillna(-1)).to_numpy()
    return int(late.sum()), len(r)


ECN_CE = 3


def ce_marks(received: pd.DataFrame) -> tuple[int, int]:
    """(CE-marked, ECN-capable) among `received` packets (ECT(0), ECT(1) or CE)."""
    if "ecn" not in received:
        return 0, 0
    ecn = received["ecn"].to_numpy()
    return int((ecn == ECN_CE).sum()), int((ecn != 0).sum())


def rtt_samples_ms(sent: pd.DataFrame, acks: pd.DataFrame) -> np.ndarray:
    """Round-trip times (ms) of `sent` data packets (columns subflow, seq, payload, ts; in
    capture order, at one link) from the `acks` coming back there (columns subflow, ack,
    ts; time order): per subflow, each packet whose sequence range is sent only once, to
    the first later ACK at or beyond its last byte. Packets never acknowledged give none."""
    out: list[np.ndarray] = []
    ack_groups = acks.groupby("subflow").indices
    for sf, rows in sent.groupby("subflow").indices.items():
        if sf not in ack_groups:
            continue
        d = sent.iloc[rows]
        base = d["seq"].to_numpy()[:1]
        start = signed_offset(d["seq"].to_numpy(), np.repeat(base, len(d)))
        end = start + d["payload"].to_numpy().astype(np.int64)
        # sent once: no earlier packet reached past its start, no later one starts before
        # its end (a retransmission of it, or of part of it)
        prev_end = np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(end)[:-1]))
        later_start = np.concatenate(
            (np.minimum.accumulate(start[::-1])[::-1][1:], [np.iinfo(np.int64).max]))
        once = (prev_end <= start) & (later_start >= end)
        a = acks.iloc[ack_groups[sf]]
        a_ts = a["ts"].to_numpy()
        covered = np.maximum.accumulate(
            signed_offset(a["ack"].to_numpy(), np.repeat(base, len(a))))
        t = d["ts"].to_numpy()[once]
        j = np.maximum(np.searchsorted(a_ts, t, side="right"),
                       np.searchsorted(covered, end[once], side="left"))
        ok = j < len(a_ts)
        out.append((a_ts[j[ok]] - t[ok]) * 1e3)
    return np.concatenate(out) if out else np.empty(0)


BURST_GAP = 1.5  # transmission times of a frame: a larger gap starts a new burst


def burst_sizes(ts: np.ndarray, wire_bytes: np.ndarray, rate_mbps: float) -> np.ndarray:
    """Packets per burst of packets leaving at a link of `rate_mbps` (capture times `ts`
    in seconds, frame sizes `wire_bytes`, in order): a packet continues the burst of the
    one before it when it followed within BURST_GAP of its own transmission time."""
    if not len(ts):
        return np.empty(0, dtype=np.int64)
    gap = np.diff(np.asarray(ts, dtype=float))
    tx_s = np.asarray(wire_bytes, dtype=float)[1:] * 8 / (rate_mbps * 1e6)
    starts = np.concatenate(([0], np.cumsum(gap > BURST_GAP * tx_s)))
    return np.bincount(starts)


def burstiness(sizes: np.ndarray) -> tuple[float, float]:
    """(packet-weighted mean burst Σn²/Σn, largest burst) of burst sizes; NaN if none."""
    if not len(sizes):
        return float("nan"), float("nan")
    n = sizes.astype(float)
    return float((n * n).sum() / n.sum()), float(n.max())


def open_subflows(sent: pd.DataFrame, acks: pd.DataFrame) -> int:
    """Subflows with more than one full segment in flight at some data packet of `sent`
    (columns subflow, seq, payload, ts; capture order, at the sender's link) sent in the
    second half of the data's span, against the `acks` seen there (subflow, ack, ts)."""
    if sent.empty:
        return 0
    ts = sent["ts"].to_numpy()
    half = ts.min() + (ts.max() - ts.min()) / 2
    segment = int(sent["payload"].max())
    ack_groups = acks.groupby("subflow").indices
    count = 0
    for sf, rows in sent.groupby("subflow").indices.items():
        d = sent.iloc[rows]
        base = d["seq"].to_numpy()[:1]
        end = (signed_offset(d["seq"].to_numpy(), np.repeat(base, len(d)))
               + d["payload"].to_numpy().astype(np.int64))
        highest = np.maximum.accumulate(end)
        covered = np.zeros(len(d), dtype=np.int64)
        if sf in ack_groups:
            a = acks.iloc[ack_groups[sf]]
            acked = np.maximum.accumulate(
                signed_offset(a["ack"].to_numpy(), np.repeat(base, len(a))))
            j = np.searchsorted(a["ts"].to_numpy(), d["ts"].to_numpy(), side="right")
            covered = np.where(j > 0, acked[np.maximum(j - 1, 0)], 0)
        late = d["ts"].to_numpy() >= half
        if ((highest - covered)[late] > segment).any():
            count += 1
    return count


def measure_transfer(
    pk: pd.DataFrame, geo: PairGeometry, client_addrs: np.ndarray, size_bytes: int
) -> dict[str, Any]:
    """The measures above for one transfer's packets (all links, time order)."""
    out: dict[str, Any] = dict.fromkeys(MEASURES, float("nan"))
    out["payload_bytes"] = float(size_bytes)
    out["paths"] = float(len(geo.path_links))
    if pk.empty:
        out.update(subflows=0.0, subflows_opened=0.0)
        return out
    link = pk["link"].to_numpy()
    from_client = np.isin(pk["src"].to_numpy(), client_addrs)
    flags = pk["flags"].to_numpy()
    payload = pk["payload"].to_numpy()
    ts = pk["ts"].to_numpy()
    wire = pk["wire_len"].to_numpy().astype(np.int64)

    at_client = link == geo.client_link
    if not at_client.any():  # client access link not captured: use every link
        at_client = np.ones(len(pk), dtype=bool)
    starts = ts[at_client & from_client]
    fins = ts[at_client & ~from_client & ((flags & TCP_FIN) != 0)]
    if not len(fins):  # a server that reset its subflows instead of closing them
        fins = ts[at_client & ~from_client & ((flags & TCP_RST) != 0)]
    if not len(fins):  # the client closed first: it had every byte (MPTCP's DATA_FIN)
        fins = np.sort(ts[at_client & from_client & ((flags & (TCP_FIN | TCP_RST)) != 0)])[:1]
    fct = float(fins.max() - starts.min()) if len(starts) and len(fins) else float("nan")

    wire_bytes = wire.sum() / geo.hops
    data_dir = ~from_client
    top = max(int(link.max()), *(max(links) for links in geo.path_links)) + 1
    per_link = np.bincount(link[data_dir], weights=wire[data_dir], minlength=top)
    pkts_link = np.bincount(link[data_dir], minlength=top)
    path_bytes = np.array([per_link[list(links)].max() for links in geo.path_links])
    path_pkts = np.array([pkts_link[list(links)].max() for links in geo.path_links])
    sent_mask = (link == geo.server_link) & data_dir & (payload > 0)
    sent = pk[sent_mask]
    recv = pk[at_client & data_dir & (payload > 0)]
    retx, sent_bytes = retransmitted_bytes(sent)
    late, received = reordered_packets(sent, recv)
    ce, ect = ce_marks(recv)
    acks_back = pk[(link == geo.server_link) & from_client & ((flags & TCP_ACK) != 0)]
    rtts = rtt_samples_ms(sent, acks_back)
    subflows = pk["subflow"].to_numpy()
    fabric = np.zeros(max(top, max(geo.fabric_links, default=0) + 1), dtype=bool)
    fabric[list(geo.fabric_links)] = True
    # subflows that were set up (a SYN-ACK) or carried payload: a join the peer refused
    # (e.g. the server's in-kernel PM trying its own addresses) took no path
    set_up = ((flags & (TCP_SYN | TCP_ACK)) == (TCP_SYN | TCP_ACK)) | (payload > 0)
    live = np.isin(subflows, np.unique(subflows[set_up]))
    shared, distinct = link_sharing(
        subflow_link_sets(subflows, link, data_dir & live, fabric))
    out.update(
        shared_subflows=float(shared),
        distinct_paths=float(distinct),
        fct_s=fct,
        wire_bytes=float(wire_bytes),
        utilization=balance_utilization(path_bytes),
        paths_used=float((path_bytes > 0).sum()),
        retrans_bytes=float(retx),
        data_bytes_sent=float(sent_bytes),
        retrans_pct=100.0 * retx / sent_bytes if sent_bytes else float("nan"),
        reordered_pkts=float(late),
        data_pkts_received=float(received),
        reorder_pct=100.0 * late / received if received else float("nan"),
        ce_pkts=float(ce),
        ect_pkts_received=float(ect),
        ce_pct=100.0 * ce / ect if ect else float("nan"),
        rtt_ms=float(rtts.mean()) if len(rtts) else float("nan"),
        rtt_samples=float(len(rtts)),
        open_subflows=float(open_subflows(sent, acks_back)),
        subflows=float(len(np.unique(subflows[payload > 0]))),
        subflows_opened=float(len(np.unique(subflows))),
        links_used=float(len(np.unique(link))),
        path_bytes=";".join(str(int(b)) for b in path_bytes),
        path_pkts=";".join(str(int(n)) for n in path_pkts),
    )
    if geo.server_mbps:
        out["burst_pkts"], out["burst_pkts_max"] = burstiness(burst_sizes(
            sent["ts"].to_numpy(), sent["wire_len"].to_numpy(), float(geo.server_mbps)))
    if fct > 0:
        out["throughput_mbps"] = wire_bytes * 8 / fct / 1e6
        out["goodput_mbps"] = size_bytes * 8 / fct / 1e6
    if size_bytes > 0:
        out["excess_pct"] = 100.0 * (wire_bytes - size_bytes) / size_bytes
    return out
