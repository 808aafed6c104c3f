"""Packets of a run → subflows (TCP 5-tuples) → connections (MPTCP) → transfers.

`read_link_captures` reads every per-link capture of a run (rotated parts included)
into one packet table with a `link` column (index into `topo.links`). `split_subflows`
cuts the TCP packets into subflows: one per canonical 4-tuple and initial sequence
number, so a reused port starts a new subflow. `group_connections` joins MPTCP subflows
into connections by tokens: an MP_CAPABLE subflow's keys (SYN-ACK, third ACK) give the
connection's tokens (`mptcp_token`: SHA-256 for MPTCP v1, SHA-1 for v0), an MP_JOIN
SYN names the token of the connection it joins. `match_transfers` finds each row of
transfers.csv in that table: the initial subflow by its 4-tuple and time, its
connection's other subflows by token, and, for joins whose token was not seen, by the
known addresses and ports.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from pathdiv.analysis.capture.pcap import (
    TCP_ACK,
    TCP_SYN,
    empty_table,
    ip_to_int,
    mptcp_token,
    read_pcap,
)
from pathdiv.topologies.fattree import FatTree

_PART = re.compile(r"^(?P<intf>.+)\.pcap(?P<part>\d*)$")
MATCH_SLACK_S = 1.0  # a subflow may start this long before/after the app's start/end


class CaptureSetError(ValueError):
    """Capture files that do not fit the run's topology."""


def capture_files(captures_dir: Path) -> dict[str, list[Path]]:
    """Capture files per interface: `<intf>.pcap`, then rotated `<intf>.pcap1`, ..."""
    parts: dict[str, list[tuple[int, Path]]] = {}
    for path in captures_dir.iterdir():
        m = _PART.fullmatch(path.name)
        if m and path.is_file():
            number = int(m["part"]) if m["part"] else 0
            parts.setdefault(m["intf"], []).append((number, path))
    return {intf: [p for _, p in sorted(files)] for intf, files in sorted(parts.items())}


def read_link_captures(captures_dir: Path, topo: FatTree) -> pd.DataFrame:
    """Every packet captured on the run's links, in time order, with `link` (the
    index of its link in `topo.links`) added. A link captured at both ends is read
    from its upper end only (otherwise its packets would count twice)."""
    files = capture_files(captures_dir)
    if not files:
        raise CaptureSetError(
            f"no capture files (*.pcap) in {captures_dir}; expected one per link, "
            "named <interface>.pcap: was capture enabled for this run?"
        )
    link_index = {lk.name: i for i, lk in enumerate(topo.links)}
    chosen: dict[int, str] = {}
    for intf in files:
        try:
            link = topo.link_of_intf(intf)
        except KeyError as exc:
            raise CaptureSetError(
                f"capture {captures_dir / intf}.pcap: {exc.args[0]}; the run's config "
                "(topology.k) must match its captures"
            ) from None
        i = link_index[link.name]
        if i in chosen:
            warnings.warn(
                f"link {link.name} captured at both ends; using {link.b.intf} only",
                stacklevel=2,
            )
            if intf != link.b.intf:
                continue
        chosen[i] = intf
    tables = []
    for i, intf in sorted(chosen.items()):
        for path in files[intf]:
            t = read_pcap(path)
            t["link"] = np.int16(i)
            tables.append(t)
    out = pd.concat(tables, ignore_index=True) if tables else empty_table()
    if "link" not in out:
        out["link"] = np.int16(0)
    order = np.argsort(out["ts"].to_numpy(), kind="stable")
    return out.iloc[order].reset_index(drop=True)


def _endpoint(addr: np.ndarray, port: np.ndarray) -> np.ndarray:
    return (addr.astype(np.uint64) << np.uint64(16)) | port.astype(np.uint64)


def split_subflows(packets: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The TCP packets with `subflow` and `from_init` (sent by the side that opened the
    subflow) columns, and the subflow table (one row per subflow; see docs)."""
    pk = packets[packets["tcp_ok"].to_numpy()].reset_index(drop=True)
    n = len(pk)
    src, dst = pk["src"].to_numpy(), pk["dst"].to_numpy()
    sport, dport = pk["sport"].to_numpy(), pk["dport"].to_numpy()
    e1, e2 = _endpoint(src, sport), _endpoint(dst, dport)
    lo_code, _ = pd.factorize(np.minimum(e1, e2))
    hi_code, hi_u = pd.factorize(np.maximum(e1, e2))
    pair, _ = pd.factorize(lo_code.astype(np.int64) * max(len(hi_u), 1) + hi_code)
    ts = pk["ts"].to_numpy()
    order = np.lexsort((ts, pair))
    flags = pk["flags"].to_numpy()
    syn_only = (flags & (TCP_SYN | TCP_ACK)) == TCP_SYN
    s_pair, s_syn, s_seq = pair[order], syn_only[order], pk["seq"].to_numpy()[order]
    # A new subflow starts at a SYN whose ISN differs from the pair's previous SYN.
    syn_pos = np.flatnonzero(s_syn)
    new_at = np.ones(len(syn_pos), dtype=bool)
    if len(syn_pos) > 1:
        same_pair = s_pair[syn_pos[1:]] == s_pair[syn_pos[:-1]]
        same_isn = s_seq[syn_pos[1:]] == s_seq[syn_pos[:-1]]
        new_at[1:] = ~(same_pair & same_isn)
    marks = np.zeros(n, dtype=np.int64)
    marks[syn_pos[new_at]] = 1
    csum = np.cumsum(marks)
    pair_start = np.r_[0, np.flatnonzero(np.diff(s_pair)) + 1] if n else np.zeros(0, int)
    start_of = np.repeat(pair_start, np.diff(np.r_[pair_start, n]))
    before = np.where(start_of > 0, csum[np.maximum(start_of - 1, 0)], 0)
    instance = csum - before
    sf_sorted, _ = pd.factorize(s_pair.astype(np.int64) * (instance.max(initial=0) + 1) + instance)
    subflow = np.empty(n, dtype=np.int64)
    subflow[order] = sf_sorted
    pk["subflow"] = subflow

    # Initiator: the sender of the subflow's SYN; without a SYN, the first sender.
    first_syn = pk[syn_only].groupby("subflow", sort=True).head(1)
    first_any = pk.groupby("subflow", sort=True).head(1)
    init = first_any.set_index("subflow")[["src", "sport", "dst", "dport"]]
    syn_init = first_syn.set_index("subflow")[["src", "sport", "dst", "dport"]]
    init.loc[syn_init.index] = syn_init
    init = init.sort_index()
    pk["from_init"] = (src == init["src"].to_numpy()[subflow]) & (
        sport == init["sport"].to_numpy()[subflow]
    )
    table = pd.DataFrame(
        {
            "init_addr": init["src"].to_numpy(),
            "init_port": init["sport"].to_numpy(),
            "resp_addr": init["dst"].to_numpy(),
            "resp_port": init["dport"].to_numpy(),
            "syn_seen": init.index.isin(syn_init.index),
        },
        index=init.index,
    )
    g = pk.groupby("subflow", sort=True)["ts"]
    table["first_ts"] = g.min()
    table["last_ts"] = g.max()
    _mptcp_handshake(pk, table)
    table.index.name = "subflow"
    return pk, table


def _mptcp_handshake(pk: pd.DataFrame, table: pd.DataFrame) -> None:
    """Add MPTCP columns: `mp` ('capable', 'join' or ''), `key_init`, `key_resp`,
    `join_token` (0 where unknown)."""
    table["mp"] = ""
    table["key_init"] = np.uint64(0)
    table["key_resp"] = np.uint64(0)
    table["join_token"] = np.uint32(0)
    opt = pk[pk["mp_subtype"].to_numpy() >= 0]
    if opt.empty:
        return
    flags = opt["flags"].to_numpy()
    syn = (flags & TCP_SYN) != 0
    ack = (flags & TCP_ACK) != 0
    sub = opt["mp_subtype"].to_numpy()
    fi = opt["from_init"].to_numpy()
    cap_syn = opt[syn & ~ack & (sub == 0) & fi]
    table.loc[cap_syn["subflow"].unique(), "mp"] = "capable"
    join_syn = opt[syn & ~ack & (sub == 1) & fi]
    table.loc[join_syn["subflow"].unique(), "mp"] = "join"
    tok = join_syn.groupby("subflow")["mp_token"].first()
    table.loc[tok.index, "join_token"] = tok.to_numpy()
    # Keys: the SYN-ACK carries the responder's; the third ACK both (initiator's first);
    # an MPTCP v0 SYN the initiator's.
    cap = opt[(sub == 0)]
    fi_cap = cap["from_init"].to_numpy()
    for rows, col, key_col in (
        (cap[fi_cap & (cap["mp_key_a"].to_numpy() != 0)], "key_init", "mp_key_a"),
        (cap[~fi_cap & (cap["mp_key_a"].to_numpy() != 0)], "key_resp", "mp_key_a"),
        (cap[fi_cap & (cap["mp_key_b"].to_numpy() != 0)], "key_resp", "mp_key_b"),
    ):
        got = rows.groupby("subflow")[key_col].first()
        missing = got[table.loc[got.index, col].to_numpy() == 0]
        table.loc[missing.index, col] = missing.to_numpy()


def group_connections(table: pd.DataFrame) -> pd.DataFrame:
    """Add `conn` (the subflow id of the connection's MP_CAPABLE subflow, or of the
    subflow itself for plain TCP and unresolved joins) and `token_resolved`."""
    table = table.copy()
    conn = pd.Series(table.index.to_numpy(), index=table.index)
    # token -> [(start time, connection)]: a token seen twice (reused after its
    # connection ended) resolves to the latest connection that started before the join.
    tokens: dict[int, list[tuple[float, int]]] = {}
    for sf, row in table[table["mp"] == "capable"].iterrows():
        for key in {int(row["key_resp"]), int(row["key_init"])} - {0}:
            for version in (1, 0):  # v1 (SHA-256) and v0 (SHA-1) tokens cannot collide
                token = mptcp_token(key, version)
                tokens.setdefault(token, []).append((float(row["first_ts"]), int(sf)))
    resolved = pd.Series(table["mp"] != "join", index=table.index)
    for sf, row in table[table["mp"] == "join"].iterrows():
        owners = [c for c in tokens.get(int(row["join_token"]), []) if c[0] <= row["first_ts"]]
        if owners:
            conn[sf] = max(owners)[1]
            resolved[sf] = True
    table["conn"] = conn
    table["token_resolved"] = resolved
    return table


def match_transfers(
    transfers: pd.DataFrame, table: pd.DataFrame, topo: FatTree
) -> dict[int, list[int]]:
    """transfer_id → its subflow ids (initial first). A transfer whose initial subflow
    is not in the captures maps to an empty list."""
    owner = {ip_to_int(a): h for a, h in topo.address_owner.items()}
    out: dict[int, list[int]] = {}
    claimed: set[int] = set()
    by_4tuple = table.groupby(["init_addr", "init_port", "resp_addr", "resp_port"]).groups
    for tr in transfers.itertuples(index=False):
        if not _known(tr.client_addr, tr.client_port, tr.server_addr, tr.server_port):
            out[int(tr.transfer_id)] = []  # the app never got a connection
            continue
        key = (
            ip_to_int(str(tr.client_addr)),
            int(tr.client_port),
            ip_to_int(str(tr.server_addr)),
            int(tr.server_port),
        )
        cand = by_4tuple.get(key)
        if cand is None:  # a subflow seen without its SYN may have its sides swapped
            cand = by_4tuple.get((key[2], key[3], key[0], key[1]))
        if cand is None:
            out[int(tr.transfer_id)] = []
            continue
        rows = table.loc[list(cand)]
        near = rows[
            (rows["first_ts"] >= tr.start_s - MATCH_SLACK_S)
            & (rows["first_ts"] <= tr.end_s + MATCH_SLACK_S)
        ]
        if near.empty:
            out[int(tr.transfer_id)] = []
            continue
        first = int((near["first_ts"] - tr.start_s).abs().idxmin())
        conn = int(table.at[first, "conn"])
        members = [first] + [
            int(s) for s in table.index[table["conn"].to_numpy() == conn] if int(s) != first
        ]
        out[int(tr.transfer_id)] = members
        claimed.update(members)
    _claim_orphan_joins(transfers, table, owner, out, claimed)
    return out


def _known(*values: object) -> bool:
    return all(v is not None and v == v and str(v) != "" for v in values)


def _claim_orphan_joins(
    transfers: pd.DataFrame,
    table: pd.DataFrame,
    owner: dict[int, str],
    out: dict[int, list[int]],
    claimed: set[int],
) -> None:
    """Joins whose token matched no connection: give each to the MPTCP transfer with
    the same server address/port, a client address of the same host and a time span
    that contains the join's start (the earliest-starting such transfer wins)."""
    orphans = table[(table["mp"] == "join") & ~table["token_resolved"]]
    orphans = orphans[~orphans.index.isin(list(claimed))]
    if orphans.empty:
        return
    mptcp = transfers[transfers["transport"].astype(str) == "mptcp"]
    for sf, row in orphans.sort_values("first_ts").iterrows():
        host = owner.get(int(row["init_addr"]))
        for tr in mptcp.sort_values("start_s").itertuples(index=False):
            if (
                host == tr.client
                and int(row["resp_addr"]) == ip_to_int(tr.server_addr)
                and int(row["resp_port"]) == int(tr.server_port)
                and tr.start_s - MATCH_SLACK_S <= row["first_ts"] <= tr.end_s
                and out.get(int(tr.transfer_id))
            ):
                out[int(tr.transfer_id)].append(int(sf))
                break
