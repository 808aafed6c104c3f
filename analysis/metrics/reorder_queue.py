"""The receiver's MPTCP out-of-order queue, reconstructed from a capture at the receiver.

Seed 003's Fig. 11 reports the mean out-of-order queue of an MPTCP receiver. The kernel
exposes no length of that queue (only counts of events, MPTcpExtOFOQueue), so pathdiv
rebuilds it from the data segments captured on the receiver's interfaces: each segment's
data sequence number (DSN: its DSS mapping's DSN plus its offset in the mapping) and
length, in arrival order over all subflows. A segment that starts at or before the next
expected DSN is delivered, and with it every held segment it makes contiguous; one that
starts beyond it is held. The queue is the number of held segments (packets, as the paper
counts them); its mean is over time, each length weighted by how long it lasted.

This is what an ideal receiver holds: it sees a packet at the interface, before the
subflow's own reordering and before the socket's memory limits; a copy of data already
delivered (a redundant subflow's) changes nothing.

Pure: `segments_from_pcap` reads a classic pcap with the standard library only.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pathdiv.analysis.capture import pcap

MPTCP_OPTION, DSS_SUBTYPE = 30, 2


@dataclass(frozen=True)
class Segment:
    """One data segment as the receiver got it: arrival time (s), DSN, payload bytes,
    and the subflow (sender address, sender port, receiver address, receiver port)."""

    ts: float
    dsn: int
    length: int
    subflow: tuple[str, int, str, int]


def dss_mapping(opts: bytes) -> tuple[int, int, int] | None:
    """(DSN, subflow sequence number, data length) of the DSS mapping among raw TCP
    options, or None."""
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
        body = opts[i:i + length]
        if kind == MPTCP_OPTION and len(body) >= 4 and body[2] >> 4 == DSS_SUBTYPE:
            flags, off = body[3], 4
            if flags & 0x01:  # data ACK: 8 bytes if 'a', else 4
                off += 8 if flags & 0x02 else 4
            if not flags & 0x04:  # no mapping
                return None
            dsn_len = 8 if flags & 0x08 else 4
            if len(body) < off + dsn_len + 6:
                return None
            dsn = int.from_bytes(body[off:off + dsn_len], "big")
            ssn, dlen = struct.unpack("!IH", body[off + dsn_len:off + dsn_len + 6])
            return dsn, ssn, dlen
        i += length
    return None


def segments_from_pcap(path: Path, sender_port: int) -> list[Segment]:
    """The data segments sent from `sender_port` in a capture, with their DSNs (a segment
    without a mapping of its own takes the last one of its subflow that covers it)."""
    isn: dict[tuple, int] = {}
    last: dict[tuple, tuple[int, int, int]] = {}
    out = []
    for ts, frame in pcap.frames(path):
        if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
            continue
        ihl = (frame[14] & 0x0F) * 4
        ip_len = struct.unpack_from("!H", frame, 16)[0]
        tcp = frame[14 + ihl:]
        if len(tcp) < 20:
            continue
        sport, dport, seq = struct.unpack_from("!HHI", tcp, 0)
        if sport != sender_port:
            continue
        off, flags = (tcp[12] >> 4) * 4, tcp[13]
        src = ".".join(str(b) for b in frame[26:30])
        dst = ".".join(str(b) for b in frame[30:34])
        flow = (src, sport, dst, dport)
        if flags & 0x02:  # SYN(-ACK): the subflow's initial sequence number
            isn[flow] = seq
            continue
        payload = ip_len - ihl - off
        if payload <= 0 or flow not in isn:
            continue
        mapping = dss_mapping(tcp[20:off])
        if mapping is None:
            mapping = last.get(flow)
            if mapping is None or (seq - isn[flow] - mapping[1]) % 2**32 >= mapping[2]:
                continue
        last[flow] = mapping
        dsn, ssn, _ = mapping
        offset = (seq - isn[flow] - ssn) % 2**32
        out.append(Segment(ts, (dsn + offset) % 2**64, payload, flow))
    return out


def queue_series(segments: Iterable[Segment]) -> list[tuple[float, int]]:
    """(time, segments held out of order after that arrival), in arrival order."""
    ordered = sorted(segments, key=lambda s: s.ts)
    if not ordered:
        return []
    expected = min(s.dsn for s in ordered)
    held: dict[int, int] = {}  # DSN -> end of a held segment
    out = []
    for seg in ordered:
        end = seg.dsn + seg.length
        if seg.dsn <= expected:
            expected = max(expected, end)
            while True:  # the held segments this one made contiguous
                ready = [d for d in held if d <= expected]
                if not ready:
                    break
                for d in ready:
                    expected = max(expected, held.pop(d))
        elif end > expected and seg.dsn not in held:
            held[seg.dsn] = end
        out.append((seg.ts, len(held)))
    return out


def mean_queue(series: list[tuple[float, int]], start: float | None = None,
               end: float | None = None) -> float:
    """The queue's time-weighted mean between `start` and `end` (default: the series)."""
    if not series:
        return 0.0
    t0 = series[0][0] if start is None else start
    t1 = series[-1][0] if end is None else end
    if t1 <= t0:
        return float(series[-1][1])
    area, prev_t, prev_q = 0.0, t0, 0
    for t, q in series:
        if t > t0:
            area += prev_q * (min(t, t1) - prev_t)
            prev_t = min(t, t1)
        prev_q = q
        if t >= t1:
            break
    area += prev_q * (t1 - prev_t)
    return area / (t1 - t0)


def sampled(series: list[tuple[float, int]], step_s: float) -> list[tuple[float, int]]:
    """The queue every `step_s` seconds from the first arrival (time relative to it)."""
    if not series:
        return []
    t0, out, k, q = series[0][0], [], 0, 0
    t = 0.0
    while t0 + t <= series[-1][0]:
        while k < len(series) and series[k][0] <= t0 + t:
            q = series[k][1]
            k += 1
        out.append((round(t, 6), q))
        t += step_s
    return out
