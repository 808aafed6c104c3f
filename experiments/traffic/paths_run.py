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

The processes in the namespaces are paths_roles.py's. Every wait sleeps or blocks (the
lab kernel's virtual clock). `python -m pathdiv.experiments.traffic.paths_run run CONFIG
--out DIR` runs one and prints its measurements.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pathdiv.analysis.metrics.reorder_queue import (
    mean_queue,
    queue_series,
    sampled,
    segments_from_pcap,
)
from pathdiv.experiments.config.load import Config, load
from pathdiv.experiments.fabric.environment import (
    allow_cc,
    mark_namespace_argv,
    restore_allowed_cc,
)
from pathdiv.experiments.fabric.paths_net import (
    Command,
    build_commands,
    event_commands,
    namespaces,
    ns,
)
from pathdiv.experiments.manifest import changed_counters, parse_netstat
from pathdiv.experiments.traffic.paths_roles import BULK_PORT, PORT, SAMPLE_S
from pathdiv.topologies.paths import CLIENT, SERVER, ParallelPaths

ROLES = "pathdiv.experiments.traffic.paths_roles"
BACKGROUND_WARMUP_S = 2.0  # background flows start this long before the measured one
SNAPLEN = 160  # holds a DSS option after the IP and TCP headers
# coupled controls exist for MPTCP subflows; a plain TCP flow runs their TCP form
TCP_FORM = {"lia": "reno", "olia": "reno", "mptcp-d": "reno", "coupled-bbr": "bbr"}


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


@contextlib.contextmanager
def paths_network(topo: ParallelPaths) -> Iterator[None]:
    """The topology's namespaces, marked as this process's (`pathdiv clean` deletes only
    marked ones), removed on the way out."""
    names = namespaces(topo)
    for name in names:
        sh(["ip", "netns", "del", name], check=False)
    try:
        for name in names:
            sh(["ip", "netns", "add", name])
            sh(mark_namespace_argv(name))
        run_commands(build_commands(topo))
        yield
    finally:
        for name in names:
            sh(["ip", "netns", "del", name], check=False)


def role(*args: str) -> list[str]:
    return [sys.executable, "-m", ROLES, *args]


def wait_listening(namespace: str, port: int, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if f":{port}" in sh(["ss", "-Hltn"], namespace):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} in {namespace} after {timeout_s} s")


def trace_file(out: Path, namespace: str) -> Path:
    return out / f"cc_trace-{namespace}.jsonl"


def server_counters() -> dict[str, int]:
    """The server's MPTCP counters now."""
    return parse_netstat(sh(["cat", "/proc/net/netstat"], ns(SERVER)), "MPTcpExt")


class PathsRun:
    """One run's processes and what they measured, phase by phase (`run_paths`)."""

    def __init__(self, cfg: Config, flow_type: str, out: Path) -> None:
        topo = cfg.topology()
        if not isinstance(topo, ParallelPaths):
            raise ValueError("run_paths needs topology.kind: paths")
        self.cfg, self.topo, self.out = cfg, topo, out
        self.size = cfg.flow_sizes()[flow_type]
        self.timeout = float(cfg.data["workload"]["timeout_s"])
        self.measure_s = float(cfg.data["workload"].get("measure_s") or 0)
        self.trace_ms = float((cfg.data.get("capture") or {}).get("cc_trace_ms") or 0)
        self.tracers: list[subprocess.Popen[bytes]] = []
        self.mptcp = cfg.transport == "mptcp"
        self.hosts_cc = cfg.cc if self.mptcp else TCP_FORM.get(cfg.cc, cfg.cc)
        self.dumps: list[tuple[Path, subprocess.Popen[bytes]]] = []
        self.bulk: list[subprocess.Popen[str]] = []  # the background flows' processes
        self.server: subprocess.Popen[str] | None = None
        self.before: dict[str, int] = {}  # the server's counters at the fetch's start
        self.stop_sampling = threading.Event()
        self.t_start = 0.0
        self.subflow_samples: list[tuple[float, dict[str, int]]] = []
        self.subflow_state: dict[str, list[list[float]]] = {}
        self.applied: list[dict[str, Any]] = []
        self.background: list[dict[str, Any]] = []

    def congestion_controls(self) -> list[str]:
        return [self.hosts_cc, *(background_cc(self.topo, i, self.cfg.cc)
                                 for i, _, _ in self.topo.background_pairs())]

    def set_hosts(self) -> None:
        for host in (CLIENT, SERVER):
            sh(["sysctl", "-qw", f"net.ipv4.tcp_congestion_control={self.hosts_cc}"], ns(host))
            sh(["sysctl", "-qw", f"net.mptcp.scheduler={self.cfg.scheduler}"], ns(host))

    def start_captures(self) -> None:
        """A capture of the measured flow on every client interface, once each file is
        there (tcpdump has opened it)."""
        for i in self.topo.path_numbers:
            pcap = self.out / f"h1-eth{i - 1}.pcap"
            self.dumps.append((pcap, subprocess.Popen(
                ["ip", "netns", "exec", ns(CLIENT), "tcpdump", "-i", f"{CLIENT}-eth{i - 1}",
                 "-s", str(SNAPLEN), "-B", "16384", "-w", str(pcap), "tcp", "port",
                 str(PORT)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        deadline = time.monotonic() + 20
        while not all(p.exists() for p, _ in self.dumps) and time.monotonic() < deadline:
            time.sleep(0.05)

    def start_tracers(self) -> None:
        """With capture.cc_trace_ms > 0: one sock_diag sampler (experiments/traffic/
        sockdiag.py) in every sender's namespace, the measured server's and each
        background server's, writing `trace_file(out, namespace)`."""
        if self.trace_ms <= 0:
            return
        senders = [(ns(SERVER), PORT)] + [(ns(bs), BULK_PORT)
                                          for _, _, bs in self.topo.background_pairs()]
        self.tracers = [subprocess.Popen(
            ["ip", "netns", "exec", namespace, sys.executable, "-m",
             "pathdiv.experiments.traffic.sockdiag", "trace", "--port", str(port),
             "--interval-ms", str(self.trace_ms), "--out",
             str(trace_file(self.out, namespace))],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for namespace, port in senders]

    def start_background(self) -> None:
        """The background downloads first, so the measured flow meets them in steady
        state."""
        for i, bc, bs in self.topo.background_pairs():
            flows = self.topo.specs[i - 1].background_flows
            self.bulk.append(subprocess.Popen(
                ["ip", "netns", "exec", ns(bs), *role(
                    "bulk-serve", "--flows", str(flows), "--cc",
                    background_cc(self.topo, i, self.cfg.cc))],
                stdout=subprocess.PIPE, text=True))
            wait_listening(ns(bs), BULK_PORT)
            self.bulk.append(subprocess.Popen(
                ["ip", "netns", "exec", ns(bc), *role(
                    "bulk-fetch", "--flows", str(flows), "--server",
                    self.topo.nodes[bs].address)], stdout=subprocess.PIPE, text=True))
        time.sleep(BACKGROUND_WARMUP_S if self.topo.background_pairs() else 0)

    def start_server(self) -> None:
        self.before = server_counters()
        self.server = subprocess.Popen(
            ["ip", "netns", "exec", ns(SERVER), *role(
                "serve", "--subflows", str(self.topo.count if self.mptcp else 1),
                *(["--tcp"] if not self.mptcp else []))], stdout=subprocess.PIPE, text=True)
        wait_listening(ns(SERVER), PORT)

    def sample(self) -> None:
        """Every SAMPLE_S until the fetch ends: each subflow's bytes and state."""
        while not self.stop_sampling.is_set():
            state = parse_ss_state(sh(["ss", "-tinH", "state", "established", "sport",
                                       f"= :{PORT}"], ns(SERVER), check=False))
            named: dict[str, int] = {}
            t = round(time.monotonic() - self.t_start, 3)
            for (_, peer), fields in state.items():
                path = self.topo.path_of_address(peer)
                if path is not None:
                    name = f"path{path}"
                    named[name] = named.get(name, 0) + int(fields["bytes_acked"])
                    self.subflow_state.setdefault(name, []).append(
                        [t, *(fields[f] for f in SUBFLOW_STATE)])
            self.subflow_samples.append((time.monotonic() - self.t_start, named))
            self.stop_sampling.wait(SAMPLE_S)

    def apply_events(self) -> None:
        """The config's events on the bottlenecks at their times, each recorded with the
        server's counters since the fetch's start."""
        current = {i: self.topo.specs[i - 1].params for i in self.topo.path_numbers}
        events = sorted(self.cfg.data.get("events") or [], key=lambda e: e["at_s"])
        for event in events:
            if self.stop_sampling.wait(max(0.0, event["at_s"]
                                           - (time.monotonic() - self.t_start))):
                break
            run_commands(event_commands(self.topo, current, event))
            at_s = round(time.monotonic() - self.t_start, 3)
            self.applied.append({
                "at_s": at_s, "link": event["link"], "action": event.get("action"),
                "set": {k: v for k, v in (event.get("set") or {}).items() if v is not None},
                "mptcp_counters": changed_counters(self.before, server_counters())})

    def fetch(self) -> dict[str, Any]:
        """The measured fetch, with the sampler and the events beside it; its record."""
        self.t_start = time.monotonic()
        sampler = threading.Thread(target=self.sample)
        eventer = threading.Thread(target=self.apply_events)
        sampler.start()
        eventer.start()
        fetched = subprocess.run(
            ["ip", "netns", "exec", ns(CLIENT), *role(
                "fetch", "--size", str(self.size), "--timeout", str(self.timeout),
                "--duration", str(self.measure_s), *(["--tcp"] if not self.mptcp else []))],
            capture_output=True, text=True, timeout=self.timeout + 120)
        self.stop_sampling.set()
        sampler.join()
        eventer.join()
        if fetched.returncode:
            raise RuntimeError(f"the fetch failed: {fetched.stderr.strip()[-500:]}")
        result: dict[str, Any] = json.loads(fetched.stdout)
        return result

    def stop(self) -> None:
        """End every process; the background flows' records; the captures drained."""
        procs = [*self.bulk, *([self.server] if self.server is not None else [])]
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in self.bulk:
            with contextlib.suppress(Exception):
                text, _ = p.communicate(timeout=30)
                if text and text.strip():
                    self.background.append(json.loads(text))
        time.sleep(0.5)  # let tcpdump drain what the kernel queued
        for _, dump in self.dumps:
            dump.terminate()
            dump.wait(timeout=30)
        for tracer in self.tracers:
            tracer.terminate()
            tracer.wait(timeout=30)

    def measurements(self, fetched: dict[str, Any], after: dict[str, int]) -> dict[str, Any]:
        """What paths.json holds: the fetch's record and what the captures and samples
        say."""
        topo = self.topo
        segments = [s for pcap, _ in self.dumps for s in segments_from_pcap(pcap, PORT)]
        series = queue_series(segments)
        per_path: dict[str, int] = {}
        for s in segments:
            path = topo.path_of_address(s.subflow[2])
            per_path[f"path{path}"] = per_path.get(f"path{path}", 0) + s.length
        return {
            **fetched,
            "topology": topo.to_dict()["paths"],
            "cc": self.cfg.cc, "scheduler": self.cfg.scheduler,
            "transport": self.cfg.transport,
            "events": self.applied,
            "subflows_seen": len({s.subflow for s in segments}),
            "bytes_per_path": per_path,
            "copied_share": round(copied_share([s.dsn for s in segments]), 5),
            "ofo_mean_pkts": round(mean_queue(series), 3),
            "ofo_series": sampled(series, SAMPLE_S),
            "subflow_mbps": rates(self.subflow_samples),
            "subflow_state": {"fields": ["t_s", *SUBFLOW_STATE], **self.subflow_state},
            "mptcp_counters": changed_counters(self.before, after),
            "background": self.background,
        }


def run_paths(cfg: Config, flow_type: str, out: Path,
              on_round: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """One run (see the module's description); writes captures under `out` and returns the
    measurements. The congestion controls it needs are allowed for the run only.
    `on_round(1, 1)` is called as the traffic starts (its one round)."""
    run = PathsRun(cfg, flow_type, out)
    out.mkdir(parents=True, exist_ok=True)
    previous = allow_cc(*run.congestion_controls())
    try:
        with paths_network(run.topo):
            run.set_hosts()
            try:
                run.start_captures()
                run.start_tracers()
                if on_round is not None:
                    on_round(1, 1)
                run.start_background()
                run.start_server()
                fetched = run.fetch()
                after = server_counters()
            finally:
                run.stop()
    finally:
        restore_allowed_cc(previous)
    return run.measurements(fetched, after)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="paths_run", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="one run of a kind: paths config; JSON on stdout")
    p.add_argument("config")
    p.add_argument("--flow-type", default=None)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    cfg = load(args.config, args.set)
    flow_type = args.flow_type or next(iter(cfg.flow_sizes()))
    print(json.dumps(run_paths(cfg, flow_type, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
