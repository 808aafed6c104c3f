"""Reading a headers-only capture: pathdiv's reader vs scapy, dpkt and tshark, side by side.

Writes (or reuses) a synthetic capture of --packets frames shaped like a run's link
capture (MPTCP handshakes; data segments and ACKs with timestamp and DSS options; snap
length 160), then times the same extraction with each tool: time, frame length, IPv4
addresses, IP ID and length, TCP ports, raw sequence and ack numbers, flags, header
length, payload length, MPTCP subtype, keys and join token. Prints seconds, packets
per second and the ratios the issue asks for (>= 20x scapy, >= 1x tshark).

    .venv/bin/python benchmarks/pcap_speed.py [--packets 1000000] [--scapy-packets N]

scapy is timed on the first --scapy-packets frames (default: all) and its rate scaled.
"""

from __future__ import annotations

import argparse
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pathdiv.analysis.capture.pcap import read_pcap
from tests.support.pcap_synth import mp_capable, mp_join_syn

TSHARK_FIELDS = [
    "frame.time_epoch", "frame.len", "ip.src", "ip.dst", "ip.id", "ip.len", "tcp.srcport",
    "tcp.dstport", "tcp.seq_raw", "tcp.ack_raw", "tcp.flags", "tcp.hdr_len", "tcp.len",
    "tcp.options.mptcp.subtype", "tcp.options.mptcp.sendkey", "tcp.options.mptcp.recvkey",
    "tcp.options.mptcp.recvtok",
]


def templates() -> list[bytes]:
    """One MPTCP connection of 4 subflows: handshakes, then data and ACKs (2:1)."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    from pathdiv.analysis.capture.pcap import mptcp_token

    ts = [("NOP", None), ("NOP", None), ("Timestamp", (1, 2))]
    dss_data = (30, bytes([0x20, 0x05]) + bytes(4) + bytes(4) + bytes(4) + bytes([5, 0xA8]))
    dss_ack = (30, bytes([0x20, 0x01]) + bytes(4))
    out = []
    for i in range(4):
        c, s = f"10.0.0.{2 + 32 * i}", "10.3.1.3"
        cp, sp = 40000 + i, 80
        syn_o = [mp_capable()] if i == 0 else [mp_join_syn(mptcp_token(7), 1, i)]
        frames = [
            (c, s, cp, sp, "S", ts + syn_o, 0),
            (s, c, sp, cp, "SA", [*ts, mp_capable(7)], 0),
            (c, s, cp, sp, "A", [*ts, mp_capable(9, 7)], 0),
        ]
        for _ in range(40):
            frames += [(s, c, sp, cp, "A", [*ts, dss_data], 1428)] * 2
            frames += [(c, s, cp, sp, "A", [*ts, dss_ack], 0)]
        for k, (src, dst, spt, dpt, flags, opts, size) in enumerate(frames):
            pkt = Ether() / IP(src=src, dst=dst, id=k) / TCP(
                sport=spt, dport=dpt, flags=flags, seq=1000 * k, ack=7 * k, options=opts
            )
            out.append(bytes(pkt / Raw(b"\x00" * size)) if size else bytes(pkt))
    return out


def make_capture(path: Path, packets: int, snaplen: int = 160) -> None:
    tpl = templates()
    header = struct.pack("<IHHIIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1)
    parts = [header]
    pack = struct.Struct("<IIII").pack
    t0 = 1_700_000_000
    for n in range(packets):
        raw = tpl[n % len(tpl)]
        usec = n * 7
        parts.append(pack(t0 + usec // 1_000_000, usec % 1_000_000, min(len(raw), snaplen),
                          len(raw)))
        parts.append(raw[:snaplen])
    path.write_bytes(b"".join(parts))


def time_pathdiv(path: Path) -> tuple[float, int]:
    best, n = float("inf"), 0
    for _ in range(3):
        t = time.perf_counter()
        n = len(read_pcap(path))
        best = min(best, time.perf_counter() - t)
    return best, n


def time_scapy(path: Path, limit: int | None) -> tuple[float, int]:
    from scapy.layers.inet import IP, TCP
    from scapy.utils import PcapReader

    rows = []
    t = time.perf_counter()
    with PcapReader(str(path)) as reader:
        for i, pkt in enumerate(reader):
            if limit is not None and i >= limit:
                break
            row = [float(pkt.time), pkt.wirelen]
            if IP in pkt:
                ip = pkt[IP]
                row += [ip.src, ip.dst, ip.id, ip.len]
                if TCP in ip:
                    tcp = ip[TCP]
                    mp = [o for o in tcp.options if o[0] in (30, "MPTCP")]
                    row += [tcp.sport, tcp.dport, tcp.seq, tcp.ack, int(tcp.flags),
                            tcp.dataofs, len(tcp.payload), mp[:1]]
            rows.append(row)
    return time.perf_counter() - t, len(rows)


def time_dpkt(path: Path) -> tuple[float, int]:
    import dpkt

    rows = []
    t = time.perf_counter()
    with open(path, "rb") as fh:
        for ts, buf in dpkt.pcap.Reader(fh):
            eth = dpkt.ethernet.Ethernet(buf)
            ip = eth.data
            if isinstance(ip, dpkt.ip.IP) and isinstance(ip.data, dpkt.tcp.TCP):
                tcp = ip.data
                mp = [o for o in dpkt.tcp.parse_opts(tcp.opts) if o[0] == 30][:1]
                rows.append((ts, ip.src, ip.dst, ip.id, ip.len, tcp.sport, tcp.dport, tcp.seq,
                             tcp.ack, tcp.flags, tcp.off, ip.len - ip.hl * 4 - tcp.off * 4, mp))
            else:
                rows.append((ts,))
    return time.perf_counter() - t, len(rows)


def time_tshark(path: Path) -> tuple[float, int]:
    cmd = ["tshark", "-n", "-r", str(path), "-T", "fields",
           "-o", "tcp.analyze_sequence_numbers:FALSE", "-o", "tcp.relative_sequence_numbers:FALSE",
           "-o", "mptcp.analyze_mptcp:FALSE"]
    for f in TSHARK_FIELDS:
        cmd += ["-e", f]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, check=True)
    return time.perf_counter() - t, proc.stdout.count(b"\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--scapy-packets", type=int, default=None,
                    help="time scapy on this many packets only and scale (default: all)")
    ap.add_argument("--capture", type=Path, default=None, help="reuse/keep this capture file")
    ap.add_argument("--skip", nargs="*", default=[], choices=["scapy", "dpkt", "tshark"])
    args = ap.parse_args()

    tmp = None
    path = args.capture
    if path is None:
        tmp = tempfile.TemporaryDirectory()
        path = Path(tmp.name) / "bench.pcap"
    if not path.exists():
        t = time.perf_counter()
        make_capture(path, args.packets)
        print(f"wrote {path} ({args.packets} packets, {path.stat().st_size / 1e6:.1f} MB) "
              f"in {time.perf_counter() - t:.1f} s")
    results: dict[str, float] = {}
    secs, n = time_pathdiv(path)
    results["pathdiv"] = n / secs
    print(f"pathdiv read_pcap  {secs:8.2f} s  {n / secs:12,.0f} pkt/s  (best of 3)")
    if "dpkt" not in args.skip:
        secs, m = time_dpkt(path)
        results["dpkt"] = m / secs
        print(f"dpkt loop          {secs:8.2f} s  {m / secs:12,.0f} pkt/s")
    if "tshark" not in args.skip and shutil.which("tshark"):
        secs, m = time_tshark(path)
        results["tshark"] = m / secs
        print(f"tshark -T fields   {secs:8.2f} s  {m / secs:12,.0f} pkt/s")
    if "scapy" not in args.skip:
        secs, m = time_scapy(path, args.scapy_packets)
        results["scapy"] = m / secs
        print(f"scapy PcapReader   {secs:8.2f} s  {m / secs:12,.0f} pkt/s  ({m} packets)")
    for other in ("scapy", "dpkt", "tshark"):
        if other in results:
            print(f"pathdiv / {other:7s} {results['pathdiv'] / results[other]:8.1f}x")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
