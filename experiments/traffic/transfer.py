"""Exact-size transfers over TCP or MPTCP, with application timestamps.

Runs inside host namespaces as `python -m pathdiv.experiments.traffic.transfer serve|fetch`.

The protocol is minimal HTTP/1.0 so any HTTP client can talk to the server: the
client sends `GET /<bytes> HTTP/1.0`, the server answers with a Content-Length header
and exactly that many payload bytes, then closes (its FIN ends the transfer). `fetch`
runs several requests at once (partition-aggregate) and prints one JSON object per
transfer: start/end wall-clock times (the capture clock), bytes received, the local
port, for MPTCP the most subflows the connection had while it ran, and the CPU time
(user + system, CLOCK_THREAD_CPUTIME_ID) of the thread that received it.

Path-aware subflows (`hosts.subflow_paths: disjoint | eliminate`): `--place` gives,
per target, the subflows' source addresses and candidate ports (computed by pathdiv's
hash model); the initial subflow is bound to its address and port, and once the
connection is fully established (the first bytes arrived) the others are opened
through the userspace path manager (`mptcp_pm.py`). `serve --userspace-pm` keeps a
path-manager event listener open so that the server's connections accept the joins,
and `serve --cpu-log FILE` appends one JSON line per answered request with the CPU
time of the thread that sent it.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import json
import os
import platform
import socket
import struct
import sys
import threading
import time
from dataclasses import asdict, dataclass, field

try:  # the package when imported; the sibling modules when run as a script with -S
    from pathdiv.experiments.traffic import clockgrid, mptcp_pm
except ImportError:  # pragma: no cover - exercised by the integration tests
    import clockgrid  # type: ignore[no-redef]
    import mptcp_pm  # type: ignore[no-redef]

SOL_MPTCP = 284
CLONE_NEWNET = 0x40000000
MPTCP_INFO = 1
CHUNK = 64 * 1024
BODY_PIECE = 1 << 20  # bytes one receive of a body waits for in the kernel (one send, too)
_ZEROS = memoryview(bytes(BODY_PIECE))
KERNEL_RELEASE = platform.release()  # the kernel this process runs on (uname -r)


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


CLIENT_CLOSE_WAIT_S = 3600.0  # how long a server waits for a client to close after a reply
JOIN_HEADER = "Subflows"  # the client asks the server to wait for that many subflows
JOIN_WAIT_S = 1.0  # at most this long (the joins take a few round trips)


def requested_subflows(head: bytes) -> int:
    """The `Subflows: N` header of a request (0 when it has none or it is not a number)."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.decode("ascii", "replace").partition(":")
        if name.strip().lower() == JOIN_HEADER.lower() and value.strip().isdigit():
            return int(value.strip())
    return 0


def wait_for_joins(conn: socket.socket, wanted: int, wait_s: float = JOIN_WAIT_S) -> int:
    """Sleep until the MPTCP connection has `wanted` subflows or `wait_s` passed; the
    subflows it has then (sleeps: the virtual clock moves)."""
    deadline = time.monotonic() + wait_s
    have = mptcp_subflows(conn)
    while have < wanted and time.monotonic() < deadline:
        time.sleep(0.001)
        have = mptcp_subflows(conn)
    return have


class CpuLog:
    """Appends one JSON line per answered request (thread-safe)."""

    def __init__(self, path: str | None) -> None:
        self.fh = open(path, "a", buffering=1) if path else None
        self.lock = threading.Lock()

    def write(self, record: dict[str, object]) -> None:
        if self.fh is None:
            return
        with self.lock:
            self.fh.write(json.dumps(record) + "\n")


def _serve_one(conn: socket.socket, log: CpuLog | None = None) -> None:
    cpu0 = time.thread_time()
    try:
        peer = conn.getpeername()
    except OSError:
        peer = ("", 0)
    size = _answer(conn)
    if log is not None and size:
        log.write({"client_addr": peer[0], "client_port": peer[1], "bytes": size,
                   "cpu_ms": round((time.thread_time() - cpu0) * 1000, 3)})


def _answer(conn: socket.socket) -> int:
    """Serve one request; the payload size sent (0 when there was none)."""
    with conn:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(4096)
            if not chunk:
                return 0
            head += chunk
            if len(head) > 65536:
                return 0
        try:
            size = parse_request(head)
        except ValueError:
            conn.sendall(b"HTTP/1.0 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            return 0
        wanted = requested_subflows(head)
        if wanted > 1 and conn.proto == socket.IPPROTO_MPTCP:
            wait_for_joins(conn, wanted)  # they start together (hosts.join_before_data)
        conn.sendall(
            f"HTTP/1.0 200 OK\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n".encode()
        )
        left = size
        while left > 0:  # a blocking send waits in the kernel until its piece is queued
            n = conn.send(_ZEROS[: min(BODY_PIECE, left)])
            left -= n
        # The response's end (FIN, MPTCP's DATA_FIN), then hold the socket until the
        # client closed: the body's tail may still be queued here. An MPTCP socket its
        # application closed is reset by Linux 6.12 60 s later (an orphaned msk's close
        # timeout, TCP_TIMEWAIT_LEN: MP_FASTCLOSE and RST), whatever it still had to
        # deliver; a 25 MB response slowed under incast was cut so at 118.7 s.
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(CLIENT_CLOSE_WAIT_S)
        with contextlib.suppress(OSError):
            while conn.recv(4096):
                pass
        return size


def socket_in_namespace(pid: int, mptcp: bool) -> socket.socket:
    """A new TCP or MPTCP socket in the network namespace of process `pid`: this thread
    enters the namespace (setns) to create it and returns; the socket, and every
    connection it accepts, stays in that namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"cannot enter the namespace of pid {pid}")
        try:
            return make_socket(mptcp)
        finally:
            if libc.setns(own, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "cannot return to this namespace")
    finally:
        os.close(own)
        os.close(target)


def _listen(srv: socket.socket, address: str, port: int) -> socket.socket:
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((address, port))
    srv.listen(256)
    return srv


def _accept_loop(srv: socket.socket, log: CpuLog) -> None:
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=_serve_one, args=(conn, log), daemon=True).start()


def serve(address: str, port: int, mptcp: bool, userspace_pm: bool = False,
          cpu_log: str | None = None,
          namespaces: list[tuple[int, str | None]] | None = None) -> None:
    """Answer requests on `port` in this process's namespace, or, with `namespaces`
    ((pid, CPU log) each), in the namespace of each pid: one process serving every
    host (a process start costs tens of milliseconds in the lab kernel)."""
    if namespaces:
        listeners = [(_listen(socket_in_namespace(pid, mptcp), address, port), CpuLog(log))
                     for pid, log in namespaces]
        bound = listeners[0][0].getsockname()[1]  # the port, also when 0 chose it
        print(f"ready {address}:{bound} in {len(listeners)} namespaces", flush=True)
        for srv, log in listeners[1:]:
            threading.Thread(target=_accept_loop, args=(srv, log), daemon=True).start()
        _accept_loop(*listeners[0])
        return
    if userspace_pm:
        mptcp_pm.EventDrain()  # lives as long as the server
    srv = _listen(make_socket(mptcp), address, port)
    print(f"ready {address}:{port}", flush=True)
    _accept_loop(srv, CpuLog(cpu_log))


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
    cpu_ms: float = 0.0
    placed: str = ""  # the subflows opened through the path manager, addr:port;...
    end_ns: int = 0  # CLOCK_MONOTONIC when the transfer was over (the next round's base)
    late_ns: int = 0  # how late fetch reached its --start-ns (0: it slept until then)
    request: int = 0  # a shared fetch's request index (Target.request)


@dataclass(frozen=True)
class PlannedSubflow:
    address: str
    ports: tuple[int, ...] = field(default=())


def parse_place(text: str) -> list[PlannedSubflow]:
    """'10.0.0.2:20001/20007,10.0.0.34:21000' -> subflows with candidate ports."""
    out = []
    for item in text.split(","):
        addr, _, ports = item.rpartition(":")
        try:
            out.append(PlannedSubflow(addr, tuple(int(p) for p in ports.split("/"))))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{item!r}: expected ADDR:PORT[/PORT...] per subflow, comma-separated"
            ) from None
        if not addr:
            raise argparse.ArgumentTypeError(f"{item!r}: no address")
    return out


def _connect_placed(sock: socket.socket, first: PlannedSubflow, server: tuple[str, int]
                    ) -> None:
    """Bind the initial subflow to the first free candidate port, then connect."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    for i, port in enumerate(first.ports):
        try:
            sock.bind((first.address, port))
            break
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or i == len(first.ports) - 1:
                raise
    sock.connect(server)


def _open_subflows(sock: socket.socket, extra: list[PlannedSubflow],
                   server: tuple[str, int], wait_s: float = 0.0) -> list[str]:
    """Open the extra subflows through the userspace path manager; 'addr:port' each.
    With `wait_s` the connection may not be fully established yet (the kernel refuses
    with ENOTCONN until it is): try again every millisecond for that long."""
    pm = mptcp_pm.PathManager()
    deadline = time.monotonic() + wait_s
    try:
        token = mptcp_pm.connection_token(sock)
        opened = []
        for local_id, sub in enumerate(extra, start=1):
            i = 0
            while i < len(sub.ports):
                try:
                    pm.create_subflow(token, (sub.address, sub.ports[i]), local_id, server)
                    opened.append(f"{sub.address}:{sub.ports[i]}")
                    break
                except OSError as exc:
                    if exc.errno == errno.ENOTCONN and time.monotonic() < deadline:
                        time.sleep(0.001)
                        continue
                    if exc.errno != errno.EADDRINUSE or i == len(sub.ports) - 1:
                        raise
                    i += 1
        return opened
    finally:
        pm.close()


def _wait_in_kernel(sock: socket.socket, timeout_s: float) -> bool:
    """Make `sock` blocking with the kernel's own receive timeout, so a receive waits in
    the kernel until its piece has arrived; False (sock unchanged) where the socket
    refuses SO_RCVTIMEO.

    With Python's socket timeout every receive returns whatever has arrived, so a
    client wakes and returns to user space for about every segment; in the lab kernel
    (User-Mode Linux) each such return costs host system calls and context switches.
    A blocking receive with MSG_WAITALL still copies each segment as it arrives (the
    receive buffer drains as before), but returns once per BODY_PIECE.
    """
    whole, frac = divmod(max(timeout_s, 0.001), 1.0)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                        struct.pack("ll", int(whole), int(frac * 1e6)))
    except OSError:
        return False
    sock.settimeout(None)
    return True


def may_wait_in_kernel(mptcp: bool, release: str | None = None) -> bool:
    """Whether a fetch's receives may wait in the kernel (`_wait_in_kernel`).

    TCP always. MPTCP only in pathdiv's lab kernel (release ending in "-pathdiv"): on
    this machine's 6.18 kernel a client blocked in an MPTCP receive got none of its
    subflows joined during the transfer (the fat tree probe: 1 subflow of 4, on the
    nftables plane and p4-ebpf, 2026-11-26; the cause inside the kernel is not known),
    while in the lab kernel (6.12) every noisy query transfer kept 4 of 4 (84 of 84).
    """
    release = KERNEL_RELEASE if release is None else release
    return not mptcp or release.endswith("-pathdiv")


def fetch_one(server: str, port: int, size: int, mptcp: bool, timeout_s: float,
              place: list[PlannedSubflow] | None = None, pid: int | None = None,
              join_first: int = 0) -> Result:
    """Fetch `size` bytes from server:port, from this namespace or, with `pid`, from
    the network namespace of that process (a shared fetch: `Target`). `join_first`
    (MPTCP, hosts.join_before_data): the connection's subflows (`place`'s count where
    given) join before the server sends the response: the request asks the server to
    wait for them, and placed subflows are opened as soon as the connection is
    established, not once data arrives."""
    res = Result(server, port, size)
    cpu0 = time.thread_time()
    sock = make_socket(mptcp) if pid is None else socket_in_namespace(pid, mptcp)
    sock.settimeout(timeout_s)
    deadline = time.monotonic() + timeout_s
    try:
        res.start_s = time.time()
        if place:
            _connect_placed(sock, place[0], (server, port))
            res.placed = f"{place[0].address}:{sock.getsockname()[1]}"
        else:
            sock.connect((server, port))
        res.client_port = sock.getsockname()[1]
        wanted = (len(place) if place else join_first) if mptcp and join_first else 0
        joins = f"{JOIN_HEADER}: {wanted}\r\n" if wanted > 1 else ""
        sock.sendall(f"GET /{size} HTTP/1.0\r\nHost: {server}\r\n{joins}\r\n".encode())
        pending = place[1:] if place and mptcp else []
        if pending and wanted > 1:  # before the response, which waits for them
            opened = _open_subflows(sock, pending, (server, port), JOIN_WAIT_S)
            res.placed = ";".join([res.placed, *opened])
            pending = []
        waitall = may_wait_in_kernel(mptcp) and _wait_in_kernel(sock, timeout_s)
        buf = bytearray()
        header_done = False
        body = 0
        most = 1
        piece = bytearray(BODY_PIECE if waitall else CHUNK)
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"not done after {timeout_s:g} s")
            if header_done and waitall and body < size:
                # the body up to its last byte; the server's FIN is read after it, as
                # before (the transfer ends there), once the subflows were counted
                want = min(BODY_PIECE, size - body)
                got = sock.recv_into(piece, want, socket.MSG_WAITALL)
            else:
                got = sock.recv_into(piece, CHUNK)
            if not got:
                if mptcp:  # the latest look, with the joins of the whole transfer: a
                    # receive that waits for a whole piece gives few looks before it
                    most = max(most, mptcp_subflows(sock))
                break
            chunk = piece[:got]
            if pending:  # data arrived: the connection is fully established
                opened = _open_subflows(sock, pending, (server, port))
                res.placed = ";".join([res.placed, *opened])
                pending = []
            if mptcp:
                most = max(most, mptcp_subflows(sock))
            if header_done:
                body += got
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
    except BlockingIOError:  # the kernel's receive timeout (SO_RCVTIMEO) expired
        res.end_s = time.time()
        res.error = f"TimeoutError: nothing received for {timeout_s:g} s"
    except (OSError, TimeoutError, ConnectionError) as exc:
        res.end_s = time.time()
        res.error = f"{type(exc).__name__}: {exc}"
    finally:
        sock.close()
        res.end_ns = time.monotonic_ns()
        res.cpu_ms = round((time.thread_time() - cpu0) * 1000, 3)
    return res


def fetch_many(
    targets: list[Target], mptcp: bool, timeout_s: float,
    places: list[list[PlannedSubflow]] | None = None, start_ns: int | None = None,
    join_first: int = 0,
) -> list[Result]:
    """Fetch from every target at the same time (`places`: per target, the subflows to
    open, or none for the kernel's own choice); with `start_ns` each target's thread
    first sleeps until start_ns + its request's offset (the virtual clock's instant);
    `join_first`: see fetch_one."""
    results: list[Result | None] = [None] * len(targets)
    plan = places or []

    def work(i: int, t: Target) -> None:
        late = 0 if start_ns is None else clockgrid.start_at(start_ns + t.request)
        res = fetch_one(t.server, t.port, t.size, mptcp, timeout_s,
                        plan[i] if i < len(plan) else None, t.pid, join_first)
        res.late_ns, res.request = late, t.request
        results[i] = res

    threads = [threading.Thread(target=work, args=(i, t)) for i, t in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r is not None]


FIFO_HELP = ("run under SCHED_FIFO, every thread (the virtual clock: woken threads run "
             "in the order they were woken, whatever the scheduler's history)")


def first_in_first_out(who: str) -> None:
    """This process (and the threads it starts) under SCHED_FIFO, priority 1.

    On the virtual clock every clock read in process context costs guest time, so the
    order in which runnable threads get the CPU moves the packets. The fair scheduler
    picks by virtual runtimes and lags that every earlier process in the boot shaped:
    the same run gave other FCTs after other runs than first in its boot. Under
    SCHED_FIFO a woken thread waits behind those woken before it and runs until it
    blocks, an order set by the events alone.

    For TCP only (rounds.at_instant decides; bmv2's switch threads join them there:
    DataPlane.first_in_first_out): MPTCP's path manager and its connections' work run
    in kernel workers, which the fair scheduler runs behind any real-time thread.
    With the servers and fetches of MPTCP runs under SCHED_FIFO, 28 of 336 ecmp-mptcp
    transfers of the noisy plan opened fewer than 4 subflows (1 of 336 without), and
    with the fetches leaving it after their request, the subflows opened but
    ecmp-mptcp's utilization fell by up to 15 %. Never on the real clock: a busy
    real-time thread would starve the rest."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except OSError as exc:
        print(f"{who}: SCHED_FIFO refused ({exc.strerror}); threads run in the fair "
              "scheduler's order", file=sys.stderr)


def parse_namespace(text: str) -> tuple[int, str | None]:
    """'1234:/x/server-h1.cpu.jsonl' -> (1234, '/x/server-h1.cpu.jsonl'); '1234' -> no log."""
    pid, _, log = text.partition(":")
    if not pid.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: expected PID[:CPU_LOG]")
    return int(pid), log or None


@dataclass(frozen=True)
class Target:
    """One transfer of a fetch: from server:port, `size` bytes. A shared fetch (one
    process for the requests of many clients, on the virtual clock) gives each its
    client: `pid`, a process in the client's namespace, where its socket is made, and
    `request`, the request's index in the round (its instant is that many ns after the
    round's, as a fetch per request's would be)."""

    server: str
    port: int
    size: int
    pid: int | None = None
    request: int = 0


def parse_target(text: str) -> Target:
    """'ADDR:PORT:BYTES' or 'ADDR:PORT:BYTES@PID+REQUEST' (a shared fetch's)."""
    try:
        spec, at, client = text.partition("@")
        addr, port, size = spec.rsplit(":", 2)
        if not at:
            return Target(addr, int(port), int(size))
        pid, _, request = client.partition("+")
        return Target(addr, int(port), int(size), int(pid), int(request or 0))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected ADDR:PORT:BYTES or "
                                         "ADDR:PORT:BYTES@PID+REQUEST") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pathdiv.experiments.traffic.transfer")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="answer GET /<bytes> with exactly that many bytes")
    s.add_argument("--address", default="0.0.0.0")
    s.add_argument("--port", type=int, default=8080)
    s.add_argument("--mptcp", action="store_true")
    s.add_argument("--userspace-pm", action="store_true",
                   help="listen to MPTCP path-manager events so joins are accepted "
                   "under net.mptcp.pm_type=1")
    s.add_argument("--cpu-log", metavar="FILE", help="append one JSON line per request")
    s.add_argument("--namespace", action="append", default=[], type=parse_namespace,
                   metavar="PID[:CPU_LOG]", help="serve in the network namespace of PID "
                   "(repeatable: one process for several hosts), its CPU log beside")
    s.add_argument("--fifo", action="store_true", help=FIFO_HELP)
    f = sub.add_parser("fetch", help="fetch from several servers at once, print JSON lines")
    f.add_argument("targets", nargs="+", type=parse_target, metavar="ADDR:PORT:BYTES")
    f.add_argument("--mptcp", action="store_true")
    f.add_argument("--timeout", type=float, default=120.0)
    f.add_argument("--place", type=parse_place, action="append", metavar="SUBFLOWS",
                   help="per target, in order: ADDR:PORT[/PORT..] of each subflow, "
                   "comma-separated (the first is the initial subflow)")
    f.add_argument("--fifo", action="store_true", help=FIFO_HELP)
    f.add_argument("--join-first", type=int, default=0, metavar="N",
                   help="MPTCP: the N subflows of each connection (each --place's count "
                   "where given) join before the server sends the response")
    f.add_argument("--start-ns", type=int, metavar="NS", help="sleep until CLOCK_MONOTONIC "
                   "reads NS before the first connection (the round's instant on the "
                   "virtual clock: clockgrid.py)")
    args = ap.parse_args(argv)
    if args.cmd == "serve":
        if args.fifo:
            first_in_first_out("serve")
        if args.namespace and args.userspace_pm:
            ap.error("--namespace and --userspace-pm: one process per host with joins")
        serve(args.address, args.port, args.mptcp, args.userspace_pm, args.cpu_log,
              args.namespace)
        return 0
    if args.place and len(args.place) != len(args.targets):
        ap.error(f"{len(args.place)} --place for {len(args.targets)} targets; give one "
                 "per target or none")
    if args.fifo:
        first_in_first_out("fetch")
    if any(t.pid is not None for t in args.targets):  # shared: each thread its instant
        results = fetch_many(args.targets, args.mptcp, args.timeout, args.place,
                             args.start_ns, args.join_first)
    else:  # one request: the process wakes at its instant, then starts its threads
        late = 0 if args.start_ns is None else clockgrid.start_at(args.start_ns)
        results = fetch_many(args.targets, args.mptcp, args.timeout, args.place,
                             join_first=args.join_first)
        for r in results:
            r.late_ns = late
    for r in results:
        print(json.dumps(asdict(r)), flush=True)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
