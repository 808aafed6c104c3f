"""The processes of a parallel-paths run, one per role, each in its node's namespace:

    python -m pathdiv.experiments.traffic.paths_roles serve|fetch|bulk-serve|bulk-fetch

`serve` / `fetch` are the measured transfer (one request: 8 bytes giving the size; the
server waits, bounded, for the client's extra subflows to join before it answers; the
client records its goodput per SAMPLE_S bin), `bulk-serve` / `bulk-fetch` the paths'
background flows (endless downloads until the run ends them). Not the fat tree's
transfer tool (traffic/transfer.py): that one answers HTTP requests of many clients and
records each transfer's timestamps, while a paths run needs the goodput over time of one
transfer and flows without an end. Standard library only; every wait sleeps or blocks
(the lab kernel's virtual clock). Each prints one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Sequence

from pathdiv.topologies.paths import SERVICE_ADDRESS, ParallelPaths

PORT, BULK_PORT = 5301, 5302
SAMPLE_S = 0.5
SOL_MPTCP, MPTCP_INFO = 284, 1


def serve_once(subflows: int, tcp: bool) -> None:
    """Answer one request (8-byte size) with that many bytes, once the client's extra
    subflows joined (bounded wait)."""
    proto = socket.IPPROTO_TCP if tcp else socket.IPPROTO_MPTCP
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto) as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((SERVICE_ADDRESS, PORT))
        srv.listen(4)
        conn, _ = srv.accept()
        with conn:
            size = struct.unpack("!Q", conn.recv(8, socket.MSG_WAITALL))[0]
            joined = 0
            deadline = time.monotonic() + 5
            while not tcp and time.monotonic() < deadline:
                joined = conn.getsockopt(SOL_MPTCP, MPTCP_INFO, 64)[0]
                if joined >= subflows - 1:
                    break
                time.sleep(0.01)
            chunk = b"\x5a" * 65536
            with contextlib.suppress(OSError):
                while size:
                    size -= conn.send(chunk[:min(size, len(chunk))])
                conn.shutdown(socket.SHUT_WR)
                conn.recv(1)
    print(json.dumps({"subflows_at_start": joined + 1}))


def fetch(size: int, timeout_s: float, tcp: bool, duration_s: float = 0.0) -> None:
    """Fetch `size` bytes from the server; goodput per SAMPLE_S bin and overall. With
    `duration_s` > 0 stop reading after that long (a long-running flow): the fetch is
    complete when it read for the whole duration or got `size`."""
    proto = socket.IPPROTO_TCP if tcp else socket.IPPROTO_MPTCP
    bins: list[int] = []
    got = 0
    start = time.monotonic()
    limit = min(duration_s, timeout_s) if duration_s > 0 else timeout_s
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto) as s:
        s.bind((ParallelPaths.client_address(1), 0))
        s.settimeout(timeout_s)
        s.connect((SERVICE_ADDRESS, PORT))
        start = time.monotonic()
        s.sendall(struct.pack("!Q", size))
        with contextlib.suppress(TimeoutError):
            while got < size and time.monotonic() - start < limit:
                s.settimeout(max(0.001, limit - (time.monotonic() - start)))
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                k = int((time.monotonic() - start) / SAMPLE_S)
                bins.extend([0] * (k + 1 - len(bins)))
                bins[k] += len(chunk)
                got += len(chunk)
    fct = time.monotonic() - start
    print(json.dumps({
        "complete": got == size or (duration_s > 0 and fct >= duration_s),
        "measure_s": duration_s, "bytes": got, "fct_s": round(fct, 4),
        "goodput_mbps": round(8 * got / fct / 1e6, 3) if fct > 0 else None,
        "goodput_series": [[round((k + 1) * SAMPLE_S, 3), round(8 * b / SAMPLE_S / 1e6, 3)]
                           for k, b in enumerate(bins)],
    }))


def bulk_serve(flows: int, cc: str) -> None:
    """Send to each of `flows` connections until it closes or this process is ended."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("0.0.0.0", BULK_PORT))
        srv.listen(flows)

        def pour(conn: socket.socket) -> None:
            chunk = b"\x33" * 65536
            with conn, contextlib.suppress(OSError):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
                while True:
                    conn.send(chunk)

        for _ in range(flows):
            conn, _ = srv.accept()
            threading.Thread(target=pour, args=(conn,), daemon=True).start()
        threading.Event().wait()


def bulk_fetch(flows: int, server: str) -> None:
    """`flows` downloads until this process is ended (SIGTERM): then bytes and goodput
    of each."""
    got = [0] * flows
    start = time.monotonic()

    def drain(k: int) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.connect((server, BULK_PORT))
            with contextlib.suppress(OSError):
                while chunk := s.recv(1 << 20):
                    got[k] += len(chunk)

    for k in range(flows):
        threading.Thread(target=drain, args=(k,), daemon=True).start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    elapsed = time.monotonic() - start
    print(json.dumps({"server": server, "bytes": got,
                      "goodput_mbps": [round(8 * g / elapsed / 1e6, 3) for g in got]}))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="paths_roles", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="role", required=True)
    p = sub.add_parser("serve")
    p.add_argument("--subflows", type=int, default=1)
    p.add_argument("--tcp", action="store_true")
    p = sub.add_parser("fetch")
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--duration", type=float, default=0.0)
    p.add_argument("--tcp", action="store_true")
    p = sub.add_parser("bulk-serve")
    p.add_argument("--flows", type=int, default=1)
    p.add_argument("--cc", default="cubic")
    p = sub.add_parser("bulk-fetch")
    p.add_argument("--flows", type=int, default=1)
    p.add_argument("--server", required=True)
    args = parser.parse_args(argv)
    if args.role == "serve":
        serve_once(args.subflows, args.tcp)
    elif args.role == "fetch":
        fetch(args.size, args.timeout, args.tcp, args.duration)
    elif args.role == "bulk-serve":
        bulk_serve(args.flows, args.cc)
    else:
        bulk_fetch(args.flows, args.server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
