"""TCP sockets' congestion-control state from the kernel's socket diagnostics, in-process.

`ss -ti` says the same, but a process per sample is what a trace at 10 ms of guest time
cannot afford in the lab kernel (a fork costs wall time on User-Mode Linux). `query()`
asks the kernel once over a NETLINK_SOCK_DIAG socket for every TCP socket of the calling
process's network namespace in the states asked for, with its `tcp_info`, its congestion
control's name and, for BBR and Coupled BBR, BBR's own figures (`tcp_bbr_info`: the
bandwidth estimate, min RTT, pacing and cwnd gains); `parse()` turns the reply into
`Sample`s (pure, unit-tested on crafted bytes).

`python -m pathdiv.experiments.traffic.sockdiag trace --port P --interval-ms 10 --out F`,
started in a namespace, appends one JSON line per socket and sample (sockets whose local
or remote port is P) until SIGTERM or SIGINT: what `paths_run` keeps as a run's
`cc_trace` of every sender.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_DONE, NLMSG_ERROR = 3, 2
# inet_diag attributes (include/uapi/linux/inet_diag.h)
INET_DIAG_INFO, INET_DIAG_VEGASINFO, INET_DIAG_CONG, INET_DIAG_BBRINFO = 2, 3, 4, 16
TCP_ESTABLISHED = 1
ALL_STATES = 0xFFF
# the tcp_info fields a trace keeps: name -> (offset, struct format), Linux 6.12's layout
TCP_INFO_FIELDS: dict[str, tuple[int, str]] = {
    "ca_state": (1, "B"),
    "unacked": (24, "I"),
    "lost": (32, "I"),
    "retrans": (36, "I"),
    "rtt_us": (68, "I"),
    "snd_cwnd": (80, "I"),
    "total_retrans": (100, "I"),
    "pacing_rate": (104, "Q"),   # bytes/s
    "bytes_acked": (120, "Q"),
    "notsent_bytes": (144, "I"),
    "min_rtt_us": (148, "I"),
    "delivery_rate": (160, "Q"),  # bytes/s
    "delivered": (192, "I"),
}
APP_LIMITED_BYTE = 7  # tcpi_delivery_rate_app_limited is bit 0 of byte 7
# BBR's pacing and cwnd gains are in 1/256 (BBR_UNIT)
BBR_UNIT = 256


@dataclass(frozen=True)
class Sample:
    """One socket at one instant. Rates in Mbit/s, times in microseconds; the BBR fields
    are None for a congestion control without BBR's diagnostics."""

    local: str
    lport: int
    remote: str
    rport: int
    state: int
    cc: str
    ca_state: int
    unacked: int
    lost: int
    retrans: int
    rtt_us: int
    snd_cwnd: int
    total_retrans: int
    pacing_mbps: float
    bytes_acked: int
    notsent_bytes: int
    min_rtt_us: int
    delivery_mbps: float
    app_limited: bool
    delivered: int
    bbr_bw_mbps: float | None = None
    bbr_min_rtt_us: int | None = None
    bbr_pacing_gain: float | None = None
    bbr_cwnd_gain: float | None = None


def request(states: int = 1 << TCP_ESTABLISHED, seq: int = 1) -> bytes:
    """The dump request for every IPv4 TCP socket in `states` (a bit per TCP state), with
    tcp_info, the congestion control's name and its own diagnostics."""
    ext = (1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_VEGASINFO - 1)) | \
        (1 << (INET_DIAG_CONG - 1))
    # struct inet_diag_req_v2: family, protocol, ext, pad, states, inet_diag_sockid (48)
    body = struct.pack("=BBBxI", socket.AF_INET, socket.IPPROTO_TCP, ext, states) + \
        bytes(48)
    header = struct.pack("=IHHII", 16 + len(body), SOCK_DIAG_BY_FAMILY,
                         NLM_F_REQUEST | NLM_F_DUMP, seq, 0)
    return header + body


def _attrs(data: bytes) -> Iterator[tuple[int, bytes]]:
    off = 0
    while off + 4 <= len(data):
        length, kind = struct.unpack_from("=HH", data, off)
        if length < 4:
            return
        yield kind & 0x3FFF, data[off + 4: off + length]
        off += (length + 3) & ~3


def _sample(msg: bytes) -> Sample | None:
    # struct inet_diag_msg: family, state, timer, retrans, sockid (sport, dport big
    # endian, src[16], dst[16], if, cookie[2]), expires, rqueue, wqueue, uid, inode
    if len(msg) < 72:
        return None
    family, state = msg[0], msg[1]
    if family != socket.AF_INET:
        return None
    sport, dport = struct.unpack_from("!HH", msg, 4)
    src = socket.inet_ntoa(msg[8:12])
    dst = socket.inet_ntoa(msg[24:28])
    attrs = dict(_attrs(msg[72:]))
    info = attrs.get(INET_DIAG_INFO, b"")
    if len(info) < 196:
        return None
    f = {name: struct.unpack_from("=" + fmt, info, off)[0]
         for name, (off, fmt) in TCP_INFO_FIELDS.items()}
    cc = attrs.get(INET_DIAG_CONG, b"").split(b"\0")[0].decode(errors="replace")
    bbr = attrs.get(INET_DIAG_BBRINFO)
    extra: dict[str, object] = {}
    if bbr is not None and len(bbr) >= 20:
        lo, hi, min_rtt, pacing_gain, cwnd_gain = struct.unpack_from("=5I", bbr)
        extra = {"bbr_bw_mbps": round(((hi << 32) | lo) * 8 / 1e6, 4),
                 "bbr_min_rtt_us": min_rtt,
                 "bbr_pacing_gain": round(pacing_gain / BBR_UNIT, 4),
                 "bbr_cwnd_gain": round(cwnd_gain / BBR_UNIT, 4)}
    return Sample(
        local=src, lport=sport, remote=dst, rport=dport, state=state, cc=cc,
        ca_state=f["ca_state"], unacked=f["unacked"], lost=f["lost"], retrans=f["retrans"],
        rtt_us=f["rtt_us"], snd_cwnd=f["snd_cwnd"], total_retrans=f["total_retrans"],
        pacing_mbps=round(f["pacing_rate"] * 8 / 1e6, 4), bytes_acked=f["bytes_acked"],
        notsent_bytes=f["notsent_bytes"], min_rtt_us=f["min_rtt_us"],
        delivery_mbps=round(f["delivery_rate"] * 8 / 1e6, 4),
        app_limited=bool(info[APP_LIMITED_BYTE] & 1), delivered=f["delivered"],
        **extra)  # type: ignore[arg-type]


def parse(replies: Iterable[bytes]) -> tuple[list[Sample], bool]:
    """Netlink reply datagrams -> (the sockets, whether the dump ended). An error message
    raises OSError with the kernel's errno."""
    out: list[Sample] = []
    for data in replies:
        off = 0
        while off + 16 <= len(data):
            length, kind = struct.unpack_from("=IH", data, off)
            if length < 16:
                break
            payload = data[off + 16: off + length]
            if kind == NLMSG_DONE:
                return out, True
            if kind == NLMSG_ERROR:
                err = -struct.unpack_from("=i", payload)[0]
                if err:
                    raise OSError(err, f"sock_diag: {err}")
            elif kind == SOCK_DIAG_BY_FAMILY:
                s = _sample(payload)
                if s is not None:
                    out.append(s)
            off += (length + 3) & ~3
    return out, False


def query(sock: socket.socket, states: int = 1 << TCP_ESTABLISHED) -> list[Sample]:
    """Every IPv4 TCP socket of this namespace in `states`, through an open
    NETLINK_SOCK_DIAG socket."""
    sock.send(request(states))
    out: list[Sample] = []
    while True:
        data = sock.recv(1 << 16)
        samples, done = parse([data])
        out += samples
        if done or not data:
            return out


def open_diag() -> socket.socket:
    return socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)


def trace(ports: Sequence[int], interval_s: float, out: str,
          stop: threading.Event | None = None) -> int:
    """Sample this namespace's sockets with a local or remote port in `ports` every
    `interval_s` (sleeping between samples: the virtual clock moves) into `out`, one JSON
    object per socket and sample with `t` (monotonic seconds), until `stop` is set or
    SIGTERM/SIGINT. Returns the number of lines written."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    wanted = set(ports)
    lines = 0
    with open_diag() as sock, open(out, "a", encoding="utf-8") as fh:
        while not stop.is_set():
            t = time.monotonic()
            for s in query(sock):
                if s.lport in wanted or s.rport in wanted:
                    fh.write(json.dumps({"t": round(t, 6), **asdict(s)}) + "\n")
                    lines += 1
            fh.flush()
            stop.wait(interval_s)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sockdiag", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trace", help="sample sockets until SIGTERM; JSON lines into --out")
    t.add_argument("--port", type=int, action="append", required=True)
    t.add_argument("--interval-ms", type=float, default=10.0)
    t.add_argument("--out", required=True)
    d = sub.add_parser("dump", help="one sample of every established socket, JSON lines")
    d.add_argument("--port", type=int, action="append", default=[])
    args = parser.parse_args(argv)
    if args.cmd == "trace":
        trace(args.port, args.interval_ms / 1000, args.out)
        return 0
    with open_diag() as sock:
        for s in query(sock):
            if not args.port or s.lport in args.port or s.rport in args.port:
                print(json.dumps(asdict(s)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
