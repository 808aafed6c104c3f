"""The study's measures of one transfer, from its packets on every link (pure logic).

Definitions (also in docs/measurement.md):

- observation points: the client's access link (host ↔ edge switch) sees every packet
  the client sends or receives; the server's access link sees every packet the server
  sends, including those lost further on.
- `fct_s`: from the first packet the client sends on the connection (its SYN) to the
  last FIN the server sends on any subflow, both as captured on the client's access
  link (the last RST if the server sent no FIN).
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
- `subflows`: subflows that carried payload; `subflows_opened`: all of them.
- `shared_subflows`, `distinct_paths`: subflows whose data shares a fabric link with
  another subflow's, and distinct fabric paths used (`analysis/metrics/sharing.py`).
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
    "links_used",
    "path_bytes",
    "path_pkts",
]


@dataclass(frozen=True)
class PairGeometry:
    """What the topology says about a (client, server) host pair."""

    client_link: int
    server_link: int
    hops: int
    path_links: tuple[tuple[int, ...], ...]  # per shortest path, links unique to it
    fabric_links: frozenset[int] = frozenset()  # switch-to-switch links of the topology

    @classmethod
    def of(cls, topo: FatTree, client: str, server: str) -> PairGeometry:
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
        )


def balance_utilization(path_bytes: np.ndarray) -> float:
    """(Σb)² / (Σb²) / n for the bytes b of each of the n paths; NaN with no bytes."""
    b = np.asarray(path_bytes, dtype=float)
    total = b.sum()
    if len(b) == 0 or total <= 0:
        return float("nan")
    return float(total**2 / (b**2).sum() / len(b))


def _signed_offset(seq: np.ndarray, base: np.ndarray) -> np.ndarray:
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
    start = _signed_offset(sent["seq"].to_numpy(), first_seq)
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
        subflows=float(len(np.unique(subflows[payload > 0]))),
        subflows_opened=float(len(np.unique(subflows))),
        links_used=float(len(np.unique(link))),
        path_bytes=";".join(str(int(b)) for b in path_bytes),
        path_pkts=";".join(str(int(n)) for n in path_pkts),
    )
    if fct > 0:
        out["throughput_mbps"] = wire_bytes * 8 / fct / 1e6
        out["goodput_mbps"] = size_bytes * 8 / fct / 1e6
    if size_bytes > 0:
        out["excess_pct"] = 100.0 * (wire_bytes - size_bytes) / size_bytes
    return out
