"""FCT slowdown: a flow's completion time over that of the same size alone (pure).

ideal_fct_s(size) is what one flow of that size would take alone on an idle path
between its hosts, from the configured link conditions (per direction, overrides
included; events are not): the best of the equal-cost paths, each with

    rtt = Σ one-way delays of the data path + Σ of the ACK path (netem delay_ms)
    ideal = 2 · rtt                         SYN/SYN-ACK, then request, before data flows
          + size · 1514/1448 · 8 / bottleneck   frames of a 1448-byte MSS at the path's
                                               slowest direction's rate
          + hops · 1514 · 8 / rate per hop     store-and-forward of the last frame

An unshaped direction (bw_mbps null) counts as 10 Gbit/s. slowdown = fct_s / ideal
(≥ 1 up to timing noise). `slowdown_table` gives p50 and p99 per size bucket and
configuration, the figure DCTCP/pFabric/Homa report.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from functools import cache

import numpy as np
import pandas as pd

from pathdiv.topologies.conditions import Conditions
from pathdiv.topologies.fattree import FatTree

MSS = 1448
FRAME = 1514
UNSHAPED_MBPS = 10_000.0
BUCKETS = [(0, 10_000, "<=10KB"), (10_000, 100_000, "10-100KB"),
           (100_000, 1_000_000, "100KB-1MB"), (1_000_000, 10_000_000, "1-10MB"),
           (10_000_000, float("inf"), ">10MB")]


def size_bucket(size: float) -> str:
    for lo, hi, name in BUCKETS:
        if lo < size <= hi:
            return name
    return BUCKETS[0][2]


def _rate(conds: Conditions, u: str, v: str) -> float:
    bw = conds[(u, v)].bw_mbps
    return UNSHAPED_MBPS if bw is None else float(bw)


def ideal_fct_s(topo: FatTree, conds: Conditions, server: str, client: str,
                size_bytes: int) -> float:
    """The module doc's ideal FCT of `size_bytes` from `server` to `client`."""
    best = float("inf")
    for path in topo.paths(server, client):
        hops = list(itertools.pairwise(path))
        rates = [_rate(conds, u, v) for u, v in hops]
        rtt = sum(conds[(u, v)].delay_ms + conds[(v, u)].delay_ms for u, v in hops) / 1e3
        wire = size_bytes * FRAME / MSS * 8
        fct = 2 * rtt + wire / (min(rates) * 1e6) + sum(FRAME * 8 / (r * 1e6) for r in rates)
        best = min(best, fct)
    return best


def slowdowns(transfers: pd.DataFrame, topo: FatTree, conds: Conditions) -> pd.Series:
    """Per transfer row (client, server, size_bytes, fct_s; app times as fallback)."""
    @cache
    def ideal(server: str, client: str, size: int) -> float:
        return ideal_fct_s(topo, conds, server, client, size)

    fct = pd.to_numeric(transfers.get("fct_s"), errors="coerce") \
        if "fct_s" in transfers else pd.Series(np.nan, index=transfers.index)
    app = transfers["end_s"] - transfers["start_s"]
    fct = fct.where(np.isfinite(fct), app)
    out = []
    for row, f in zip(transfers.itertuples(index=False), fct, strict=True):
        ok = bool(row.ok) and f > 0
        out.append(f / ideal(str(row.server), str(row.client), int(row.size_bytes))
                   if ok else np.nan)
    return pd.Series(out, index=transfers.index, dtype=float)


def slowdown_table(transfers: pd.DataFrame, by: Iterable[str]) -> pd.DataFrame:
    """p50/p99 slowdown and count per (configuration columns `by`, size bucket)."""
    keys = [c for c in by if c in transfers.columns]
    tm = transfers[np.isfinite(pd.to_numeric(transfers["slowdown"], errors="coerce"))].copy()
    columns = [*keys, "size_bucket", "flows", "slowdown_p50", "slowdown_p99"]
    if tm.empty:
        return pd.DataFrame(columns=columns)
    tm["size_bucket"] = tm["size_bytes"].map(size_bucket)
    order = {name: i for i, (_, _, name) in enumerate(BUCKETS)}
    rows = []
    for key, g in tm.groupby([*keys, "size_bucket"], sort=False):
        values = key if isinstance(key, tuple) else (key,)
        s = g["slowdown"].astype(float)
        rows.append({**dict(zip([*keys, "size_bucket"], values, strict=True)),
                     "flows": len(g), "slowdown_p50": float(s.quantile(0.5)),
                     "slowdown_p99": float(s.quantile(0.99))})
    table = pd.DataFrame(rows, columns=columns)
    table["_o"] = table["size_bucket"].map(order)
    return table.sort_values([*keys, "_o"]).drop(columns="_o").reset_index(drop=True)
