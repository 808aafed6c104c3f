"""Where a permutation run's throughput went while every transfer was under way, from its
captures (every link captured): per transfer, the goodput its client received, which
paths its subflows took, how busy each link of its paths was, and what the flow-level
model gives on the very paths the subflows took (instead of random draws). Prints one
Markdown row per run; `--csv FILE` keeps the per-transfer table, `--summary FILE`
the per-run one.

    python scripts/permutation_causes.py RESULTS/runs/long_mptcp-8_rep1 ...

The window is the one of scripts/permutation_figs.py ("share (window)"): from 0.5 s after
the last transfer started to the first one's end. Per transfer, in the window:
  goodput       payload reaching the client on its access link, each segment once, over
                window x link rate (the window share's measure, per transfer);
  dup           share of the payload reaching the client that had arrived before
                (spurious retransmissions: reordering);
  retx          share of the payload leaving the server's access link that repeats a
                sequence number sent before (retransmissions that reached the wire; data
                the sender's own queue dropped is sent again as new and is not counted);
  ceiling       the payload a fully busy client access link carries: payload over all
                bytes going down it (data frames' headers and MPTCP options, and the ACKs
                of the client's own upload beside them): the goodput share's real optimum;
  up_util       the server's access link upwards (its data and the ACKs of what it
                fetches), bytes over window x rate; down_util: the client's, downwards;
  fabric_max    the busiest fabric link direction the transfer's data crossed;
  paths         distinct equal-cost paths its data took (subflows on one path: one);
  subflows, busy_subflows   subflows that carried data, and those with >= 5 % of it;
  fwd_ms        median time of its data from the server's access link to the client's;
  ackq_ms       median time from a segment's arrival at the client's access link to the
                first ACK for it leaving there: the ACK waits in the client's own egress
                queue behind the data the client uploads (every host of a permutation
                both sends and receives);
  rev_ms        median time of that ACK on to the server's access link;
  idle          share of the window's 10 ms bins in which the server sent none of the
                transfer's data; inflight_idle_kb: the median data in flight (sent, not
                acknowledged, all subflows) at the start of those bins: a sender that
                stops with data in flight is waiting for ACKs (its windows are full);
  model_paths   the flow model's max-min fair rate with every transfer on the paths its
                subflows took (analysis/references/flowmodel.py: an adaptive split over
                them for MPTCP, the measured path for single-path TCP, all paths evenly
                for sprayed TCP): what path placement alone allows.
Per run: the means, each transfer's likely bottleneck ("access" when its server's
uplink or client's downlink ran at >= 95 %, else "fabric" when a fabric link direction
on its paths did, else "none": no link on its paths was that busy, the transfer did not
fill them: windows, losses, timeouts), and the drops of the egress queues
(fidelity.json) by tier and direction (host_up: a sender's own interface).
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

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
from pathdiv.analysis.metrics.table import load_transfers
from pathdiv.analysis.references.flowmodel import Flow, long_run, path_links
from pathdiv.topologies.conditions import topology_of
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.model import Tier

WARMUP_S = 0.5
IDLE_BIN_S = 0.01
BUSY = 0.95
# egress queues by tier and direction: host_up is a sender's own interface
DROP_PLACES = ("host_up", "edge_up", "core_up", "core_down", "edge_down", "host_down")


def _directions(topo: FatTree, pk: pd.DataFrame) -> np.ndarray:
    """+1 when a packet climbs its link (its source lies in the link's lower subtree),
    -1 when it descends."""
    owner = {ip_to_int(a): h for a, h in topo.address_owner.items()}
    src_host = pk["src"].map(owner)
    up = np.zeros(len(pk), dtype=np.int8)
    links = topo.links
    for (li, host), idx in pk.groupby([pk["link"], src_host]).indices.items():
        lk = links[int(li)]
        below = topo.subtree(str(host), lk.tier) == topo.subtree(lk.a.node, lk.tier)
        up[idx] = 1 if below else -1
    return up


MASK = 0xFFFFFFFF


def _first(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    return frame.sort_values("ts").drop_duplicates(subset=[key], keep="first")


def subflow_delays(p: pd.DataFrame, caddr: set[int], server_link: int,
                   client_link: int) -> tuple[list[float], list[float], list[float]]:
    """One subflow's delays in seconds: data from the server's access link to the
    client's (fwd), from a data segment's arrival at the client's link to the first ACK
    for it leaving there (ackq: the client's stack and its own egress queue, where the
    ACK waits behind the data the client sends as a server), and that ACK's way back to
    the server's access link (rev)."""
    data = p[(p["payload"] > 0) & p["dst"].isin(caddr)]
    acks = p[p["src"].isin(caddr) & ((p["flags"] & 0x10) != 0)]
    if data.empty or acks.empty:
        return [], [], []
    base = int(data["seq"].iloc[0])
    data = data.assign(end=(data["seq"].astype(np.int64) + data["payload"] - base) & MASK)
    acks = acks.assign(end=(acks["ack"].astype(np.int64) - base) & MASK)
    d_s = _first(data[data["link"] == server_link], "end")
    d_c = _first(data[data["link"] == client_link], "end")
    a_c = _first(acks[acks["link"] == client_link], "end")
    a_s = _first(acks[acks["link"] == server_link], "end")
    fwd = d_s.merge(d_c, on="end", suffixes=("_s", "_c"))
    ackq = d_c.merge(a_c, on="end", suffixes=("_d", "_a"))
    rev = a_c.merge(a_s, on="end", suffixes=("_c", "_s"))
    return (list(fwd["ts_c"] - fwd["ts_s"]), list(ackq["ts_a"] - ackq["ts_d"]),
            list(rev["ts_s"] - rev["ts_c"]))


def stall_figures(subflow_packets: list[pd.DataFrame], caddr: set[int], server_link: int,
                  t0: float, t1: float) -> tuple[float, float]:
    """The share of the window's 10 ms bins in which the server put none of the
    transfer's data on its access link, and the median data in flight (sequence sent,
    not yet acknowledged, summed over the subflows, at the server's link) at the start of
    those bins, in KB: a sender that stops with data in flight waits for ACKs."""
    grid = np.arange(t0, t1, IDLE_BIN_S)
    if len(grid) == 0:
        return np.nan, np.nan
    inflight = np.zeros(len(grid))
    sent = np.zeros(len(grid))
    for p in subflow_packets:
        p = p[p["link"] == server_link]
        data = p[(p["payload"] > 0) & p["dst"].isin(caddr)]
        acks = p[p["src"].isin(caddr) & ((p["flags"] & 0x10) != 0)]
        if data.empty:
            continue
        base = int(data["seq"].iloc[0])
        ends = (data["seq"].astype(np.int64) + data["payload"] - base) & MASK
        ends = ends.where(ends < 2**31, 0).cummax().to_numpy()
        acked = (acks["ack"].astype(np.int64) - base) & MASK
        acked = acked.where(acked < 2**31, 0).cummax().to_numpy()
        i_d = np.searchsorted(data["ts"].to_numpy(), grid, side="right") - 1
        i_a = np.searchsorted(acks["ts"].to_numpy(), grid, side="right") - 1
        nxt = np.where(i_d >= 0, ends[np.maximum(i_d, 0)], 0)
        una = np.where(i_a >= 0, acked[np.maximum(i_a, 0)], 0) if len(acked) else 0
        inflight += np.maximum(nxt - una, 0)
        sent += np.histogram(data["ts"].to_numpy(), bins=np.append(grid, t1))[0]
    idle = sent == 0
    return float(idle.mean()), float(np.median(inflight[idle]) / 1e3) if idle.any() else np.nan


def run_table(run_dir: Path) -> tuple[pd.DataFrame, dict[str, object]]:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    cfg = manifest["config"]
    topo = topology_of(cfg)
    rate_bps = float(cfg["topology"]["links"]["host"]["bw_mbps"]) * 1e6
    sprayed = cfg["switching"]["mode"] == "spray"
    transfers = load_transfers(run_dir)
    t0, t1 = transfers["start_s"].max() + WARMUP_S, transfers["end_s"].min()
    span = max(t1 - t0, 1e-9)
    packets = read_link_captures(run_dir / "captures", topo)
    pk, table = split_subflows(packets)
    table = group_connections(table)
    members = match_transfers(transfers, table, topo)
    pk = pk.assign(up=_directions(topo, pk))
    inwin = pk[(pk["ts"] >= t0) & (pk["ts"] < t1)]
    util = inwin.groupby(["link", "up"])["wire_len"].sum() * 8 / (rate_bps * span)
    link_index = {lk.name: i for i, lk in enumerate(topo.links)}
    by_sub = pk.groupby("subflow").indices
    rows, flows = [], []
    for tr in transfers.itertuples(index=False):
        client, server = str(tr.client), str(tr.server)
        caddr = {ip_to_int(a) for a in topo.host_addresses(client)}
        sfs = [s for s in members.get(int(tr.transfer_id), []) if s in by_sub]
        candidates = topo.paths(server, client)
        cand_links = [frozenset(link_index[lk.name] for lk in topo.path_links(p))
                      for p in candidates]
        server_link = link_index[topo.links_of(server)[0].name]
        client_link = link_index[topo.links_of(client)[0].name]
        used: set[int] = set()
        got = dup_bytes = sent = resent = 0.0
        fwd_all: list[float] = []
        ackq_all: list[float] = []
        rev_all: list[float] = []
        per_sub = []
        mine = []
        for s in sfs:
            p = pk.iloc[by_sub[s]]
            mine.append(p)
            data = p[(p["payload"] > 0) & p["dst"].isin(caddr)]
            if data.empty:
                continue
            links = set(np.unique(data["link"]))
            used |= {i for i, cl in enumerate(cand_links) if cl <= links}
            per_sub.append(float(data["payload"].sum()))
            for link, kind in ((client_link, "in"), (server_link, "out")):
                at = data[data["link"] == link]
                again = at.duplicated(subset=["seq"], keep="first").to_numpy()
                w = ((at["ts"] >= t0) & (at["ts"] < t1)).to_numpy()
                pay = at["payload"].to_numpy()
                if kind == "in":
                    got += float(pay[w & ~again].sum())
                    dup_bytes += float(pay[w & again].sum())
                else:
                    sent += float(pay[w].sum())
                    resent += float(pay[w & again].sum())
            f, q, r = subflow_delays(p[(p["ts"] >= t0) & (p["ts"] < t1)], caddr,
                                     server_link, client_link)
            fwd_all += f
            ackq_all += q
            rev_all += r
        if sprayed and cfg["hosts"]["transport"] == "tcp":
            share: dict[tuple[str, str], float] = {}
            for path in candidates:
                for d in path_links(path):
                    share[d] = share.get(d, 0.0) + 1.0 / len(candidates)
            flows.append(Flow((share,)))
        else:
            routes = tuple(path_links(candidates[i]) for i in sorted(used)) or (
                path_links(candidates[0]),)
            flows.append(Flow(routes, adaptive=len(routes) > 1))
        path_dirs = {(link_index[topo.link_between(u, v).name], 1 if _climbs(topo, u, v) else -1)
                     for i in used for u, v in itertools.pairwise(candidates[i])}
        fabric = [util.get(d, 0.0) for d in path_dirs if topo.links[d[0]].tier is not Tier.HOST]
        # what a busy client access link could carry as payload: its data frames' payload
        # share, less the room the ACKs of the client's own upload take beside them
        down = inwin[(inwin["link"] == client_link) & (inwin["up"] == -1)]
        data_w = float(down.loc[down["payload"] > 0, "wire_len"].sum())
        ack_w = float(down.loc[down["payload"] == 0, "wire_len"].sum())
        pay_w = float(down["payload"].sum())
        total = sum(per_sub)
        idle, inflight_idle = stall_figures(mine, caddr, server_link, t0, t1)
        rows.append({
            "run": run_dir.name, "transfer": int(tr.transfer_id), "client": client,
            "server": server, "subflows": len(per_sub),
            "busy_subflows": sum(1 for b in per_sub if total and b / total >= 0.05),
            "paths": len(used), "paths_available": len(candidates),
            "goodput": got * 8 / (rate_bps * span),
            "dup": dup_bytes / (got + dup_bytes) if got else np.nan,
            "retx": resent / sent if sent else np.nan,
            "ceiling": pay_w / (data_w + ack_w) if data_w else np.nan,
            "up_util": float(util.get((server_link, 1), 0.0)),
            "down_util": float(util.get((client_link, -1), 0.0)),
            "fabric_max": max(fabric, default=np.nan),
            "fwd_ms": 1000 * float(np.median(fwd_all)) if fwd_all else np.nan,
            "ackq_ms": 1000 * float(np.median(ackq_all)) if ackq_all else np.nan,
            "rev_ms": 1000 * float(np.median(rev_all)) if rev_all else np.nan,
            "idle": idle, "inflight_idle_kb": inflight_idle,
        })
    frame = pd.DataFrame(rows)
    frame["model_paths"] = long_run(flows)
    frame["bottleneck"] = [
        "access" if max(r.up_util, r.down_util) >= BUSY
        else "fabric" if np.isfinite(r.fabric_max) and r.fabric_max >= BUSY else "none"
        for r in frame.itertuples()]
    fid = json.loads((run_dir / "fidelity.json").read_text())
    drops: dict[str, int] = {}
    for lk in fid.get("links", []):
        node, intf = str(lk["link"]).split(":", 1)
        link = topo.link_of_intf(intf)
        where = f"{link.tier.value}_{'up' if link.a.node == node else 'down'}"
        drops[where] = drops.get(where, 0) + int(lk["drops"])
    means = ["goodput", "dup", "retx", "ceiling", "model_paths", "up_util", "down_util",
             "paths", "subflows", "busy_subflows", "fwd_ms", "ackq_ms", "rev_ms", "idle",
             "inflight_idle_kb"]
    summary: dict[str, object] = {
        "run": run_dir.name, "level": "_".join(run_dir.name.split("_")[1:-1]),
        "window_s": span, **{m: float(frame[m].mean()) for m in means},
        **{f"bn_{b}": int((frame["bottleneck"] == b).sum())
           for b in ("access", "fabric", "none")},
        **{f"drops_{w}": drops.get(w, 0) for w in DROP_PLACES},
        "rtos": sum(fid.get("rtos", {}).values()),
    }
    return frame, summary


def _climbs(topo: FatTree, u: str, v: str) -> bool:
    order = {"host": 0, "edge": 1, "aggregation": 2, "core": 3}
    return order[topo.nodes[v].role.value] > order[topo.nodes[u].role.value]


def ci95(values: pd.Series) -> str:
    """Mean [95 % t interval] of a column over runs."""
    a = values.dropna().to_numpy(dtype=float)
    if len(a) == 0:
        return "-"
    spec = ".0f" if abs(a.mean()) >= 100 else ".1f" if abs(a.mean()) >= 10 else ".3f"
    if len(a) < 2:
        return format(a.mean(), spec)
    half = stats.t.ppf(0.975, len(a) - 1) * a.std(ddof=1) / np.sqrt(len(a))
    return f"{a.mean():{spec}} [{a.mean() - half:{spec}}, {a.mean() + half:{spec}}]"


def variant_table(table: pd.DataFrame, columns: list[str]) -> str:
    """Per variant (the results folder a run came from) and level: each column's mean
    with its 95 % interval over the runs (Markdown)."""
    out = ["| variant | level | runs | " + " | ".join(columns) + " |",
           "|" + " --- |" * (len(columns) + 3)]
    for (variant, level), g in table.groupby(["variant", "level"], sort=False):
        out.append(f"| {variant} | {level} | {len(g)} | "
                   + " | ".join(ci95(g[c]) for c in columns) + " |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", type=Path, help="run folders (results/X/runs/<run>)")
    ap.add_argument("--csv", type=Path, help="write the per-transfer table here")
    ap.add_argument("--summary", type=Path, help="write the per-run table here")
    ap.add_argument("--from", dest="source", type=Path, nargs="+",
                    help="per-run tables (--summary) to print per variant and level, with "
                         "95 %% intervals over the runs, instead of reading captures")
    ap.add_argument("--columns", default="goodput,ceiling,model_paths,up_util,bn_none,"
                    "drops_host_up,retx,dup,ackq_ms", help="columns of the --from table")
    args = ap.parse_args()
    if args.source:
        table = pd.concat([pd.read_csv(f) for f in args.source], ignore_index=True)
        print(variant_table(table, args.columns.split(",")))
        return
    frames, sums = [], []
    for r in args.runs:
        f, s = run_table(r)
        frames.append(f)
        sums.append({"variant": r.resolve().parent.parent.name, **s})
    if args.csv:
        pd.concat(frames, ignore_index=True).to_csv(args.csv, index=False, float_format="%.4f")
    table = pd.DataFrame(sums)
    if args.summary:
        table.to_csv(args.summary, index=False, float_format="%.4f")
    print(variant_table(table, args.columns.split(",")))


if __name__ == "__main__":
    main()
