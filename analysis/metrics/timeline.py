"""Goodput over time of one run, from its captures (pure): what the time plots draw.

Delivered payload = TCP payload bytes of packets going down a host access link to its
host (captured at the edge switch's end), binned by capture time relative to the
measured workload's start (`workload_start_wall_s` in the manifest; the capture and the
applications share the wall clock). Packets from the measured server port are
`measured_mbps`, everything else (background, request/response) `other_mbps`. A link
failure shows as a dip in `measured_mbps` after its event.

Goodput counts each byte once: a segment that reaches its host again (the same
addresses, ports and sequence number on the same link: a retransmission of data that
had arrived, as spraying's reordering triggers) is not delivered again. Counted twice,
sprayed TCP's duplicates (7-9 % of its payload on the permutation of Raiciu et al.)
showed as goodput.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pathdiv.analysis.capture.pcap import ip_to_int
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.model import Tier

BIN_S = 0.25
TIMELINE_COLUMNS = ["t_s", "measured_mbps", "other_mbps"]


def goodput_timeline(packets: pd.DataFrame, topo: FatTree, server_port: int,
                     t0_wall: float, bin_s: float = BIN_S) -> pd.DataFrame:
    """Delivered goodput per `bin_s` bin from `t0_wall` on (see the module doc)."""
    index = {lk.name: i for i, lk in enumerate(topo.links)}
    down: list[tuple[int, int]] = []  # (link index, host address) per host link
    for lk in topo.links:
        if lk.tier is Tier.HOST:
            for addr in topo.host_addresses(lk.a.node):
                down.append((index[lk.name], ip_to_int(addr)))
    if packets.empty or not down:
        return pd.DataFrame(columns=TIMELINE_COLUMNS)
    links = np.array([d[0] for d in down], dtype=np.int64)
    addrs = np.array([d[1] for d in down], dtype=np.int64)
    key = packets["link"].to_numpy().astype(np.int64) * (1 << 32) \
        + packets["dst"].to_numpy().astype(np.int64)
    wanted = np.isin(key, links * (1 << 32) + addrs)
    pk = packets[wanted & (packets["payload"].to_numpy() > 0)]
    pk = pk[~pk.duplicated(subset=["link", "src", "dst", "sport", "dport", "seq"],
                           keep="first")]
    if pk.empty:
        return pd.DataFrame(columns=TIMELINE_COLUMNS)
    t = pk["ts"].to_numpy() - t0_wall
    bins = np.floor(t / bin_s).astype(np.int64)
    lo, hi = int(min(bins.min(), 0)), int(bins.max())
    measured = pk["sport"].to_numpy() == server_port
    payload = pk["payload"].to_numpy().astype(float)
    span = hi - lo + 1
    m = np.bincount(bins[measured] - lo, weights=payload[measured], minlength=span)
    o = np.bincount(bins[~measured] - lo, weights=payload[~measured], minlength=span)
    scale = 8 / bin_s / 1e6
    return pd.DataFrame({"t_s": (np.arange(lo, hi + 1) * bin_s).round(6),
                         "measured_mbps": m * scale, "other_mbps": o * scale})
