"""A fast reader of headers-only pcap captures into a table of TCP/IP header fields.

`read_pcap(path)` walks the pcap record headers once (the only sequential step), then
gathers every field at fixed offsets with numpy fancy indexing: Ethernet (optionally
one 802.1Q tag), IPv4 and TCP. TCP options are walked, vectorised across packets,
only for packets that have options, and only MPTCP's MP_CAPABLE and MP_JOIN are kept
(keys and tokens group subflows into connections).

Every frame of the file becomes one row, TCP or not, so per-link byte sums can be
compared with interface counters: `proto` is 0 for frames that are not IPv4 and the
TCP columns are 0 for frames that are not TCP (or whose TCP header was cut by the
snap length: `tcp_ok` says which rows have a whole TCP header).

A file cut short (a killed tcpdump, a full disk) gives a `TruncatedCaptureWarning`
naming the byte where the cut is, and the packets before it.

`read_records(path)` gives the file's bytes and where each record is, row for row with
`read_pcap`'s table, for a walk of what the table does not keep (scripts/ read MPTCP's
DSS option that way).
"""

from __future__ import annotations

import hashlib
import struct
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

import pathdiv.analysis.readers as readers

LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101  # raw IPv4/IPv6, no link header
LINKTYPE_IPV4 = 228

_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1e-6),
    b"\xa1\xb2\xc3\xd4": (">", 1e-6),
    b"\x4d\x3c\xb2\xa1": ("<", 1e-9),
    b"\xa1\xb2\x3c\x4d": (">", 1e-9),
}
_PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
GLOBAL_HEADER = 24
RECORD_HEADER = 16

TCP_FIN, TCP_SYN, TCP_RST, TCP_PSH, TCP_ACK = 0x01, 0x02, 0x04, 0x08, 0x10
TCPOPT_MPTCP = 30
MP_CAPABLE, MP_JOIN = 0, 1

# Columns of the table read_pcap returns, with their dtypes (documented in docs/measurement.md).
COLUMNS: dict[str, str] = {
    "ts": "float64",  # capture time, epoch seconds
    "wire_len": "int32",  # frame length on the wire (pcap orig_len), bytes
    "proto": "uint8",  # IPv4 protocol (6 = TCP); 0 = not IPv4
    "src": "uint32",  # IPv4 source address as an integer
    "dst": "uint32",
    "ip_id": "uint16",
    "ip_len": "uint16",  # IPv4 total length
    "ecn": "uint8",  # IPv4 ECN field: 0 not ECT, 1 ECT(1), 2 ECT(0), 3 CE
    "tcp_ok": "bool",  # a whole TCP header was captured
    "sport": "uint16",
    "dport": "uint16",
    "seq": "uint32",
    "ack": "uint32",
    "flags": "uint8",  # TCP flags byte (FIN 1, SYN 2, RST 4, PSH 8, ACK 16)
    "tcp_hlen": "uint8",  # TCP header length with options, bytes
    "payload": "int32",  # TCP payload bytes carried (from the IP length, not the snap)
    "mp_subtype": "int8",  # -1 none, 0 MP_CAPABLE, 1 MP_JOIN (first MPTCP option only)
    "mp_key_a": "uint64",  # MP_CAPABLE: sender's key (0 if absent)
    "mp_key_b": "uint64",  # MP_CAPABLE: receiver's key (third ACK; 0 if absent)
    "mp_token": "uint32",  # MP_JOIN SYN: receiver's token (0 if absent)
}


class CaptureFormatError(ValueError):
    """A file that is not a pcap capture this reader understands."""


class TruncatedCaptureWarning(UserWarning):
    """The capture ends inside a record; the packets before the cut were kept."""


class Records(NamedTuple):
    """A pcap file's bytes with where each of its records is (`read_records`)."""

    data: bytes
    offsets: np.ndarray  # each whole record's header, in file order (int64)
    link_header: int  # bytes before the IP header in a frame: 14 Ethernet, 0 raw IP


def empty_table() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in COLUMNS.items()})


def _record_offsets(buf: bytes, endian: str, path: Path) -> tuple[np.ndarray, int]:
    """Offsets of every whole record header; and the byte where a cut record starts (-1)."""
    size = len(buf)
    unpack = struct.Struct(endian + "I").unpack_from
    offsets: list[int] = []
    append = offsets.append
    off = GLOBAL_HEADER
    last = size - RECORD_HEADER
    while off <= last:
        incl = unpack(buf, off + 8)[0]
        end = off + RECORD_HEADER + incl
        if end > size:
            break
        append(off)
        off = end
    cut = off if off != size else -1
    return np.asarray(offsets, dtype=np.int64), cut


def _be(data: np.ndarray, idx: np.ndarray, width: int) -> np.ndarray:
    """Big-endian unsigned integers of `width` bytes at byte positions `idx`."""
    last = len(data) - 1
    out = data[np.minimum(idx, last)].astype(np.uint64 if width > 4 else np.uint32)
    for i in range(1, width):
        out = (out << (8 if width <= 4 else np.uint64(8))) | data[np.minimum(idx + i, last)]
    return out


def _capture_bytes(path: Path) -> bytes:
    try:  # a guest wrote it: no link followed, a regular file, bounded
        return readers.read_bytes(path, readers.MAX_CAPTURE_BYTES)
    except readers.FolderError as exc:
        raise CaptureFormatError(str(exc)) from None


def read_records(path: str | Path) -> Records:
    """The bytes of one pcap file, read as `read_pcap` reads them, with the offset of each
    whole record: row i of `read_pcap(path)` is the frame at `offsets[i] + RECORD_HEADER`
    (its captured length at `offsets[i] + 8`), for walking what the table does not keep
    (every TCP option, say). A file empty or cut inside its header has no records;
    CaptureFormatError as for `read_pcap`."""
    path = Path(path)
    buf = _capture_bytes(path)
    if len(buf) < GLOBAL_HEADER:
        return Records(buf, np.zeros(0, dtype=np.int64), 0)
    endian, _, l2 = _format(buf, path)
    return Records(buf, _record_offsets(buf, endian, path)[0], l2)


def frames(path: str | Path) -> Iterator[tuple[float, bytes]]:
    """(time in seconds, frame bytes from its link header) of every whole record of one
    pcap file, in file order, as `read_records` finds them; for a reader that walks each
    frame's bytes itself. CaptureFormatError as for `read_pcap`."""
    path = Path(path)
    buf = _capture_bytes(path)
    if len(buf) < GLOBAL_HEADER:
        return
    endian, tick, _ = _format(buf, path)
    head = struct.Struct(endian + "III")
    for off in _record_offsets(buf, endian, path)[0].tolist():
        sec, frac, incl = head.unpack_from(buf, off)
        start = off + RECORD_HEADER
        yield sec + frac * tick, bytes(buf[start:start + incl])


def read_pcap(path: str | Path) -> pd.DataFrame:
    """All frames of one pcap file as a DataFrame with the columns of `COLUMNS`.

    Raises CaptureFormatError for pcapng or unknown files and link types; warns with
    TruncatedCaptureWarning and returns the packets before the cut when the file
    ends inside a record.
    """
    path = Path(path)
    buf = _capture_bytes(path)
    if not buf:
        warnings.warn(
            f"{path}: empty capture file (tcpdump killed before writing its header?); "
            "treated as no packets",
            TruncatedCaptureWarning,
            stacklevel=2,
        )
        return empty_table()
    return _read_buffer(buf, path)


def _format(buf: bytes, path: Path) -> tuple[str, float, int]:
    """(byte order, seconds per timestamp tick, link header bytes) of a pcap file's
    header; CaptureFormatError for pcapng, an unknown magic or link type."""
    magic = bytes(buf[:4])
    if magic == _PCAPNG_MAGIC:
        raise CaptureFormatError(
            f"{path} is pcapng; expected classic pcap: capture with `tcpdump -w` "
            "or convert with `editcap -F pcap`"
        )
    if magic not in _MAGICS:
        raise CaptureFormatError(
            f"{path}: unknown magic {magic.hex()}; expected a pcap file (a1b2c3d4 or a1b23c4d)"
        )
    endian, tick = _MAGICS[magic]
    linktype = struct.unpack_from(endian + "I", buf, 20)[0] & 0x0FFFFFFF
    if linktype == LINKTYPE_ETHERNET:
        l2 = 14
    elif linktype in (LINKTYPE_RAW, LINKTYPE_IPV4):
        l2 = 0
    else:
        raise CaptureFormatError(
            f"{path}: link type {linktype} not supported; expected Ethernet (1) or raw IP "
            "(101): capture on the link's interface, not on 'any'"
        )
    return endian, tick, l2


def _read_buffer(buf: bytes, path: Path) -> pd.DataFrame:
    if len(buf) < GLOBAL_HEADER:
        warnings.warn(
            f"{path}: capture cut inside its 24-byte file header ({len(buf)} bytes); "
            "treated as no packets",
            TruncatedCaptureWarning,
            stacklevel=3,
        )
        return empty_table()
    endian, tick, l2 = _format(buf, path)
    offsets, cut = _record_offsets(buf, endian, path)
    if cut >= 0:
        warnings.warn(
            f"{path}: capture cut at byte {cut} of {len(buf)} (inside record "
            f"{len(offsets) + 1}); kept the {len(offsets)} packets before the cut",
            TruncatedCaptureWarning,
            stacklevel=3,
        )
    n = len(offsets)
    if n == 0:
        return empty_table()
    data = np.frombuffer(buf, dtype=np.uint8)
    # Record headers: four u32 words (ts_sec, ts_frac, incl_len, orig_len) per record.

    def word(k: int) -> np.ndarray:
        b = offsets + 4 * k
        if endian == ">":
            return _be(data, b, 4)
        return (
            data[b].astype(np.uint32)
            | (data[b + 1].astype(np.uint32) << 8)
            | (data[b + 2].astype(np.uint32) << 16)
            | (data[b + 3].astype(np.uint32) << 24)
        )

    ts = word(0).astype(np.float64) + word(1).astype(np.float64) * tick
    incl = word(2).astype(np.int64)
    wire = word(3).astype(np.int32)
    frame = offsets + RECORD_HEADER
    end = frame + incl  # first byte after the captured bytes of each frame
    limit = len(data) - 1

    def at(pos: np.ndarray) -> np.ndarray:
        """Byte positions clipped into the file (values outside a frame are masked later)."""
        return np.minimum(pos, limit)

    if l2:
        ethertype = _be(data, at(frame + 12), 2)
        vlan = ethertype == 0x8100
        l3 = frame + l2 + 4 * vlan
        ethertype = np.where(vlan, _be(data, at(frame + 16), 2), ethertype)
        is_ip = (ethertype == 0x0800) & (l3 + 20 <= end)
    else:
        l3 = frame
        is_ip = l3 + 20 <= end
    vihl = data[at(l3)]
    is_ip &= (vihl >> 4) == 4
    ihl = (vihl & 0x0F).astype(np.int64) * 4
    proto = np.where(is_ip, data[at(l3 + 9)], 0).astype(np.uint8)
    src = np.where(is_ip, _be(data, at(l3 + 12), 4), 0).astype(np.uint32)
    dst = np.where(is_ip, _be(data, at(l3 + 16), 4), 0).astype(np.uint32)
    ip_len = np.where(is_ip, _be(data, at(l3 + 2), 2), 0).astype(np.uint16)
    ip_id = np.where(is_ip, _be(data, at(l3 + 4), 2), 0).astype(np.uint16)
    ecn = np.where(is_ip, data[at(l3 + 1)] & 0x03, 0).astype(np.uint8)
    frag = _be(data, at(l3 + 6), 2) & 0x1FFF  # later fragments carry no TCP header
    l4 = l3 + ihl
    tcp = is_ip & (proto == 6) & (frag == 0) & (l4 + 20 <= end)
    tcp_hlen = np.where(tcp, (data[at(l4 + 12)] >> 4).astype(np.int64) * 4, 0)
    tcp &= tcp_hlen >= 20

    def tcp_field(off: int, width: int, dtype: str) -> np.ndarray:
        return np.where(tcp, _be(data, at(l4 + off), width), 0).astype(dtype)

    sport = tcp_field(0, 2, "uint16")
    dport = tcp_field(2, 2, "uint16")
    seq = tcp_field(4, 4, "uint32")
    ack = tcp_field(8, 4, "uint32")
    flags = np.where(tcp, data[at(l4 + 13)], 0).astype(np.uint8)
    payload = np.where(tcp, ip_len.astype(np.int64) - ihl - tcp_hlen, 0)
    payload = np.maximum(payload, 0).astype(np.int32)

    mp = _mptcp_options(data, tcp & (tcp_hlen > 20), l4, tcp_hlen, end, n)
    return pd.DataFrame(
        {
            "ts": ts,
            "wire_len": wire,
            "proto": proto,
            "src": src,
            "dst": dst,
            "ip_id": ip_id,
            "ip_len": ip_len,
            "ecn": ecn,
            "tcp_ok": tcp,
            "sport": sport,
            "dport": dport,
            "seq": seq,
            "ack": ack,
            "flags": flags,
            "tcp_hlen": tcp_hlen.astype(np.uint8),
            "payload": payload,
            **mp,
        },
        copy=False,
    )


def _mptcp_options(
    data: np.ndarray,
    has_opts: np.ndarray,
    l4: np.ndarray,
    tcp_hlen: np.ndarray,
    end: np.ndarray,
    n: int,
) -> dict[str, np.ndarray]:
    """Walk TCP options of the packets in `has_opts` in lock step; keep the first MPTCP
    MP_CAPABLE or MP_JOIN option of each packet."""
    subtype = np.full(n, -1, dtype=np.int8)
    key_a = np.zeros(n, dtype=np.uint64)
    key_b = np.zeros(n, dtype=np.uint64)
    token = np.zeros(n, dtype=np.uint32)
    rows = np.flatnonzero(has_opts)
    pos = l4[rows] + 20
    stop = np.minimum(l4[rows] + tcp_hlen[rows], end[rows])
    limit = len(data) - 1
    for _ in range(40):  # an option takes at least one byte; 40 bytes of options at most
        live = pos < stop
        if not live.any():
            break
        rows, pos, stop = rows[live], pos[live], stop[live]
        kind = data[np.minimum(pos, limit)]
        # EOL ends the list; NOP is one byte; others carry a length byte (>= 2).
        ended = kind == 0
        length = np.where(kind == 1, 1, data[np.minimum(pos + 1, limit)].astype(np.int64))
        bad = (kind > 1) & ((length < 2) | (pos + length > stop))
        mptcp = (kind == TCPOPT_MPTCP) & ~bad & (length >= 4)
        if mptcp.any():
            r, p, ln = rows[mptcp], pos[mptcp], length[mptcp]
            st = (data[p + 2] >> 4).astype(np.int8)
            first = subtype[r] < 0
            cap = first & (st == MP_CAPABLE)
            join = first & (st == MP_JOIN) & (ln >= 12)
            subtype[r[cap]] = MP_CAPABLE
            with_a = cap & (ln >= 12)
            key_a[r[with_a]] = _be(data, p[with_a] + 4, 8)
            with_b = cap & (ln >= 20)
            key_b[r[with_b]] = _be(data, p[with_b] + 12, 8)
            subtype[r[join]] = MP_JOIN
            token[r[join]] = _be(data, p[join] + 4, 4)
        pos = np.where(ended | bad, stop, pos + length)
    return {"mp_subtype": subtype, "mp_key_a": key_a, "mp_key_b": key_b, "mp_token": token}


def mptcp_token(key: int, version: int = 1) -> int:
    """The connection token of an MPTCP key: the most significant 32 bits of the hash
    of the 64-bit key in network byte order; SHA-256 for MPTCP v1 (RFC 8684, section
    3.2, what Linux speaks), SHA-1 for v0 (RFC 6824)."""

    digest = hashlib.sha256 if version >= 1 else hashlib.sha1
    return int.from_bytes(digest(int(key).to_bytes(8, "big")).digest()[:4], "big")


def ip_to_int(addr: str) -> int:
    a, b, c, d = (int(x) for x in addr.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


def int_to_ip(value: int) -> str:
    v = int(value)
    return f"{v >> 24 & 255}.{v >> 16 & 255}.{v >> 8 & 255}.{v & 255}"
