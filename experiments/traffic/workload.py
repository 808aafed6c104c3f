"""One run's traffic: the measured workload with what runs beside it.

`run_traffic` starts, in this order: the background load (`workload.background`) and the
request/response traffic (`workload.rpc`), both with their own servers and ports; then
the measured workload (rounds of `rounds.py`, or the `poisson` schedule), starting the
event timeline (`events.py`) the moment the measured servers listen. When the measured
workload ends, the timeline and the side traffic stop. Measured transfers go to
transfers.csv; background flows to background.csv and requests to requests.csv, so the
background is in the captures but never among the measured transfers (it uses another
server port, which is also how the analysis tells it apart).

Every agent writes its JSON lines to a file under the run's network/logs (never into a pipe
nobody reads while it runs).
"""

from __future__ import annotations

import json
import logging
import random
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pathdiv.experiments.config.checks import parse_size
from pathdiv.experiments.config.load import Config
from pathdiv.experiments.config.workloads import open_loop
from pathdiv.experiments.fabric.nodeprocs import wait_for_line
from pathdiv.experiments.manifest import write_csv_atomic
from pathdiv.experiments.network.network import Network
from pathdiv.experiments.plan.arrivals import (
    Flow,
    access_rate_mbps,
    arrivals,
    poisson_flows,
    size_cdf,
)
from pathdiv.experiments.plan.designations import derangement, rounds
from pathdiv.experiments.traffic.events import EventApplier, timeline
from pathdiv.experiments.traffic.rounds import (
    FETCH_GRACE_S,
    SERVER_READY_S,
    Traffic,
    TransferRow,
    run_workload,
    start_servers,
)

log = logging.getLogger("pathdiv")

AGENT_TOOL = Path(__file__).resolve().parent / "agent.py"
START_MARGIN_S = 1.0  # agents are started this long before their first flow
MAX_SIDE_HORIZON_S = 3600.0
BACKGROUND_CHUNK = 1_000_000  # bytes per fetch of the permutation background
BACKGROUND_COLUMNS = ["flow_id", "client", "server", "size_bytes", "start_s", "end_s", "ok",
                      "error"]
REQUEST_COLUMNS = ["client", "conn", "server_addr", "request", "sent_s", "done_s",
                   "latency_s", "ok", "error"]


@dataclass
class WorkloadResult:
    rows: list[TransferRow]
    rounds: int
    background: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    started_wall_s: float = 0.0
    offered: dict[str, Any] = field(default_factory=dict)
    instants: list[dict[str, int]] = field(default_factory=list)  # rounds.run_workload's


def background_flows(cfg: Config, hosts: list[str], seed: int,
                     horizon_s: float) -> list[Flow]:
    """The background flows over `horizon_s` (pure); [] when there is none."""
    w = cfg.data["workload"]
    bg = w["background"]
    if bg["pattern"] == "none":
        return []
    rate = access_rate_mbps(cfg)
    if bg["pattern"] == "permutation":
        partners = derangement(sorted(hosts), random.Random(f"pathdiv-background|{seed}"))
        cdf = [(float(BACKGROUND_CHUNK), 0.0), (float(BACKGROUND_CHUNK), 1.0)]
        return arrivals(hosts, rate, cdf, float(bg["load"]), horizon_s, seed,
                        "background", partners)
    cap = parse_size(w["max_size"]) if w["max_size"] is not None else None
    return arrivals(hosts, rate, size_cdf(str(w["sizes"]), cap), float(bg["load"]),
                    horizon_s, seed, "background")


def schedule_files(net: Network, flows: list[Flow], port: int,
                   folder: Path) -> dict[str, Path]:
    """client -> JSON schedule file of its flows."""
    folder.mkdir(parents=True, exist_ok=True)
    per: dict[str, list[list[Any]]] = {}
    for f in flows:
        per.setdefault(f.client, []).append(
            [f.flow_id, f.at_s, net.topo.nodes[f.server].address, port, f.size_bytes])
    out = {}
    for client, items in per.items():
        path = folder / f"{client}.json"
        path.write_text(json.dumps(items))
        out[client] = path
    return out


def read_lines(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    try:
        text = path.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


class Agents:
    """Agent processes of one kind, their output files, and their end."""

    def __init__(self, net: Network, logdir: Path, label: str) -> None:
        self.net, self.logdir, self.label = net, logdir, label
        self.procs: list[tuple[str, subprocess.Popen[str], Path]] = []

    def start(self, host: str, args: list[str]) -> None:
        self.logdir.mkdir(parents=True, exist_ok=True)
        out = self.logdir / f"{self.label}-{host}.jsonl"
        with out.open("w") as fh, (self.logdir / f"{self.label}-{host}.log").open("w") as err:
            proc = self.net.popen(host, [sys.executable, "-S", "-u", str(AGENT_TOOL), *args],
                                  stdout=fh, stderr=err)
        self.procs.append((host, proc, out))

    def wait(self, timeout_s: float) -> list[str]:
        """Wait for every agent to end by itself; stop the late ones; name them."""
        deadline = time.monotonic() + timeout_s
        late = []
        for host, proc, _ in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                late.append(host)
            self.net.end(proc)
        return late

    def stop(self) -> None:
        for _, proc, _ in self.procs:
            self.net.end(proc)

    def results(self) -> list[tuple[str, dict[str, Any]]]:
        return [(host, rec) for host, _, path in self.procs for rec in read_lines(path)]


def start_rpc_servers(net: Network, port: int, mptcp: bool, logdir: Path) -> None:
    procs = []
    for host in net.topo.hosts:
        argv = [sys.executable, "-S", "-u", str(AGENT_TOOL), "rpc-serve", "--port", str(port)]
        with (logdir / f"rpc-server-{host}.log").open("w") as err:
            procs.append((host, net.popen(host, [*argv, *(["--mptcp"] if mptcp else [])],
                                          stderr=err)))
    for host, proc in procs:
        wait_for_line(proc, proc.stdout, "ready", SERVER_READY_S,
                      f"request/response server on {host}")


def start_background(net: Network, cfg: Config, seed: int, traffic: Traffic, logdir: Path,
                     horizon: float) -> tuple[Agents, int] | None:
    """The background load's servers and schedules, started (its agents, its flows), or
    None when the config has none."""
    bg_flows = background_flows(cfg, net.topo.hosts, seed, horizon)
    if not bg_flows:
        return None
    bg = cfg.data["workload"]["background"]
    start_servers(net, Traffic("background", 0, traffic.transport, int(bg["port"]),
                               traffic.timeout_s), logdir, "background-server")
    files = schedule_files(net, bg_flows, int(bg["port"]), logdir / "background")
    start = time.time() + START_MARGIN_S
    agents = Agents(net, logdir, "background")
    for host, path in files.items():
        agents.start(host, ["schedule", str(path), "--start", f"{start:.6f}",
                            "--timeout", f"{traffic.timeout_s:g}",
                            *(["--mptcp"] if traffic.transport == "mptcp" else [])])
    return agents, len(bg_flows)


def start_rpc(net: Network, cfg: Config, seed: int, traffic: Traffic, logdir: Path,
              horizon: float) -> Agents | None:
    """The request/response traffic's servers and clients, started, or None when the
    config has none."""
    rpc = cfg.data["workload"]["rpc"]
    if float(rpc["rate_per_s"]) <= 0:
        return None
    mptcp = traffic.transport == "mptcp"
    hosts = net.topo.hosts
    start_rpc_servers(net, int(rpc["port"]), mptcp, logdir)
    start = time.time() + START_MARGIN_S
    agents = Agents(net, logdir, "rpc")
    for i, host in enumerate(hosts):
        rng = random.Random(f"pathdiv-rpc-targets|{seed}|{host}")
        others = [h for h in hosts if h != host]
        targets = [f"{net.topo.nodes[rng.choice(others)].address}:{rpc['port']}"
                   for _ in range(int(rpc["connections"]))]
        agents.start(host, ["rpc", *targets, "--rate", f"{float(rpc['rate_per_s']):g}",
                            "--request", str(parse_size(rpc["request_size"])),
                            "--response", str(parse_size(rpc["response_size"])),
                            "--duration", f"{horizon:g}", "--start", f"{start:.6f}",
                            "--seed", str(seed * 1000 + i),
                            *(["--mptcp"] if mptcp else [])])
    return agents


def run_traffic(net: Network, cfg: Config, seed: int, traffic: Traffic, logdir: Path,
                on_round: Callable[[int, int], None] | None = None) -> WorkloadResult:
    """Side traffic, then the measured workload with the event timeline; see the module."""
    logdir.mkdir(parents=True, exist_ok=True)
    w = cfg.data["workload"]
    hosts = net.topo.hosts
    poisson = open_loop(w["pattern"])
    plan = [] if poisson else rounds(str(w["pattern"]), hosts, seed, int(w["iterations"]),
                                     int(w["requests"]))
    horizon = float(w["duration_s"]) + traffic.timeout_s if poisson else \
        min(MAX_SIDE_HORIZON_S, max(1, len(plan)) * traffic.timeout_s)
    applier = EventApplier(net, timeline(cfg.data["events"]))
    result = WorkloadResult([], len(plan))
    side: list[Agents] = []
    try:
        background = start_background(net, cfg, seed, traffic, logdir, horizon)
        if background is not None:
            side.append(background[0])
            result.offered["background_flows"] = background[1]
        rpc = start_rpc(net, cfg, seed, traffic, logdir, horizon)
        if rpc is not None:
            side.append(rpc)

        def begin() -> None:
            result.started_wall_s = time.time()
            applier.start()

        if poisson:
            result.rows = _run_poisson(net, cfg, seed, traffic, logdir, begin, result)
        else:
            result.rows = run_workload(net, plan, traffic, logdir, on_round, begin,
                                       result.instants)
    finally:
        result.events = applier.stop() if applier.is_alive() or applier.records else []
        for agents in side:
            agents.stop()
    for agents in side:
        for host, rec in agents.results():
            if agents.label == "background":
                result.background.append({"client": host, **rec})
            else:
                result.requests.append({"client": host, **rec})
    return result


def _run_poisson(net: Network, cfg: Config, seed: int, traffic: Traffic, logdir: Path,
                 begin: Callable[[], None], result: WorkloadResult) -> list[TransferRow]:
    flows = poisson_flows(cfg, net.topo.hosts, seed)
    rows = {f.flow_id: TransferRow(
        f.flow_id, f.flow_id, traffic.flow_type, traffic.transport, f.client, f.server,
        net.topo.nodes[f.client].address, net.topo.nodes[f.server].address, traffic.port,
        size_bytes=f.size_bytes, error="not run") for f in flows}
    duration = float(cfg.data["workload"]["duration_s"])
    result.offered.update(flows=len(flows), offered_bytes=sum(f.size_bytes for f in flows),
                          duration_s=duration)
    start_servers(net, traffic, logdir)
    files = schedule_files(net, flows, traffic.port, logdir / "poisson")
    start = time.time() + START_MARGIN_S
    agents = Agents(net, logdir, "poisson")
    for host, path in files.items():
        agents.start(host, ["schedule", str(path), "--start", f"{start:.6f}",
                            "--timeout", f"{traffic.timeout_s:g}",
                            *(["--mptcp"] if traffic.transport == "mptcp" else [])])
    time.sleep(max(0.0, start - time.time()))
    begin()
    late = agents.wait(START_MARGIN_S + duration + traffic.timeout_s
                       + FETCH_GRACE_S)
    if late:
        log.warning("poisson agents on %s did not finish; they were stopped", ", ".join(late))
    for _, rec in agents.results():
        row = rows.get(int(rec.get("flow_id", -1)))
        if row is None:
            continue
        row.client_port = int(rec.get("client_port", 0))
        row.start_s, row.end_s = float(rec.get("start_s", 0)), float(rec.get("end_s", 0))
        row.subflows = int(rec.get("subflows", 0))
        row.ok = bool(rec.get("ok")) and int(rec.get("received", 0)) == row.size_bytes
        row.error = "" if row.ok else str(rec.get("error") or "short read")
    for row in rows.values():
        if row.error == "not run":
            row.error = "the agent was stopped before this flow ended"
    return [rows[i] for i in sorted(rows)]


def workload_manifest(result: WorkloadResult, run_dir: Path) -> dict[str, Any]:
    """Write background.csv and requests.csv (when there were any); the manifest's
    `traffic` entry: workload start (wall clock, the captures' clock), the events as
    applied, and what the side traffic offered and got."""
    out: dict[str, Any] = {"workload_start_wall_s": result.started_wall_s,
                           "events": result.events}
    if result.background:
        rows = [{k: r.get(k, "") for k in BACKGROUND_COLUMNS} for r in result.background]
        write_csv_atomic(run_dir / "background.csv", BACKGROUND_COLUMNS, rows)
    if result.requests:
        rows = [{k: r.get(k, "") for k in REQUEST_COLUMNS} for r in result.requests]
        write_csv_atomic(run_dir / "requests.csv", REQUEST_COLUMNS, rows)
    ok_latency = sorted(float(r["latency_s"]) for r in result.requests
                        if r.get("ok") and r.get("latency_s") is not None)
    out["side_traffic"] = {
        **result.offered,
        "background_ok": sum(1 for r in result.background if r.get("ok")),
        "background_done": len(result.background),
        "requests_ok": len(ok_latency),
        "requests_failed": sum(1 for r in result.requests if not r.get("ok")),
        "request_latency_p50_s": _quantile(ok_latency, 0.5),
        "request_latency_p99_s": _quantile(ok_latency, 0.99),
    }
    return out


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return values[min(len(values) - 1, int(q * len(values)))]
