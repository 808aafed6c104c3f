"""Exact-size transfers over TCP or MPTCP, with application timestamps.

Runs inside host namespaces as `python -m pathdiv.experiments.traffic.transfer serve|fetch`.

The protocol is minimal HTTP/1.0 so any HTTP client can talk to the server: the
client sends `GET /<bytes> HTTP/1.0`, the server answers with a Content-Length header
and exactly that many payload bytes, then closes (its FIN ends the transfer). `fetch`
runs several requests at once (partition-aggregate) and prints one JSON object per
transfer: start/end wall-clock times (the capture clock), bytes received, the local
port, and for MPTCP the most subflows the connection had while it ran.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import threading
import time
from dataclasses import asdict, dataclass

SOL_MPTCP = 284
MPTCP_INFO = 1
CHUNK = 64 * 1024
_ZEROS = memoryview(bytes(CHUNK))


def make_socket(mptcp: bool) -> socket.socket:
    proto = socket.IPPROTO_MPTCP if mptcp else socket.IPPROTO_TCP
    try:
        return socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
    except OSError as exc:
        raise OSError(
            f"cannot open an {'MPTCP' if mptcp else 'TCP'} socket ({exc.strerror}); "
            "is net.mptcp.enabled=1 in this namespace?"
        ) from None


def mptcp_subflows(sock: socket.socket) -> int:
    """Subflows the connection has now (initial + joined); 1 when MPTCP fell back."""
    try:
        info = sock.getsockopt(SOL_MPTCP, MPTCP_INFO, 16)
    except OSError:
        return 1
    if len(info) < 1:
        return 1
    return 1 + struct.unpack_from("B", info, 0)[0]


def parse_request(head: bytes) -> int:
    line = head.split(b"\r\n", 1)[0].decode("ascii", "replace")
    parts = line.split()
    if len(parts) < 2 or parts[0] != "GET" or not parts[1].lstrip("/").isdigit():
        raise ValueError(f"bad request line {line!r}; expected 'GET /<bytes> HTTP/1.0'")
    return int(parts[1].lstrip("/"))


def _serve_one(conn: socket.socket) -> None:
    with conn:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(4096)
            if not chunk:
                return
            head += chunk
            if len(head) > 65536:
                return
        try:
            size = parse_request(head)
        except ValueError:
            conn.sendall(b"HTTP/1.0 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            return
        conn.sendall(
            f"HTTP/1.0 200 OK\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n".encode()
        )
        left = size
        while left > 0:
            n = conn.send(_ZEROS[: min(CHUNK, left)])
            left -= n


def serve(address: str, port: int, mptcp: bool) -> None:
    srv = make_socket(mptcp)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((address, port))
    srv.listen(256)
    print(f"ready {address}:{port}", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=_serve_one, args=(conn,), daemon=True).start()


@dataclass
class Result:
    server_addr: str
    server_port: int
    size_bytes: int
    client_port: int = 0
    start_s: float = 0.0
    end_s: float = 0.0
    received: int = 0
    ok: bool = False
    error: str = ""
    subflows: int = 0


def fetch_one(server: str, port: int, size: int, mptcp: bool, timeout_s: float) -> Result:
    res = Result(server, port, size)
    sock = make_socket(mptcp)
    sock.settimeout(timeout_s)
    deadline = time.monotonic() + timeout_s
    try:
        res.start_s = time.time()
        sock.connect((server, port))
        res.client_port = sock.getsockname()[1]
        sock.sendall(f"GET /{size} HTTP/1.0\r\nHost: {server}\r\n\r\n".encode())
        buf = bytearray()
        header_done = False
        body = 0
        most = 1
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"not done after {timeout_s:g} s")
            chunk = sock.recv(CHUNK)
            if not chunk:
                break
            if mptcp:
                most = max(most, mptcp_subflows(sock))
            if header_done:
                body += len(chunk)
                continue
            buf += chunk
            if b"\r\n\r\n" in buf:
                head, _, rest = bytes(buf).partition(b"\r\n\r\n")
                if not head.startswith(b"HTTP/1.0 200"):
                    raise ConnectionError(head.split(b"\r\n", 1)[0].decode("ascii", "replace"))
                header_done = True
                body = len(rest)
        res.end_s = time.time()
        res.received = body
        res.subflows = most if mptcp else 1
        res.ok = body == size
        if not res.ok:
            res.error = f"short read: {body} of {size} bytes"
    except (OSError, TimeoutError, ConnectionError) as exc:
        res.end_s = time.time()
        res.error = f"{type(exc).__name__}: {exc}"
    finally:
        sock.close()
    return res


def fetch_many(
    targets: list[tuple[str, int, int]], mptcp: bool, timeout_s: float
) -> list[Result]:
    """Fetch from every (server, port, size) at the same time."""
    results: list[Result | None] = [None] * len(targets)

    def work(i: int, t: tuple[str, int, int]) -> None:
        results[i] = fetch_one(t[0], t[1], t[2], mptcp, timeout_s)

    threads = [threading.Thread(target=work, args=(i, t)) for i, t in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r is not None]


def parse_target(text: str) -> tuple[str, int, int]:
    try:
        addr, port, size = text.rsplit(":", 2)
        return addr, int(port), int(size)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected ADDR:PORT:BYTES") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pathdiv.experiments.traffic.transfer")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="answer GET /<bytes> with exactly that many bytes")
    s.add_argument("--address", default="0.0.0.0")
    s.add_argument("--port", type=int, default=8080)
    s.add_argument("--mptcp", action="store_true")
    f = sub.add_parser("fetch", help="fetch from several servers at once, print JSON lines")
    f.add_argument("targets", nargs="+", type=parse_target, metavar="ADDR:PORT:BYTES")
    f.add_argument("--mptcp", action="store_true")
    f.add_argument("--timeout", type=float, default=120.0)
    args = ap.parse_args(argv)
    if args.cmd == "serve":
        serve(args.address, args.port, args.mptcp)
        return 0
    results = fetch_many(args.targets, args.mptcp, args.timeout)
    for r in results:
        print(json.dumps(asdict(r)), flush=True)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
