"""MPTCP's connection-level sequence fields of a headers-only capture, per frame: what
`read_pcap` does not keep (it keeps MP_CAPABLE and MP_JOIN only).

`dss_fields(path)` gives, row for row with `read_pcap(path)`'s table, the TCP window,
the window scale of SYNs, and from the DSS option (RFC 8684, section 3.3) the data
sequence number of a mapping, its data-level length and the DATA_ACK, each in its low
32 bits. MPTCP's receive window applies to the data sequence: the right edge a receiver
grants is its DATA_ACK plus the window of the segment, scaled by the window scale of its
SYN on that subflow (section 3.3.5).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pandas as pd

from pathdiv.analysis.capture.pcap import RECORD_HEADER, read_records

MASK = 0xFFFFFFFF
TCPOPT_WSCALE, TCPOPT_MPTCP, MPTCP_DSS = 3, 30, 2
DSS_DATA_ACK, DSS_ACK_8, DSS_MAPPING, DSS_DSN_8 = 0x01, 0x02, 0x04, 0x08


def dss_fields(path: Path) -> pd.DataFrame:
    """Per frame of a pcap, in file order: `win` (TCP window, unscaled), `wscale` (the
    window scale option of a SYN; -1 none), `dsn` (data sequence of a mapping; -1 none),
    `dlen` (its data-level length) and `dack` (DATA_ACK; -1 none)."""
    buf, offsets, link_header = read_records(path)
    n = len(offsets)
    win, wscale = np.zeros(n, np.int64), np.full(n, -1, np.int64)
    dsn, dlen, dack = np.full(n, -1, np.int64), np.zeros(n, np.int64), np.full(n, -1, np.int64)
    for i, off in enumerate(offsets):
        frame = int(off) + RECORD_HEADER
        if link_header and buf[frame + 12:frame + 14] != b"\x08\x00":
            continue
        ip = frame + link_header
        if ip + 20 > len(buf) or buf[ip] >> 4 != 4 or buf[ip + 9] != 6:
            continue
        tcp = ip + (buf[ip] & 15) * 4
        if tcp + 20 > len(buf):
            continue
        win[i] = struct.unpack_from(">H", buf, tcp + 14)[0]
        end = min(tcp + (buf[tcp + 12] >> 4) * 4, len(buf))
        j = tcp + 20
        while j + 1 < end:
            kind = buf[j]
            if kind == 0:
                break
            if kind == 1:
                j += 1
                continue
            length = buf[j + 1]
            if kind == TCPOPT_WSCALE and j + 2 < end:
                wscale[i] = buf[j + 2]
            elif (kind == TCPOPT_MPTCP and length >= 4 and j + length <= end
                  and buf[j + 2] >> 4 == MPTCP_DSS):
                flags, p = buf[j + 3], j + 4
                if flags & DSS_DATA_ACK:
                    wide = bool(flags & DSS_ACK_8)
                    dack[i] = struct.unpack_from(">Q" if wide else ">I", buf, p)[0] & MASK
                    p += 8 if wide else 4
                if flags & DSS_MAPPING and p + 4 <= end:
                    wide = bool(flags & DSS_DSN_8)
                    dsn[i] = struct.unpack_from(">Q" if wide else ">I", buf, p)[0] & MASK
                    p += (8 if wide else 4) + 4
                    if p + 2 <= end:
                        dlen[i] = struct.unpack_from(">H", buf, p)[0]
            j += max(length, 2)
    return pd.DataFrame({"win": win, "wscale": wscale, "dsn": dsn, "dlen": dlen,
                         "dack": dack})
