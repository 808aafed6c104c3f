"""What a receiver's TCP got against what arrived on its link (pure, from two captures).

The spray lab (tests/support/juggler_lab.py) captures one transfer twice: on the sender's
interface, where a packet sniffer sees each frame as it leaves the path's queue (with veth
that is when it arrives at the receiver: the wire), and on the receiver's interface, where
it sees what the receive path handed to IP and TCP, after GRO (and Juggler in it) merged
and reordered. From the two:

- `late_segments`: data that came below bytes already seen (reordering as the wire had it
  or as TCP got it); bytes seen before (retransmissions) are counted apart;
- `hold_delays`: per segment of the wire, how much later its first byte reached TCP;
- `merges`: how many received packets held more than one segment (GRO at work);
- `mapping_overruns`: received packets whose payload runs past the DSS mapping they carry,
  which GRO merging segments of different MPTCP mappings into one would cause (the study's
  suspicion); `subflows` tells which 4-tuples carried data.
"""

from __future__ import annotations

import bisect
import statistics
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

MPTCP_OPTION, DSS_SUBTYPE = 30, 2


@dataclass(frozen=True)
class Segment:
    """One server-to-client TCP packet with data (or a FIN) as a capture saw it."""

    t: float
    flow: tuple  # (src, sport, dst, dport)
    seq: int  # relative to the flow's first sequence number seen (mod 2**32)
    length: int  # sequence space it takes: payload bytes, plus one for a FIN
    fin: bool
    mapping: tuple[int, int, int] | None  # DSS (data seq, subflow seq, data length)
    isn: int | None  # the flow's initial sequence number, where its SYN was seen


def dss_mapping(opts: bytes) -> tuple[int, int, int] | None:
    """(data seq, subflow seq relative to the ISN, data length) of a DSS mapping in raw
    TCP options (RFC 8684 3.3), if there is one."""
    i = 0
    while i < len(opts):
        kind = opts[i]
        if kind == 0:
            return None
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(opts) or opts[i + 1] < 2:
            return None
        length = opts[i + 1]
        body = opts[i: i + length]
        if kind == MPTCP_OPTION and len(body) >= 4 and body[2] >> 4 == DSS_SUBTYPE:
            flags, off = body[3], 4
            if flags & 0x01:  # data ACK: 8 bytes if 'a' else 4
                off += 8 if flags & 0x02 else 4
            if flags & 0x04:  # mapping: DSN of 8 bytes if 'm' else 4
                dsn_len = 8 if flags & 0x08 else 4
                if len(body) < off + dsn_len + 6:
                    return None
                dsn = int.from_bytes(body[off: off + dsn_len], "big")
                ssn, dlen = struct.unpack("!IH", body[off + dsn_len: off + dsn_len + 6])
                return dsn, ssn, dlen
            return None
        i += length
    return None


def read_segments(pcap: Path, server_port: int) -> list[Segment]:
    """Every packet from `server_port` that carries data or a FIN, in capture order."""
    import dpkt

    first: dict[tuple, int] = {}
    isn: dict[tuple, int] = {}
    out = []
    with pcap.open("rb") as f:
        for ts, buf in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(buf).data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            if tcp.sport != server_port:
                continue
            flow = (ip.src, tcp.sport, ip.dst, tcp.dport)
            if tcp.flags & dpkt.tcp.TH_SYN:
                isn[flow] = tcp.seq
                first.setdefault(flow, (tcp.seq + 1) % 2**32)
                continue
            length = ip.len - ip.hl * 4 - tcp.off * 4
            fin = 1 if tcp.flags & dpkt.tcp.TH_FIN else 0
            if length + fin <= 0:
                continue
            base = first.setdefault(flow, tcp.seq)
            out.append(Segment(float(ts), flow, (tcp.seq - base) % 2**32, length + fin,
                               bool(fin), dss_mapping(bytes(tcp.opts)), isn.get(flow)))
    return out


def by_flow(segments: Iterable[Segment]) -> dict[tuple, list[Segment]]:
    out: dict[tuple, list[Segment]] = {}
    for s in segments:
        out.setdefault(s.flow, []).append(s)
    return out


def late_segments(segments: Sequence[Segment]) -> dict[str, int]:
    """Per capture: `segments` with data; `late`: ones that brought new data below bytes
    already seen (reordering); `repeats`: ones whose bytes were all seen before
    (retransmissions, duplicates)."""
    late = repeats = 0
    for flow_segments in by_flow(segments).values():
        highest = 0
        seen: list[tuple[int, int]] = []
        for s in flow_segments:
            end = s.seq + s.length
            if covered(seen, s.seq, end):
                repeats += 1
                continue
            if s.seq < highest:
                late += 1
            highest = max(highest, end)
            seen.append((s.seq, end))
    return {"segments": len(segments), "late": late, "repeats": repeats}


def covered(ranges: Sequence[tuple[int, int]], start: int, end: int) -> bool:
    """Whether [start, end) lies within the union of `ranges`."""
    pos = start
    for a, b in sorted(ranges):
        if a > pos:
            break
        pos = max(pos, b)
        if pos >= end:
            return True
    return pos >= end


def hold_delays(wire: Sequence[Segment], received: Sequence[Segment]) -> list[float]:
    """For each segment of the wire (its first copy), the time from its arrival to the
    first received packet that holds its first byte, in µs."""
    got = by_flow(received)
    out = []
    for flow, segments in by_flow(wire).items():
        arrived: dict[int, float] = {}
        for s in segments:
            arrived.setdefault(s.seq, s.t)
        starts = sorted(arrived)
        up: dict[int, float] = {}
        for r in got.get(flow, []):  # in the order TCP got them
            i = bisect.bisect_left(starts, r.seq)
            while i < len(starts) and starts[i] < r.seq + r.length:
                up.setdefault(starts[i], r.t)
                i += 1
        out += [(up[seq] - t) * 1e6 for seq, t in arrived.items() if seq in up]
    return out


def summary(values: Sequence[float]) -> dict[str, float | int | None]:
    """count, mean, median, 99th percentile and maximum."""
    if not values:
        return {"count": 0, "mean": None, "p50": None, "p99": None, "max": None}
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {"count": len(ordered), "mean": round(statistics.fmean(ordered), 1),
            "p50": round(statistics.median(ordered), 1), "p99": round(p99, 1),
            "max": round(ordered[-1], 1)}


def merges(received: Sequence[Segment], mss: int) -> dict[str, int]:
    """Received packets, and those longer than one segment (GRO merged them)."""
    merged = [s for s in received if s.length > mss + 1]
    return {"packets": len(received), "merged": len(merged),
            "largest": max((s.length for s in received), default=0)}


def mapping_overruns(received: Sequence[Segment]) -> dict[str, int]:
    """Received packets that carry a DSS mapping, and those whose payload runs past it:
    their subflow bytes do not lie within the mapping's [subflow seq, subflow seq + data
    length), which counts from the subflow's ISN (RFC 8684 3.3.1) where `seq` counts from
    the first data byte, ISN + 1."""
    mapped = overruns = 0
    for s in received:
        if s.mapping is None or s.isn is None:
            continue
        _, ssn, dlen = s.mapping
        payload = s.length - s.fin
        if not dlen or not payload:  # a DATA_FIN alone: no data to map
            continue
        mapped += 1
        start = (s.seq + 1 - ssn) % 2**32
        if start + payload > dlen:
            overruns += 1
    return {"mapped": mapped, "overruns": overruns}
