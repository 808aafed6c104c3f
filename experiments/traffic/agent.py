"""Long-lived traffic agents inside host namespaces: scheduled fetches and request/response.

Run by path with the standard library only (like transfer.py, next to it):

  agent.py schedule FILE --start EPOCH [--mptcp] [--timeout S]
      FILE is a JSON list of [flow_id, at_s, server_addr, port, size]; each fetch starts
      at EPOCH + at_s in its own thread (open loop: a slow fetch does not delay the
      next). One JSON line per fetch, printed when it ends, with `flow_id`.
  agent.py rpc-serve --port P [--mptcp]
      Answers requests on persistent connections: an 8-byte header (request bytes,
      response bytes; big-endian uint32 each), the request, then the response.
  agent.py rpc TARGETS --rate R --request B --response B --duration S --start EPOCH
      One persistent connection per ADDR:PORT target. Requests leave at Poisson times
      (R per second over all connections), pipelined; a request's latency runs from
      its scheduled time to its response's last byte. One JSON line per request.

Lines are flushed as they happen, so a stopped agent leaves what it finished.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import random
import socket
import struct
import sys
import threading
import time
from dataclasses import asdict

try:
    from pathdiv.experiments.traffic.transfer import fetch_one, make_socket
except ImportError:  # run by path with -S: transfer.py is beside this file
    from transfer import fetch_one, make_socket  # type: ignore[no-redef]

HEADER = struct.Struct("!II")
_lock = threading.Lock()


def emit(record: dict) -> None:
    with _lock:
        print(json.dumps(record), flush=True)


def sleep_until(epoch: float) -> None:
    delay = epoch - time.time()
    if delay > 0:
        time.sleep(delay)


def run_schedule(flows: list[list], start: float, mptcp: bool, timeout_s: float) -> None:
    threads = []

    def work(flow_id: int, addr: str, port: int, size: int) -> None:
        res = fetch_one(addr, port, size, mptcp, timeout_s)
        emit({"flow_id": flow_id, **asdict(res)})

    for flow_id, at_s, addr, port, size in sorted(flows, key=lambda f: f[1]):
        sleep_until(start + float(at_s))
        t = threading.Thread(target=work, args=(int(flow_id), addr, int(port), int(size)),
                             daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join(timeout_s + 5)


def _recv_exact(conn: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(min(65536, n - len(buf)))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _rpc_conn(conn: socket.socket) -> None:
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            head = _recv_exact(conn, HEADER.size)
            if head is None:
                return
            req, resp = HEADER.unpack(head)
            if _recv_exact(conn, req) is None:
                return
            conn.sendall(bytes(resp))


def rpc_serve(port: int, mptcp: bool) -> None:
    srv = make_socket(mptcp)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(256)
    print(f"ready 0.0.0.0:{port}", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=_rpc_conn, args=(conn,), daemon=True).start()


def rpc_client(targets: list[tuple[str, int]], rate: float, request: int, response: int,
               duration_s: float, start: float, seed: int, mptcp: bool,
               timeout_s: float) -> None:
    per_conn = rate / len(targets)
    threads = [threading.Thread(target=_rpc_one, args=(
        i, addr, port, per_conn, request, response, duration_s, start,
        random.Random(f"pathdiv-rpc|{seed}|{i}"), mptcp, timeout_s), daemon=True)
        for i, (addr, port) in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(duration_s + timeout_s + 10)


def _rpc_one(conn_id: int, addr: str, port: int, rate: float, request: int, response: int,
             duration_s: float, start: float, rng: random.Random, mptcp: bool,
             timeout_s: float) -> None:
    base = {"conn": conn_id, "server_addr": addr, "server_port": port,
            "request_bytes": request, "response_bytes": response}
    sock = make_socket(mptcp)
    sock.settimeout(timeout_s)
    try:
        sleep_until(start)
        sock.connect((addr, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError as exc:
        emit({**base, "request": -1, "ok": False, "error": f"connect: {exc}"})
        sock.close()
        return
    pending: collections.deque[tuple[int, float]] = collections.deque()
    sent_all = threading.Event()
    have = threading.Condition()

    def receiver() -> None:
        while True:
            with have:
                while not pending and not sent_all.is_set():
                    have.wait()
                if not pending:
                    return
                n, scheduled = pending[0]
            try:
                got = _recv_exact(sock, response)
            except OSError as exc:
                got, err = None, str(exc)
            else:
                err = "connection closed"
            done = time.time()
            with have:
                pending.popleft()
            if got is None:
                emit({**base, "request": n, "sent_s": scheduled, "done_s": done,
                      "latency_s": None, "ok": False, "error": err})
                return
            emit({**base, "request": n, "sent_s": scheduled, "done_s": done,
                  "latency_s": done - scheduled, "ok": True, "error": ""})

    rx = threading.Thread(target=receiver, daemon=True)
    rx.start()
    t, n = 0.0, 0
    payload = HEADER.pack(request, response) + bytes(request)
    while rate > 0:
        t += -math.log(1.0 - rng.random()) / rate
        if t >= duration_s:
            break
        sleep_until(start + t)
        with have:
            pending.append((n, start + t))
            have.notify()
        try:
            sock.sendall(payload)
        except OSError as exc:
            emit({**base, "request": n, "ok": False, "error": f"send: {exc}"})
            break
        n += 1
    with have:
        sent_all.set()
        have.notify()
    rx.join(timeout_s + 5)
    sock.close()


def _target(text: str) -> tuple[str, int]:
    addr, port = text.rsplit(":", 1)
    return addr, int(port)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="agent.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("schedule", help="fetches at scheduled times (open loop)")
    s.add_argument("file")
    s.add_argument("--start", type=float, required=True)
    s.add_argument("--mptcp", action="store_true")
    s.add_argument("--timeout", type=float, default=120.0)
    r = sub.add_parser("rpc-serve", help="request/response server")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--mptcp", action="store_true")
    c = sub.add_parser("rpc", help="request/response client on persistent connections")
    c.add_argument("targets", nargs="+", type=_target, metavar="ADDR:PORT")
    c.add_argument("--rate", type=float, required=True)
    c.add_argument("--request", type=int, required=True)
    c.add_argument("--response", type=int, required=True)
    c.add_argument("--duration", type=float, required=True)
    c.add_argument("--start", type=float, required=True)
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--mptcp", action="store_true")
    c.add_argument("--timeout", type=float, default=30.0)
    args = ap.parse_args(argv)
    if args.cmd == "schedule":
        with open(args.file) as fh:
            flows = json.load(fh)
        run_schedule(flows, args.start, args.mptcp, args.timeout)
    elif args.cmd == "rpc-serve":
        rpc_serve(args.port, args.mptcp)
    else:
        rpc_client(args.targets, args.rate, args.request, args.response, args.duration,
                   args.start, args.seed, args.mptcp, args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
