"""MPTCP scheduler checks between two network namespaces (as root, in the lab kernel or on a host).

Sets up namespaces ``pdlab-s`` (server, the data sender) and ``pdlab-c`` (client) joined by
one veth pair; the client has address aliases, each an MPTCP ``subflow`` endpoint, so one
connection has N subflows over one interface (the ``ndiffports`` behaviour of the study).
The scheduler under test is the server's ``net.mptcp.scheduler``.

Modes (each prints one JSON object on stdout):
  check    per scheduler: one transfer captured with tcpdump; reports completion and the
           fraction of consecutive data sequence numbers sent on different subflows
  goodput  one N-subflow transfer, no shaping: goodput in Mbit/s
  fct      F concurrent N-subflow transfers through one shallow-buffered bottleneck:
           mean flow completion time per scheduler

Only the standard library and dpkt (capture parsing) are needed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

NS_SERVER, NS_CLIENT = "pdlab-s", "pdlab-c"
DEV_SERVER, DEV_CLIENT = "pdlab-s0", "pdlab-c0"
SERVER_ADDR = "10.77.0.1"
PORT = 5201
SOL_MPTCP, MPTCP_INFO = 284, 1
MPTCP_OPTION, DSS_SUBTYPE = 30, 2


def client_addr(i: int) -> str:
    return f"10.77.0.{10 + i}"


# ------------------------------------------------------------------ capture analysis (pure)


def dss_mapping(opts: bytes) -> tuple[int, int, int] | None:
    """(data_seq, subflow_seq, data_len) of the DSS mapping in raw TCP options, if any."""
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
        body = opts[i : i + length]
        if kind == MPTCP_OPTION and len(body) >= 4 and body[2] >> 4 == DSS_SUBTYPE:
            flags, off = body[3], 4
            if flags & 0x01:  # data ACK present: 8 bytes if 'a' else 4
                off += 8 if flags & 0x02 else 4
            if flags & 0x04:  # mapping present: DSN 8 bytes if 'm' else 4
                dsn_len = 8 if flags & 0x08 else 4
                if len(body) < off + dsn_len + 6:
                    return None
                dsn = int.from_bytes(body[off : off + dsn_len], "big")
                ssn, dlen = struct.unpack("!IH", body[off + dsn_len : off + dsn_len + 6])
                return dsn, ssn, dlen
            return None
        i += length
    return None


def data_packets(pcap: Path, server_port: int = PORT) -> list[tuple[int, tuple, int]]:
    """(data sequence number, subflow, payload bytes) of every server-to-client data segment.

    The DSN of a segment is its DSS mapping's DSN plus the segment's offset in the mapping
    (segments of one GSO packet share one mapping); the subflow ISN comes from its SYN-ACK.
    """
    import dpkt

    isn: dict[tuple, int] = {}
    out = []
    with pcap.open("rb") as f:
        for _, buf in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(buf).data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            if tcp.sport != server_port:
                continue
            flow = (ip.src, tcp.sport, ip.dst, tcp.dport)
            if tcp.flags & dpkt.tcp.TH_SYN:
                isn[flow] = tcp.seq
                continue
            payload = ip.len - ip.hl * 4 - tcp.off * 4
            mapping = dss_mapping(tcp.opts)
            if payload <= 0 or mapping is None or flow not in isn:
                continue
            dsn, ssn, _ = mapping
            offset = (tcp.seq - isn[flow] - ssn) % 2**32
            out.append(((dsn + offset) % 2**64, flow, payload))
    return out


def interleave_fraction(packets: Sequence[tuple[int, tuple, int]]) -> tuple[float, int]:
    """Share of consecutive data sequence numbers carried by different subflows.

    Packets are ordered by DSN (retransmitted copies dropped). Counting starts at the first
    packet of the last subflow to appear, so the time before all subflows joined is left out.
    Returns (fraction, number of packet pairs counted).
    """
    first: dict[int, tuple] = {}
    for dsn, flow, _ in packets:
        first.setdefault(dsn, flow)
    ordered = sorted(first.items())
    if not ordered:
        return 0.0, 0
    seen: dict[tuple, int] = {}
    for k, (_, flow) in enumerate(ordered):
        seen.setdefault(flow, k)
    start = max(seen.values())
    pairs = list(zip(ordered[start:], ordered[start + 1 :], strict=False))
    if not pairs:
        return 0.0, 0
    switches = sum(1 for (_, a), (_, b) in pairs if a != b)
    return switches / len(pairs), len(pairs)


# ------------------------------------------------------------------ namespaces and processes


def sh(*argv: str, ns: str | None = None, check: bool = True) -> str:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    res = subprocess.run(cmd, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited {res.returncode}: {res.stderr.strip()}")
    return res.stdout


def teardown() -> None:
    for ns in (NS_SERVER, NS_CLIENT):
        sh("ip", "netns", "del", ns, check=False)


@contextlib.contextmanager
def lab(subflows: int, delay_ms: float, rate_mbit: float, queue_pkts: int) -> Iterator[None]:
    """Two namespaces, one veth pair, ``subflows`` client addresses as MPTCP endpoints."""
    teardown()
    try:
        for ns in (NS_SERVER, NS_CLIENT):
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "set", "lo", "up", ns=ns)
            sh("ip", "mptcp", "limits", "set", "subflow", "8", "add_addr_accepted", "8", ns=ns)
        sh("ip", "link", "add", DEV_SERVER, "netns", NS_SERVER, "type", "veth",
           "peer", "name", DEV_CLIENT, "netns", NS_CLIENT)
        sh("ip", "addr", "add", f"{SERVER_ADDR}/24", "dev", DEV_SERVER, ns=NS_SERVER)
        for i in range(subflows):
            sh("ip", "addr", "add", f"{client_addr(i)}/24", "dev", DEV_CLIENT, ns=NS_CLIENT)
            if i:
                sh("ip", "mptcp", "endpoint", "add", client_addr(i), "dev", DEV_CLIENT,
                   "subflow", ns=NS_CLIENT)
        for ns, dev in ((NS_SERVER, DEV_SERVER), (NS_CLIENT, DEV_CLIENT)):
            sh("ip", "link", "set", dev, "up", ns=ns)
            # one segment per packet on the wire, as on a real link
            sh("ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", ns=ns, check=False)
        if delay_ms:
            sh("tc", "qdisc", "add", "dev", DEV_CLIENT, "root", "netem", "delay",
               f"{delay_ms}ms", ns=NS_CLIENT)
        if rate_mbit:
            sh("tc", "qdisc", "add", "dev", DEV_SERVER, "root", "tbf", "rate", f"{rate_mbit}mbit",
               "burst", "3028", "limit", str(queue_pkts * 1514), ns=NS_SERVER)
        yield
    finally:
        teardown()


def set_scheduler(name: str) -> None:
    for ns in (NS_SERVER, NS_CLIENT):
        sh("sysctl", "-qw", f"net.mptcp.scheduler={name}", ns=ns)


def server_cmd(connections: int, subflows: int) -> list[str]:
    return ["ip", "netns", "exec", NS_SERVER, sys.executable, __file__, "serve",
            "--connections", str(connections), "--subflows", str(subflows)]


def client_cmd(size: int, flows: int) -> list[str]:
    return ["ip", "netns", "exec", NS_CLIENT, sys.executable, __file__, "fetch",
            "--size", str(size), "--flows", str(flows)]


def wait_listening(timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if f":{PORT}" in sh("ss", "-Hltn", ns=NS_SERVER):
            return
        time.sleep(0.05)
    raise RuntimeError(f"server did not listen on port {PORT} within {timeout_s} s")


def transfer(scheduler: str, size: int, flows: int, subflows: int,
             capture: Path | None = None) -> dict:
    """Run ``flows`` concurrent fetches of ``size`` bytes under ``scheduler``."""
    set_scheduler(scheduler)
    dump = None
    if capture:
        # capture to local storage first: a shared folder (9p) is too slow for tcpdump
        local = Path(tempfile.mkdtemp(prefix="pdlab-")) / capture.name
        dump = subprocess.Popen(
            ["ip", "netns", "exec", NS_CLIENT, "tcpdump", "-i", DEV_CLIENT, "-s", "160",
             "-B", "16384", "-w", str(local), "tcp", "port", str(PORT)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        while not local.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    server = subprocess.Popen(server_cmd(flows, subflows), stdout=subprocess.PIPE, text=True)
    try:
        wait_listening()
        res = subprocess.run(client_cmd(size, flows), capture_output=True, text=True,
                             timeout=600)
        if res.returncode != 0:
            raise RuntimeError(f"client failed ({res.returncode}): {res.stderr.strip()}")
        fetched = json.loads(res.stdout)
        server_out, _ = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
        if dump:
            time.sleep(0.5)  # let tcpdump drain what the kernel queued
            dump.terminate()
            _, dump_err = dump.communicate(timeout=30)
    report = {"scheduler": scheduler, **fetched, "server": json.loads(server_out or "{}")}
    if capture:
        shutil.move(local, capture)
        shutil.rmtree(local.parent, ignore_errors=True)
        dropped = [line for line in dump_err.splitlines() if "dropped by kernel" in line]
        report["capture_dropped"] = int(dropped[0].split()[0]) if dropped else None
        packets = data_packets(capture)
        frac, pairs = interleave_fraction(packets)
        report.update(interleave_fraction=round(frac, 4), packet_pairs=pairs,
                      subflows_seen=len({flow for _, flow, _ in packets}))
    return report


# ------------------------------------------------------------------ server and client


def serve(connections: int, subflows: int) -> None:
    """Answer ``connections`` requests (8-byte size) with that many bytes, concurrently."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_MPTCP)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((SERVER_ADDR, PORT))
    srv.listen(64)
    joined: list[int] = []

    def answer(conn: socket.socket) -> None:
        with conn:
            size = struct.unpack("!Q", conn.recv(8, socket.MSG_WAITALL))[0]
            # send only once the client's extra subflows joined (bounded wait)
            deadline = time.monotonic() + 5
            n = 0
            while time.monotonic() < deadline:
                n = conn.getsockopt(SOL_MPTCP, MPTCP_INFO, 64)[0]
                if n >= subflows - 1:
                    break
                time.sleep(0.01)
            joined.append(n + 1)
            chunk = b"\x5a" * 65536
            while size:
                size -= conn.send(chunk[: min(size, len(chunk))])
            conn.shutdown(socket.SHUT_WR)
            conn.recv(1)

    threads = []
    for _ in range(connections):
        conn, _ = srv.accept()
        t = threading.Thread(target=answer, args=(conn,))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    srv.close()
    print(json.dumps({"subflows_at_start": joined}))


def fetch(size: int, flows: int) -> None:
    """``flows`` concurrent MPTCP fetches of ``size`` bytes; print FCTs and goodput."""
    results: list[dict] = [{} for _ in range(flows)]
    barrier = threading.Barrier(flows)

    def one(k: int) -> None:
        barrier.wait()
        start = time.monotonic()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_MPTCP) as s:
            s.connect((SERVER_ADDR, PORT))
            s.sendall(struct.pack("!Q", size))
            got = 0
            while chunk := s.recv(1 << 20):
                got += len(chunk)
        fct = time.monotonic() - start
        results[k] = {"bytes": got, "fct_s": fct}

    threads = [threading.Thread(target=one, args=(k,)) for k in range(flows)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    complete = all(r.get("bytes") == size for r in results)
    fcts = [r["fct_s"] for r in results if "fct_s" in r]
    print(json.dumps({
        "complete": complete,
        "bytes": [r.get("bytes", 0) for r in results],
        "fct_s": [round(f, 4) for f in fcts],
        "mean_fct_s": round(sum(fcts) / len(fcts), 4) if fcts else None,
        "goodput_mbps": round(8 * size * flows / max(fcts) / 1e6, 2) if fcts else None,
    }))


# ------------------------------------------------------------------ modes


def available() -> list[str]:
    try:
        return Path("/proc/sys/net/mptcp/available_schedulers").read_text().split()
    except FileNotFoundError:
        return []


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    for name in ("check", "goodput", "fct"):
        m = sub.add_parser(name)
        m.add_argument("--schedulers", nargs="+", default=["default", "rb", "roundrobin"])
        m.add_argument("--subflows", type=int, default=4)
        m.add_argument("--size", type=int, default={"check": 2_000_000, "goodput": 50_000_000,
                                                    "fct": 500_000}[name])
        m.add_argument("--flows", type=int, default=16 if name == "fct" else 1)
        m.add_argument("--delay-ms", type=float, default={"fct": 2.0, "check": 5.0}.get(name, 1.0))
        m.add_argument("--rate-mbit", type=float, default=20.0 if name == "fct" else 0.0)
        m.add_argument("--queue-pkts", type=int, default=10)
        m.add_argument("--out", type=Path, default=Path("."))
    s = sub.add_parser("serve")
    s.add_argument("--connections", type=int, default=1)
    s.add_argument("--subflows", type=int, default=4)
    f = sub.add_parser("fetch")
    f.add_argument("--size", type=int, required=True)
    f.add_argument("--flows", type=int, default=1)
    args = p.parse_args(argv)

    if args.mode == "serve":
        serve(args.connections, args.subflows)
        return 0
    if args.mode == "fetch":
        fetch(args.size, args.flows)
        return 0
    report: dict = {"mode": args.mode, "kernel": sh("uname", "-r").strip(),
                    "available_schedulers": available(), "runs": []}
    args.out.mkdir(parents=True, exist_ok=True)
    with lab(args.subflows, args.delay_ms, args.rate_mbit, args.queue_pkts):
        for sched in args.schedulers:
            capture = args.out / f"{sched}.pcap" if args.mode == "check" else None
            report["runs"].append(transfer(sched, args.size, args.flows, args.subflows, capture))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
