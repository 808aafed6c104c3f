"""Synthetic runs with known answers: scapy-crafted TCP and MPTCP transfers written as
headers-only per-link captures, in the layout the runner produces.

The timing model is deliberately simple so a test can work its expected values out
by hand: a packet sent at time t along a path of nodes n0..nm is captured on link i
(n_i, n_{i+1}) at t + (i + 1) * hop_delay_s, on the link's upper-end interface. A
packet `lost_after` hops is captured on its first `lost_after` links only.

The transfer model (`add_transfer`): the client opens subflow 0 (MP_CAPABLE when
MPTCP) and then one MP_JOIN subflow per extra path, sends a request of
`request_bytes`, the server answers with `size_bytes` split into `mss`-sized segments
dealt round-robin over the subflows, one segment every `gap_s`, each answered by a
pure ACK; then the server sends FIN on every subflow and the client answers FIN.
Every frame is Ethernet + IPv4 (20) + TCP (20, plus MPTCP options on handshakes).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pathdiv.analysis.capture.pcap import mptcp_token
from pathdiv.topologies.fattree import FatTree

ETH_IP_TCP = 14 + 20 + 20  # frame bytes of a TCP segment without options or payload

TRANSFER_COLUMNS = [
    "transfer_id",
    "group_id",
    "flow_type",
    "transport",
    "client",
    "server",
    "client_addr",
    "server_addr",
    "server_port",
    "client_port",
    "size_bytes",
    "start_s",
    "end_s",
    "ok",
    "error",
    "subflows",
]


@dataclass
class CaptureBuilder:
    """Collects crafted frames per capture interface and writes one pcap per link."""

    topo: FatTree
    hop_delay_s: float = 50e-6
    snaplen: int = 160
    frames: dict[str, list[tuple[float, bytes]]] = field(default_factory=dict)

    def transmit(
        self, t: float, path: Sequence[str], packet: Any, lost_after: int | None = None
    ) -> float:
        """Record `packet` (a scapy packet) on each link of `path`; return the time it
        is captured on the last link it reaches."""
        raw = bytes(packet)
        links = self.topo.path_links(tuple(path))
        if lost_after is not None:
            links = links[:lost_after]
        seen = t
        for i, link in enumerate(links):
            seen = t + (i + 1) * self.hop_delay_s
            self.frames.setdefault(link.b.intf, []).append((seen, raw))
        return seen

    def write(self, captures_dir: Path) -> list[Path]:
        """One `<intf>.pcap` per link that saw traffic, records in time order,
        truncated to the snap length with the wire length kept."""
        from scapy.utils import PcapWriter

        captures_dir.mkdir(parents=True, exist_ok=True)
        out = []
        for intf, frames in sorted(self.frames.items()):
            path = captures_dir / f"{intf}.pcap"
            writer = PcapWriter(str(path), linktype=1, snaplen=self.snaplen, sync=False)
            writer.write_header(None)
            for ts, raw in sorted(frames, key=lambda f: f[0]):
                sec = int(ts)
                usec = round((ts - sec) * 1e6)
                writer.write_packet(
                    raw[: self.snaplen], sec=sec, usec=usec, wirelen=len(raw)
                )
            writer.close()
            out.append(path)
        return out


def mp_capable(key_a: int | None = None, key_b: int | None = None) -> tuple[int, bytes]:
    """An MPTCP v1 MP_CAPABLE option (kind 30) with zero, one or two keys."""
    body = bytes([0x01, 0x01])  # subtype 0, version 1; flags: SHA-256 HMAC (H bit)
    for key in (key_a, key_b):
        if key is not None:
            body += key.to_bytes(8, "big")
    return (30, body)


def mp_join_syn(token: int, nonce: int, address_id: int) -> tuple[int, bytes]:
    return (30, bytes([0x10, address_id]) + token.to_bytes(4, "big") + nonce.to_bytes(4, "big"))

def dss(dack: int | None = None, dsn: int | None = None, dlen: int = 0,
        wide_ack: bool = False, wide_dsn: bool = False) -> tuple[int, bytes]:
    """An MPTCP DSS option (RFC 8684, 3.3): a DATA_ACK and/or a mapping of `dlen` bytes
    at data sequence `dsn` (subflow sequence 1, no checksum), 4 or 8 bytes wide."""
    flags, body = 0, b""
    if dack is not None:
        flags |= 0x01 | (0x02 if wide_ack else 0)
        body += dack.to_bytes(8 if wide_ack else 4, "big")
    if dsn is not None:
        flags |= 0x04 | (0x08 if wide_dsn else 0)
        body += dsn.to_bytes(8 if wide_dsn else 4, "big") + (1).to_bytes(4, "big")
        body += dlen.to_bytes(2, "big")
    return (30, bytes([2 << 4, flags]) + body)



@dataclass
class SubflowSpec:
    """One subflow: the client address it leaves from and the path (client → server)."""

    client_addr: str
    client_port: int
    path: tuple[str, ...]


@dataclass
class TransferSpec:
    transfer_id: int
    group_id: int
    flow_type: str
    client: str
    server: str
    server_addr: str
    server_port: int
    subflows: list[SubflowSpec]
    size_bytes: int
    t0: float
    mptcp: bool = False
    mss: int = 1000
    gap_s: float = 1e-3
    request_bytes: int = 100
    lost: dict[int, int] = field(default_factory=dict)  # segment -> hops it survives
    delayed: dict[int, float] = field(default_factory=dict)  # segment -> extra last-hop delay
    key_client: int = 0x1111222233334444
    key_server: int = 0x5555666677778888
    keys_visible: bool = True  # False: MP_CAPABLE without keys, so joins cannot resolve
    isn: int = 1000  # initial sequence numbers: client isn*(i+1), server 500*isn*(i+1)
    client_closes: bool = False  # the client sends FIN, then RST; the server no FIN


def add_transfer(b: CaptureBuilder, spec: TransferSpec) -> dict[str, Any]:
    """Craft one transfer's packets into `b`; return its transfers.csv row.

    A lost segment is retransmitted once, after all first transmissions; a delayed
    segment reaches its last link `delayed[j]` seconds later than scheduled.
    """
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    h = b.hop_delay_s
    n = len(spec.subflows)
    fwd = [sf.path for sf in spec.subflows]
    rev = [tuple(reversed(p)) for p in fwd]
    cseq = [spec.isn * (i + 1) for i in range(n)]
    sseq = [500 * spec.isn * (i + 1) for i in range(n)]
    ip_id = [0] * n

    def frame(i: int, from_client: bool, flags: str, payload: int = 0, opts=()) -> Any:
        sf = spec.subflows[i]
        if from_client:
            ip = IP(src=sf.client_addr, dst=spec.server_addr)
            tcp = TCP(sport=sf.client_port, dport=spec.server_port, seq=cseq[i], ack=sseq[i])
        else:
            ip_id[i] += 1
            ip = IP(src=spec.server_addr, dst=sf.client_addr, id=ip_id[i])
            tcp = TCP(sport=spec.server_port, dport=sf.client_port, seq=sseq[i], ack=cseq[i])
        tcp.flags = flags
        if opts:
            tcp.options = list(opts)
        pkt = Ether() / ip / tcp
        if payload:
            pkt = pkt / Raw(b"\x00" * payload)
        return pkt


    L = len(fwd[0]) - 1  # hops of every path (equal-cost paths have one length)
    rtt = 2 * L * h + 2 * h  # a round trip, with one hop_delay of turnaround at each end
    t = spec.t0
    for i in range(n):
        if spec.mptcp and i == 0:
            syn_o = [mp_capable()]
            if spec.keys_visible:
                synack_o = [mp_capable(spec.key_server)]
                ack_o = [mp_capable(spec.key_client, spec.key_server)]
            else:
                synack_o = ack_o = [mp_capable()]
        elif spec.mptcp:
            syn_o = [mp_join_syn(mptcp_token(spec.key_server), 7 + i, i)]
            synack_o = [(30, bytes([0x10, i]) + bytes(12))]
            ack_o = [(30, bytes([0x10, 0]) + bytes(20))]
        else:
            syn_o = synack_o = ack_o = []
        b.transmit(t, fwd[i], frame(i, True, "S", opts=syn_o))
        cseq[i] += 1
        b.transmit(t + rtt / 2, rev[i], frame(i, False, "SA", opts=synack_o))
        sseq[i] += 1
        b.transmit(t + rtt, fwd[i], frame(i, True, "A", opts=ack_o))
        t += rtt + h
    b.transmit(t, fwd[0], frame(0, True, "PA", spec.request_bytes))
    cseq[0] += spec.request_bytes
    t_data = t + rtt / 2

    sent: list[tuple[int, int, int]] = []  # (subflow, seq, length) per segment
    remaining, j = spec.size_bytes, 0
    while remaining > 0:
        size = min(spec.mss, remaining)
        i = j % n
        sent.append((i, sseq[i], size))
        sseq[i] += size
        remaining -= size
        j += 1
    retx = sorted(spec.lost)
    last_arrival = t_data
    for j, (i, seq, size) in enumerate([*sent, *(sent[r] for r in retx)]):
        t_send = t_data + j * spec.gap_s
        keep = sseq[i]
        sseq[i] = seq
        pkt = frame(i, False, "PA", size)
        sseq[i] = keep
        first = j < len(sent)
        lost = spec.lost.get(j) if first else None
        if first and j in spec.delayed:
            arrival = _transmit_delayed(b, t_send, rev[i], pkt, spec.delayed[j])
        else:
            arrival = b.transmit(t_send, rev[i], pkt, lost_after=lost)
        if lost is None:
            b.transmit(arrival + h, fwd[i], frame(i, True, "A"))
            last_arrival = max(last_arrival, arrival)
    t_fin = max(t_data + (len(sent) + len(retx)) * spec.gap_s, last_arrival + h)
    for i in range(n):
        t_i = t_fin + i * h
        if spec.client_closes:  # as an MPTCP client that had the DATA_FIN and closed
            b.transmit(t_i, fwd[i], frame(i, True, "FA"))
            b.transmit(t_i + h, fwd[i], frame(i, True, "R"))
            continue
        b.transmit(t_i, rev[i], frame(i, False, "FA"))
        sseq[i] += 1
        b.transmit(t_i + rtt / 2, fwd[i], frame(i, True, "FA"))
        cseq[i] += 1
        b.transmit(t_i + rtt, rev[i], frame(i, False, "A"))
    first_sf = spec.subflows[0]
    return {
        "transfer_id": spec.transfer_id,
        "group_id": spec.group_id,
        "flow_type": spec.flow_type,
        "transport": "mptcp" if spec.mptcp else "tcp",
        "client": spec.client,
        "server": spec.server,
        "client_addr": first_sf.client_addr,
        "server_addr": spec.server_addr,
        "server_port": spec.server_port,
        "client_port": first_sf.client_port,
        "size_bytes": spec.size_bytes,
        "start_s": round(spec.t0 - 1e-3, 6),
        "end_s": round(t_fin + (n + 1) * rtt, 6),
        "ok": True,
        "error": "",
        "subflows": n,
    }


def _transmit_delayed(
    b: CaptureBuilder, t: float, path: Sequence[str], packet: Any, extra_s: float
) -> float:
    """Like CaptureBuilder.transmit, with `extra_s` more delay before the last link."""
    links = b.topo.path_links(tuple(path))
    b.transmit(t, path[:-1], packet)
    seen = t + len(links) * b.hop_delay_s + extra_s
    b.frames.setdefault(links[-1].b.intf, []).append((seen, bytes(packet)))
    return seen


def write_run(
    run_dir: Path,
    topo: FatTree,
    builder: CaptureBuilder,
    transfers: list[dict[str, Any]],
    *,
    transport: str,
    subflows: int,
    pattern: str,
    factors: dict[str, str] | None = None,
    run_id: str = "r0001",
    repetition: int = 0,
    status: str = "complete",
) -> Path:
    """Write manifest.json, transfers.csv and captures/ as the runner does."""

    run_dir.mkdir(parents=True, exist_ok=True)
    config = {
        "name": "synthetic",
        "seed": 1,
        "topology": {"kind": "fattree", "k": topo.k},
        "switching": {"mode": "ecmp"},
        "hosts": {"transport": transport, "subflows": subflows},
        "workload": {"pattern": pattern},
    }
    manifest = {
        "run_id": run_id,
        "factors": factors or {"switching": "ecmp-" + transport},
        "repetition": repetition,
        "seed": 1,
        "config": config,
        "status": status,
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    with open(run_dir / "transfers.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=TRANSFER_COLUMNS)
        w.writeheader()
        for row in transfers:
            w.writerow(row)
    builder.write(run_dir / "captures")
    return run_dir


def spec_between(
    topo: FatTree,
    transfer_id: int,
    client: str,
    server: str,
    *,
    paths: Sequence[int] = (0,),
    mptcp: bool = False,
    client_port: int = 40000,
    server_port: int = 80,
    **kw: Any,
) -> TransferSpec:
    """A TransferSpec with one subflow per entry of `paths` (indices into
    `topo.paths(client, server)`); subflow i leaves from the client's i-th address
    (alias addresses for i >= 1, so the topology needs aliases for MPTCP)."""
    all_paths = topo.paths(client, server)
    addrs = topo.host_addresses(client)
    subflows = [
        SubflowSpec(addrs[i % len(addrs)], client_port + i, all_paths[p])
        for i, p in enumerate(paths)
    ]
    kw.setdefault("group_id", transfer_id)
    kw.setdefault("flow_type", "short")
    return TransferSpec(
        transfer_id=transfer_id,
        client=client,
        server=server,
        server_addr=topo.nodes[server].address,
        server_port=server_port,
        subflows=subflows,
        mptcp=mptcp,
        **kw,
    )
