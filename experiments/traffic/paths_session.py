"""One run on the parallel-paths topology (topology.kind: paths), in the lab kernel.

`run_paths(cfg, flow_type, out)` builds the topology object's namespaces
(`fabric/paths_net.py`), starts each path's background TCP downloads, lets the client h1
fetch the flow type's size from the server h2 over MPTCP (one subflow per interface) or
TCP (path 1), applies the config's `events` to the bottlenecks at their times, and
measures:

* goodput over time: payload bytes the client application read, per `SAMPLE_S` bin;
* throughput per subflow over time: the server's `ss` bytes_acked of each subflow,
  differenced per sample (the subflow named by its path), and its state beside it
  (`subflow_state`: smoothed RTT, packets in flight, bytes queued not yet sent, pacing
  rate, per sample): the trace that says where data waited;
* the receiver's out-of-order queue over time and its mean (analysis/metrics/
  reorder_queue.py, from a capture on every client interface);
* the share of copied segments: data segments whose DSN an earlier one already carried
  (a redundant subflow's copies, and MPTCP reinjections);
* the server's MPTCP counters (MPTcpExt*, e.g. MPJoinAckRx, ArpRedundant), as deltas
  from the fetch's start to its end, and to each event once it was applied (so a
  scheduler's decisions after a path broke are told from those before);
* each background flow's goodput.

Roles run in a namespace as `python -m pathdiv.experiments.traffic.paths_session ROLE`:
`serve` / `fetch` (the measured transfer), `bulk-serve` / `bulk-fetch` (background).
Every wait sleeps or blocks (the lab kernel's virtual clock).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pathdiv.analysis.metrics.reorder_queue import (
    mean_queue,
    queue_series,
    sampled,
    segments_from_pcap,
)
from pathdiv.experiments.config.load import Config, load
from pathdiv.experiments.fabric.paths_net import (
    Command,
    build_commands,
    event_commands,
    namespaces,
    ns,
)
from pathdiv.topologies.paths import CLIENT, SERVER, SERVICE_ADDRESS, ParallelPaths

PORT, BULK_PORT = 5301, 5302
SAMPLE_S = 0.5
BACKGROUND_WARMUP_S = 2.0  # background flows start this long before the measured one
SOL_MPTCP, MPTCP_INFO = 284, 1
SNAPLEN = 160  # holds a DSS option after the IP and TCP headers
# coupled controls exist for MPTCP subflows; a plain TCP flow runs their TCP form
TCP_FORM = {"lia": "reno", "olia": "reno", "mptcp-d": "reno", "coupled-bbr": "bbr"}
OWNER_ALIAS = "pathdiv-owner"


# ------------------------------------------------------------------ pure helpers

# a socket's line: [State] Recv-Q Send-Q Local:Port Peer:Port (no State with a filter)
SS_FLOW = re.compile(r"^(?:[A-Z][A-Z0-9-]*\s+)?\d+\s+\d+\s+(\S+):(\d+)\s+(\S+):(\d+)")


def parse_ss(text: str) -> dict[tuple[str, str], int]:
    """`ss -tinH` output -> {(local address, peer address): bytes_acked} per socket."""
    return {k: int(v["bytes_acked"]) for k, v in parse_ss_state(text).items()}


RATE_UNIT = {"bps": 1e-6, "Kbps": 1e-3, "Mbps": 1.0, "Gbps": 1e3}
# a subflow's state the trace keeps (SUBFLOW_STATE names them in paths.json)
SUBFLOW_STATE = ("rtt_ms", "unacked_pkts", "notsent_bytes", "pacing_mbps")


def parse_ss_state(text: str) -> dict[tuple[str, str], dict[str, float]]:
    """`ss -tinH` output -> {(local address, peer address): {bytes_acked, rtt_ms (the
    smoothed RTT), unacked_pkts (in flight), notsent_bytes (queued on the socket, not yet
    sent), pacing_mbps}} per socket; a field ss does not print is 0."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    lines = text.splitlines()
    for k, line in enumerate(lines):
        m = SS_FLOW.match(line)
        if not m:
            continue
        detail = lines[k + 1] if k + 1 < len(lines) and not SS_FLOW.match(lines[k + 1]) \
            else line
        acked = re.search(r"bytes_acked:(\d+)", detail)
        rtt = re.search(r"\brtt:([\d.]+)/", detail)
        unacked = re.search(r"\bunacked:(\d+)", detail)
        notsent = re.search(r"\bnotsent:(\d+)", detail)
        pacing = re.search(r"\bpacing_rate ([\d.]+)([KMG]?bps)", detail)
        out[(m.group(1), m.group(3))] = {
            "bytes_acked": float(acked.group(1)) if acked else 0.0,
            "rtt_ms": float(rtt.group(1)) if rtt else 0.0,
            "unacked_pkts": float(unacked.group(1)) if unacked else 0.0,
            "notsent_bytes": float(notsent.group(1)) if notsent else 0.0,
            "pacing_mbps": float(pacing.group(1)) * RATE_UNIT[pacing.group(2)] if pacing
            else 0.0,
        }
    return out


def parse_netstat(text: str, prefix: str = "MPTcpExt") -> dict[str, int]:
    """/proc/net/netstat -> {name: value} of one prefix's counters."""
    rows = [line.split() for line in text.splitlines() if line.startswith(prefix + ":")]
    if len(rows) < 2:
        return {}
    return {k: int(v) for k, v in zip(rows[0][1:], rows[1][1:], strict=False)}


def counter_deltas(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The counters that changed from `before` to `after`, as differences."""
    return {k: after.get(k, 0) - before.get(k, 0) for k in after
            if after.get(k, 0) != before.get(k, 0)}


def rates(samples: Sequence[tuple[float, dict[str, int]]]) -> dict[str, list[list[float]]]:
    """Cumulative byte samples (time, {name: bytes}) -> per name [[time, Mbit/s], ...]."""
    out: dict[str, list[list[float]]] = {}
    for (t0, a), (t1, b) in itertools.pairwise(samples):
        for name, value in b.items():
            mbps = 8 * (value - a.get(name, 0)) / (t1 - t0) / 1e6 if t1 > t0 else 0.0
            out.setdefault(name, []).append([round(t1, 3), round(max(mbps, 0.0), 3)])
    return out


def copied_share(dsns: Sequence[int]) -> float:
    seen: set[int] = set()
    copies = 0
    for d in dsns:
        copies += d in seen
        seen.add(d)
    return copies / len(dsns) if dsns else 0.0


def background_cc(topo: ParallelPaths, path: int, hosts_cc: str) -> str:
    cc = topo.specs[path - 1].background_cc or hosts_cc
    return TCP_FORM.get(cc, cc)


# ------------------------------------------------------------------ side effects


def sh(argv: Sequence[str], namespace: str | None = None, check: bool = True) -> str:
    cmd = (["ip", "netns", "exec", namespace] if namespace else []) + list(argv)
    res = subprocess.run(cmd, capture_output=True, text=True)
    if check and res.returncode:
        raise RuntimeError(f"`{' '.join(cmd)}` exited {res.returncode}: {res.stderr.strip()}")
    return res.stdout


def run_commands(commands: Sequence[Command]) -> None:
    for namespace, argv in commands:
        sh(argv, namespace, check=argv[0] != "ethtool")


def _owner_mark() -> str:
    stat = Path("/proc/self/stat").read_text()
    return f"{os.getpid()}:{stat[stat.rindex(')') + 2:].split()[19]}"


@contextlib.contextmanager
def paths_network(topo: ParallelPaths) -> Iterator[None]:
    """The topology's namespaces, marked as this process's (`pathdiv clean` deletes only
    marked ones), removed on the way out."""
    names = namespaces(topo)
    for name in names:
        sh(["ip", "netns", "del", name], check=False)
    try:
        mark = _owner_mark()
        for name in names:
            sh(["ip", "netns", "add", name])
            sh(["ip", "-n", name, "link", "set", "lo", "alias", f"{OWNER_ALIAS} {mark}"])
        run_commands(build_commands(topo))
        yield
    finally:
        for name in names:
            sh(["ip", "netns", "del", name], check=False)


def allow_cc(*ccs: str) -> None:
    allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
    have = allowed.read_text().split()
    missing = [c for c in ccs if c not in have]
    if missing:
        allowed.write_text(" ".join(have + missing))


def role(*args: str) -> list[str]:
    return [sys.executable, "-m", "pathdiv.experiments.traffic.paths_session", *args]


def wait_listening(namespace: str, port: int, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if f":{port}" in sh(["ss", "-Hltn"], namespace):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} in {namespace} after {timeout_s} s")


def trace_file(out: Path, namespace: str) -> Path:
    return out / f"cc_trace-{namespace}.jsonl"


def start_tracers(topo: ParallelPaths, trace_ms: float, out: Path) \
        -> list[subprocess.Popen[bytes]]:
    """With capture.cc_trace_ms > 0: one sock_diag sampler (experiments/traffic/
    sockdiag.py) in every sender's namespace, the measured server's and each background
    server's, writing `trace_file(out, namespace)`; none otherwise."""
    if trace_ms <= 0:
        return []
    senders = [(ns(SERVER), PORT)] + [(ns(bs), BULK_PORT)
                                      for _, _, bs in topo.background_pairs()]
    return [subprocess.Popen(
        ["ip", "netns", "exec", namespace, sys.executable, "-m",
         "pathdiv.experiments.traffic.sockdiag", "trace", "--port", str(port),
         "--interval-ms", str(trace_ms), "--out", str(trace_file(out, namespace))],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for namespace, port in senders]


def run_paths(cfg: Config, flow_type: str, out: Path) -> dict[str, Any]:
    """One run (see the module's description); writes captures under `out` and returns the
    measurements."""
    topo = cfg.topology()
    if not isinstance(topo, ParallelPaths):
        raise ValueError("run_paths needs topology.kind: paths")
    size = cfg.flow_sizes()[flow_type]
    timeout = float(cfg.data["workload"]["timeout_s"])
    measure_s = float(cfg.data["workload"].get("measure_s") or 0)
    mptcp = cfg.transport == "mptcp"
    hosts_cc = cfg.cc if mptcp else TCP_FORM.get(cfg.cc, cfg.cc)
    out.mkdir(parents=True, exist_ok=True)
    allow_cc(hosts_cc, *(background_cc(topo, i, cfg.cc) for i, _, _ in
                         topo.background_pairs()))
    procs: list[subprocess.Popen[str]] = []
    trace_ms = float((cfg.data.get("capture") or {}).get("cc_trace_ms") or 0)
    tracers: list[subprocess.Popen[bytes]] = []
    with paths_network(topo):
        for host in (CLIENT, SERVER):
            sh(["sysctl", "-qw", f"net.ipv4.tcp_congestion_control={hosts_cc}"], ns(host))
            sh(["sysctl", "-qw", f"net.mptcp.scheduler={cfg.scheduler}"], ns(host))
        try:
            dumps = [(out / f"h1-eth{i - 1}.pcap", subprocess.Popen(
                ["ip", "netns", "exec", ns(CLIENT), "tcpdump", "-i", f"{CLIENT}-eth{i - 1}",
                 "-s", str(SNAPLEN), "-B", "16384", "-w", str(out / f"h1-eth{i - 1}.pcap"),
                 "tcp", "port", str(PORT)], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)) for i in topo.path_numbers]
            deadline = time.monotonic() + 20
            while not all(p.exists() for p, _ in dumps) and time.monotonic() < deadline:
                time.sleep(0.05)
            tracers = start_tracers(topo, trace_ms, out)
            # background downloads first, so the measured flow meets them in steady state
            for i, bc, bs in topo.background_pairs():
                flows = topo.specs[i - 1].background_flows
                server = subprocess.Popen(
                    ["ip", "netns", "exec", ns(bs), *role(
                        "bulk-serve", "--flows", str(flows), "--cc",
                        background_cc(topo, i, cfg.cc))], stdout=subprocess.PIPE, text=True)
                procs.append(server)
                wait_listening(ns(bs), BULK_PORT)
                procs.append(subprocess.Popen(
                    ["ip", "netns", "exec", ns(bc), *role(
                        "bulk-fetch", "--flows", str(flows), "--server",
                        topo.nodes[bs].address)], stdout=subprocess.PIPE, text=True))
            time.sleep(BACKGROUND_WARMUP_S if topo.background_pairs() else 0)
            before = parse_netstat(sh(["cat", "/proc/net/netstat"], ns(SERVER)))
            server = subprocess.Popen(
                ["ip", "netns", "exec", ns(SERVER), *role(
                    "serve", "--subflows", str(topo.count if mptcp else 1),
                    *(["--tcp"] if not mptcp else []))], stdout=subprocess.PIPE, text=True)
            procs.append(server)
            wait_listening(ns(SERVER), PORT)
            stop = threading.Event()
            subflow_samples: list[tuple[float, dict[str, int]]] = []
            subflow_state: dict[str, list[list[float]]] = {}
            t_start = time.monotonic()

            def sample() -> None:
                while not stop.is_set():
                    state = parse_ss_state(sh(["ss", "-tinH", "state", "established",
                                               "sport", f"= :{PORT}"], ns(SERVER),
                                              check=False))
                    named: dict[str, int] = {}
                    t = round(time.monotonic() - t_start, 3)
                    for (_, peer), fields in state.items():
                        path = topo.path_of_address(peer)
                        if path is not None:
                            name = f"path{path}"
                            named[name] = named.get(name, 0) + int(fields["bytes_acked"])
                            subflow_state.setdefault(name, []).append(
                                [t, *(fields[f] for f in SUBFLOW_STATE)])
                    subflow_samples.append((time.monotonic() - t_start, named))
                    stop.wait(SAMPLE_S)

            def apply_events() -> list[dict[str, Any]]:
                current = {i: topo.specs[i - 1].params for i in topo.path_numbers}
                done = []
                for event in sorted(cfg.data.get("events") or [], key=lambda e: e["at_s"]):
                    if stop.wait(max(0.0, event["at_s"] - (time.monotonic() - t_start))):
                        break
                    run_commands(event_commands(topo, current, event))
                    at_s = round(time.monotonic() - t_start, 3)
                    now = parse_netstat(sh(["cat", "/proc/net/netstat"], ns(SERVER)))
                    done.append({"at_s": at_s,
                                 "link": event["link"], "action": event.get("action"),
                                 "set": {k: v for k, v in (event.get("set") or {}).items()
                                         if v is not None},
                                 "mptcp_counters": counter_deltas(before, now)})
                return done

            applied: list[dict[str, Any]] = []
            sampler = threading.Thread(target=sample)
            eventer = threading.Thread(target=lambda: applied.extend(apply_events()))
            sampler.start()
            eventer.start()
            fetched = subprocess.run(
                ["ip", "netns", "exec", ns(CLIENT), *role(
                    "fetch", "--size", str(size), "--timeout", str(timeout),
                    "--duration", str(measure_s), *(["--tcp"] if not mptcp else []))],
                capture_output=True, text=True, timeout=timeout + 120)
            stop.set()
            sampler.join()
            eventer.join()
            if fetched.returncode:
                raise RuntimeError(f"the fetch failed: {fetched.stderr.strip()[-500:]}")
            after = parse_netstat(sh(["cat", "/proc/net/netstat"], ns(SERVER)))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            background = []
            for p in procs[:-1]:
                with contextlib.suppress(Exception):
                    text, _ = p.communicate(timeout=30)
                    if text and text.strip():
                        background.append(json.loads(text))
            time.sleep(0.5)  # let tcpdump drain what the kernel queued
            for _, dump in dumps:
                dump.terminate()
                dump.wait(timeout=30)
            for tracer in tracers:
                tracer.terminate()
                tracer.wait(timeout=30)
    result = json.loads(fetched.stdout)
    segments = [s for pcap, _ in dumps for s in segments_from_pcap(pcap, PORT)]
    series = queue_series(segments)
    per_path: dict[str, int] = {}
    for s in segments:
        path = topo.path_of_address(s.subflow[2])
        per_path[f"path{path}"] = per_path.get(f"path{path}", 0) + s.length
    return {
        **result,
        "topology": topo.to_dict()["paths"],
        "cc": cfg.cc, "scheduler": cfg.scheduler, "transport": cfg.transport,
        "events": applied,
        "subflows_seen": len({s.subflow for s in segments}),
        "bytes_per_path": per_path,
        "copied_share": round(copied_share([s.dsn for s in segments]), 5),
        "ofo_mean_pkts": round(mean_queue(series), 3),
        "ofo_series": sampled(series, SAMPLE_S),
        "subflow_mbps": rates(subflow_samples),
        "subflow_state": {"fields": ["t_s", *SUBFLOW_STATE], **subflow_state},
        "mptcp_counters": counter_deltas(before, after),
        "background": background,
    }


# ------------------------------------------------------------------ roles (in a namespace)


def serve(subflows: int, tcp: bool) -> None:
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
    parser = argparse.ArgumentParser(prog="paths_session", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="role", required=True)
    p = sub.add_parser("run", help="one run of a kind: paths config; JSON on stdout")
    p.add_argument("config")
    p.add_argument("--flow-type", default=None)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", type=Path, required=True)
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
    if args.role == "run":
        cfg = load(args.config, args.set)
        flow_type = args.flow_type or next(iter(cfg.flow_sizes()))
        print(json.dumps(run_paths(cfg, flow_type, args.out)))
    elif args.role == "serve":
        serve(args.subflows, args.tcp)
    elif args.role == "fetch":
        fetch(args.size, args.timeout, args.tcp, args.duration)
    elif args.role == "bulk-serve":
        bulk_serve(args.flows, args.cc)
    else:
        bulk_fetch(args.flows, args.server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
