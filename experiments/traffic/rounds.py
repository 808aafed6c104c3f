"""Execute a workload on a running Network and return one row per transfer.

One `transfer.py serve` per host (MPTCP listening socket when the transport
is MPTCP; it accepts plain TCP too) is started before the first round and waited on.
Each request of a round is one `transfer.py fetch` in its client's namespace
with all its servers as targets; a round's fetches start together and the next round
starts when they all ended. A failed transfer (refused, timeout, short read, a fetch
that never answered) becomes a row with ok=False and the reason; the run goes on.

Each server logs the CPU time of every request it answered (`cpu_log_name`:
`server-<host>.cpu.jsonl`); `merge_server_cpu` puts it on the transfer's row beside the
client's (`cpu_ms`). With
`hosts.subflow_paths` other than `hashed`, every fetch gets its subflows' addresses and
ports from `experiments/traffic/placement.py` and the servers accept joins under the
userspace path manager.

`plan_rows`, `fetch_argv`, `merge_fetch_output` and `merge_server_cpu` are pure;
`start_servers` and `run_workload` run processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import random
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import pathdiv.analysis.safefiles as safefiles
from pathdiv.experiments.config.checks import MAX_TRANSFERS
from pathdiv.experiments.dataplane.ecmp_model import PathModel
from pathdiv.experiments.fabric.environment import virtual_clock
from pathdiv.experiments.fabric.nodeprocs import wait_for_line
from pathdiv.experiments.network.network import Network
from pathdiv.experiments.plan.designations import Request, Round
from pathdiv.experiments.plan.memory import PER_SHARED, SHARED_ABOVE
from pathdiv.experiments.running import NetworkError
from pathdiv.experiments.traffic.clockgrid import ROUND_GAP_NS
from pathdiv.experiments.traffic.placement import Placement, place_argv
from pathdiv.topologies.fattree import FatTree

log = logging.getLogger("pathdiv")

SERVER_READY_S = 20.0
FETCH_GRACE_S = 20.0  # process start and teardown on top of the transfer timeout
# On the virtual clock a round of more requests than SHARED_ABOVE runs its fetches in
# shared processes of at most PER_SHARED requests each (`shared_fetch_argv`): a fetch
# process holds about 12 MB of its own (plan/memory.py), so a k=16 permutation's 1,024
# fetches would take 12 GB of the guest, and its 1,024 process starts a minute of host
# time. Rounds up to SHARED_ABOVE (a k=8 permutation's 128) keep a process per request,
# as before.


@dataclass
class TransferRow:
    """One line of transfers.csv (column order = field order)."""

    transfer_id: int
    group_id: int
    flow_type: str
    transport: str
    client: str
    server: str
    client_addr: str
    server_addr: str
    server_port: int
    client_port: int = 0
    size_bytes: int = 0
    start_s: float = 0.0
    end_s: float = 0.0
    ok: bool = False
    error: str = ""
    subflows: int = 0
    cpu_ms: float = float("nan")  # client thread CPU (user + system), real clock
    server_cpu_ms: float = float("nan")  # server thread CPU for this request
    placed: str = ""  # subflows pathdiv opened, addr:port;... (empty for hashed)


COLUMNS = [f.name for f in fields(TransferRow)]


@dataclass(frozen=True)
class Traffic:
    """What every transfer of a run shares."""

    flow_type: str
    size_bytes: int
    transport: str
    port: int
    timeout_s: float
    placement: Placement | None = None
    seed: int = 0  # draws the placement's ports and path offsets
    start_ns: int | None = None  # virtual clock: the first round's instant (clockgrid.py)
    fifo: bool = False  # servers and fetches under SCHED_FIFO (`at_instant`)
    join_first: int = 0  # MPTCP: subflows that join before data (hosts.join_before_data)


def with_placement(traffic: Traffic, subflow_paths: str, subflows: int, net: Network,
                   seed: int) -> Traffic:
    """`traffic` with the run's subflow placement (hash model of the running network)."""
    if traffic.transport != "mptcp" or subflow_paths == "hashed":
        return traffic
    model = PathModel(net.topo, net.tables, net.plane.name)
    return dataclasses.replace(traffic, placement=Placement(model, subflow_paths, subflows),
                               seed=seed)


def plan_rows(topo: FatTree, plan: list[Round], traffic: Traffic) -> list[list[TransferRow]]:
    """Per request (in execution order), its not-yet-run rows; ids count from 0."""
    out: list[list[TransferRow]] = []
    tid = 0
    for rnd in plan:
        for req in rnd:
            rows = []
            for server in req.servers:
                rows.append(TransferRow(
                    tid, req.group_id, traffic.flow_type, traffic.transport, req.client,
                    server, topo.nodes[req.client].address, topo.nodes[server].address,
                    traffic.port, size_bytes=traffic.size_bytes,
                    error="not run",
                ))
                tid += 1
            out.append(rows)
    return out


def at_instant(traffic: Traffic, start_ns: int) -> Traffic:
    """`traffic` on the virtual clock: its first round at `start_ns` (clockgrid.py), and,
    for TCP, its servers and fetches under SCHED_FIFO: one order of wake-ups whatever ran
    before in the boot (transfer.first_in_first_out; the runner puts the data plane's
    forwarding processes there too, `DataPlane.first_in_first_out`). Not for MPTCP: its
    path manager works in kernel workers, which a real-time thread holds off."""
    return dataclasses.replace(traffic, start_ns=start_ns, fifo=traffic.transport == "tcp")


def fetch_argv(rows: list[TransferRow], traffic: Traffic,
               rng: random.Random | None = None, start_ns: int | None = None) -> list[str]:
    argv = ["fetch", *(f"{r.server_addr}:{r.server_port}:{r.size_bytes}" for r in rows),
            "--timeout", f"{traffic.timeout_s:g}"]
    if start_ns is not None:  # the virtual clock (clockgrid.py)
        argv += ["--start-ns", str(start_ns), *(["--fifo"] if traffic.fifo else [])]
    if traffic.transport != "mptcp":
        return argv
    if traffic.join_first > 1:
        argv += ["--join-first", str(traffic.join_first)]
    if rows and traffic.placement is not None:
        argv += place_argv(traffic.placement, rows[0].client,
                           [(r.server_addr, r.server_port) for r in rows],
                           rng or random.Random(traffic.seed))
    return [*argv, "--mptcp"]


def shared_fetch_argv(batch: list[tuple[int, int, list[TransferRow]]], traffic: Traffic,
                      start_ns: int) -> list[str]:
    """The argv of one shared fetch: (request index in the round, pid of a process in
    its client's namespace, its rows) per request; each target carries its client and
    request (transfer.Target), and its thread sleeps until start_ns + the index."""
    argv = ["fetch", *(f"{r.server_addr}:{r.server_port}:{r.size_bytes}@{pid}+{i}"
                       for i, pid, rows in batch for r in rows),
            "--timeout", f"{traffic.timeout_s:g}", "--start-ns", str(start_ns)]
    argv += ["--fifo"] if traffic.fifo else []
    return argv + (["--mptcp"] if traffic.transport == "mptcp" else [])


def shared(traffic: Traffic, requests: int, start_ns: int | None) -> bool:
    """Whether a round of `requests` starting at `start_ns` (None: the real clock) runs
    its fetches in shared processes."""
    return (start_ns is not None and requests > SHARED_ABOVE
            and (traffic.placement is None or not traffic.placement.active))


def merge_fetch_output(rows: list[TransferRow], stdout: str, failure: str
                       ) -> list[dict[str, Any]]:
    """Fill `rows` from fetch's JSON lines (one per target, in target order); return
    the lines.

    A target without a line keeps ok=False with `failure` (or what fetch said) as error.
    """
    results: list[dict[str, Any]] = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                results.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    for i, row in enumerate(rows):
        res = results[i] if i < len(results) else None
        if res is None or res.get("server_addr") != row.server_addr:
            res = next((r for r in results if r.get("server_addr") == row.server_addr), None)
        if res is None:
            row.ok, row.error = False, failure or "fetch printed no result for this server"
            continue
        row.client_port = int(res.get("client_port", 0))
        row.start_s = float(res.get("start_s", 0.0))
        row.end_s = float(res.get("end_s", 0.0))
        row.subflows = int(res.get("subflows", 0))
        row.cpu_ms = float(res.get("cpu_ms", float("nan")))
        row.placed = str(res.get("placed", ""))
        received = int(res.get("received", 0))
        row.ok = bool(res.get("ok")) and received == row.size_bytes
        row.error = "" if row.ok else (str(res.get("error") or "")
                                       or f"received {received} of {row.size_bytes} bytes")
    return results


def merge_server_cpu(rows: list[TransferRow], logs: dict[str, list[dict[str, Any]]]) -> None:
    """Give each row its server's CPU time: `logs` maps a server host to its CPU log's
    records, matched by the client's address and port (first unused record wins)."""
    used: set[tuple[str, int]] = set()
    for row in rows:
        for i, rec in enumerate(logs.get(row.server, [])):
            if ((row.server, i) not in used and rec.get("client_addr") == row.client_addr
                    and int(rec.get("client_port", -1)) == row.client_port):
                row.server_cpu_ms = float(rec.get("cpu_ms", float("nan")))
                used.add((row.server, i))
                break


SERVER_LABEL = "server"  # the transfer servers' files: <label>-<host>.cpu.jsonl, <label>.log
# A CPU record is about 100 bytes (client address and port, bytes, cpu_ms); a server
# answers at most a run's MAX_TRANSFERS requests: a larger log is not one of ours
CPU_RECORD_BYTES = 200
CPU_LOG_BYTES = MAX_TRANSFERS * CPU_RECORD_BYTES


def cpu_log_name(host: str, label: str = SERVER_LABEL) -> str:
    """The name of `host`'s server CPU log in the run's log folder (`start_servers`)."""
    return f"{label}-{host}.cpu.jsonl"


def read_cpu_logs(logdir: Path, hosts: list[str], label: str = SERVER_LABEL,
                  refused: set[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Each server host's CPU log records so far; a line still being written is skipped.
    A guest's or a namespace's process wrote the logs: each is read through no link and
    at most CPU_LOG_BYTES (analysis/safefiles.py); a log refused (a link, no regular
    file, larger) is said in the log, reads as no records and its host goes into
    `refused`."""
    out: dict[str, list[dict[str, Any]]] = {}
    if not hosts:
        return out
    try:
        dirfd = safefiles.open_dir(safefiles.resolve_physical(logdir))
    except FileNotFoundError:
        return out
    try:
        for host in hosts:
            name = cpu_log_name(host, label)
            try:
                text = safefiles.read_beneath(dirfd, name, CPU_LOG_BYTES).decode(
                    "utf-8", errors="replace")
            except FileNotFoundError:
                continue
            except OSError as exc:  # FileRefused among them
                log.warning("server CPU log of %s not read: %s", host,
                            safefiles.printable(str(exc)))
                out[host] = []
                if refused is not None:
                    refused.add(host)
                continue
            records = []
            for line in text.splitlines():
                if line.startswith("{"):
                    with contextlib.suppress(json.JSONDecodeError):
                        records.append(json.loads(line))
            out[host] = records
    finally:
        os.close(dirfd)
    return out


SERVER_LOG_WAIT_S = 2.0  # how long a server may take to log a request its client has read


def collect_server_cpu(rows: list[TransferRow], logdir: Path, hosts: list[str],
                       wait_s: float = SERVER_LOG_WAIT_S, label: str = SERVER_LABEL) -> None:
    """Merge the servers' CPU logs into `rows`. A server logs a request once its handler
    returns, which can be after its client has read the last byte: until every completed
    transfer has its server's record, or for `wait_s`, read again the logs of the servers
    whose records are missing, and only theirs (sleeping between reads, as every wait
    must on the virtual clock). A log that cannot be read is not waited for."""
    deadline = time.monotonic() + wait_s
    logged = set(hosts)
    refused: set[str] = set()
    pending = sorted({r.server for r in rows} & logged)
    while True:
        logs = read_cpu_logs(logdir, pending, label, refused)
        mine = set(pending)
        # every row of a server read again, in order: a record goes to the first row
        # of its client's address and port, as when all were read at once
        merge_server_cpu([r for r in rows if r.server in mine], logs)
        pending = sorted({r.server for r in rows if r.ok and r.server in logged
                          and r.server_cpu_ms != r.server_cpu_ms} - refused)
        if not pending or time.monotonic() >= deadline:
            return
        time.sleep(0.02)


def start_servers(net: Network, traffic: Traffic, logdir: Path, label: str = SERVER_LABEL
                  ) -> None:
    """One transfer server per host, each waited on until it listens; on the virtual
    clock one server process for every host (`serve --namespace`: a listening socket
    in each host's namespace), unless the servers must accept joins under the userspace
    path manager. The lab kernel's process starts cost tens of milliseconds of host
    time each, and on the virtual clock one process's threads take no more guest time
    than sixteen processes."""
    logdir.mkdir(parents=True, exist_ok=True)
    args = ["serve", "--port", str(traffic.port)]
    joins = traffic.placement is not None and traffic.placement.active
    if traffic.transport == "mptcp":
        args.append("--mptcp")
        if joins:
            args.append("--userspace-pm")
    if traffic.fifo:
        args.append("--fifo")
    if virtual_clock() and not (traffic.transport == "mptcp" and joins):
        spaces = [f"--namespace={net.node(h).pid}:{logdir / cpu_log_name(h, label)}"
                  for h in net.topo.hosts]
        with (logdir / f"{label}.log").open("w") as err:
            proc = net.transfer_here(args + spaces, stderr=err)
        wait_for_line(proc, proc.stdout, "ready", SERVER_READY_S,
                      f"{label} for every host (log: {logdir / f'{label}.log'})")
        return
    procs = []
    for host in net.topo.hosts:
        cpu_log = ["--cpu-log", str(logdir / cpu_log_name(host, label))]
        with (logdir / f"{label}-{host}.log").open("w") as err:
            procs.append((host, net.transfer(host, args + cpu_log, stderr=err)))
    for host, proc in procs:
        wait_for_line(proc, proc.stdout, "ready", SERVER_READY_S,
                      f"{label} on {host} (log: {logdir / f'{label}-{host}.log'})")


def run_workload(
    net: Network, plan: list[Round], traffic: Traffic, logdir: Path,
    on_round: Callable[[int, int], None] | None = None,
    on_start: Callable[[], None] | None = None,
    instants: list[dict[str, int]] | None = None,
) -> list[TransferRow]:
    """Start the servers, run every round, return every transfer's row. `on_start` is
    called once the servers listen, right before the first round. On the virtual clock
    (`traffic.start_ns`) every round starts at an instant (clockgrid.py); `instants`
    receives each round's and how late its latest fetch reached it."""
    start_servers(net, traffic, logdir)
    if on_start is not None:
        on_start()
    per_request = plan_rows(net.topo, plan, traffic)
    rng = random.Random(f"pathdiv-placement|{traffic.seed}")
    index = 0
    start = traffic.start_ns
    for n, rnd in enumerate(plan):
        batch = per_request[index:index + len(rnd)]
        index += len(rnd)
        ended, late = _run_round(net, list(rnd), batch, traffic, rng, start)
        if late:
            log.warning("round %d: a fetch reached the round's instant %.3f ms late; its "
                        "traffic did not start at the planned instant (clockgrid.py)",
                        n + 1, late / 1e6)
        if start is not None:  # the next round: a fixed gap after this one's last transfer
            if instants is not None:
                instants.append({"round": n + 1, "start_ns": start, "late_ns": late})
            start = (ended or time.monotonic_ns()) + ROUND_GAP_NS
        if on_round is not None:
            on_round(n + 1, len(plan))
    rows = [row for rows in per_request for row in rows]
    collect_server_cpu(rows, logdir, net.topo.hosts)
    return rows


def _run_round(net: Network, requests: list[Request], batch: list[list[TransferRow]],
               traffic: Traffic, rng: random.Random, start_ns: int | None = None
               ) -> tuple[int, int]:
    """Run one round's fetches (the i-th sleeping until `start_ns` + i ns, if given);
    return when its last transfer ended (CLOCK_MONOTONIC ns, 0 if none said) and how
    late the latest fetch reached its instant (ns)."""
    if start_ns is not None and shared(traffic, len(requests), start_ns):
        return _run_shared_round(net, requests, batch, traffic, start_ns)
    procs: list[subprocess.Popen[str] | None] = []
    ended, late = 0, 0
    for i, (req, rows) in enumerate(zip(requests, batch, strict=True)):
        at = None if start_ns is None else start_ns + i
        try:
            procs.append(net.transfer(req.client, fetch_argv(rows, traffic, rng, at)))
        except (OSError, NetworkError) as exc:
            procs.append(None)
            for row in rows:
                row.error = f"could not start fetch on {req.client}: {exc}"
    grace = FETCH_GRACE_S
    deadline = time.monotonic() + traffic.timeout_s + grace
    for req, rows, proc in zip(requests, batch, procs, strict=True):
        if proc is None:
            continue
        try:
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            failure = f"fetch exited {proc.returncode}: {(err or '').strip()[-300:]}"
        except subprocess.TimeoutExpired:
            net.end(proc)
            out, err = "", ""
            failure = (f"fetch on {req.client} did not finish within "
                       f"{traffic.timeout_s + grace:g} s; it was stopped")
        net.end(proc)
        for res in merge_fetch_output(rows, out or "", failure):
            ended = max(ended, int(res.get("end_ns", 0)))
            late = max(late, int(res.get("late_ns", 0)))
        bad = [r for r in rows if not r.ok]
        if bad:
            log.warning("group %d (%s): %d of %d transfers failed: %s", req.group_id,
                        req.client, len(bad), len(rows), bad[0].error)
    return ended, late


def _run_shared_round(net: Network, requests: list[Request], batch: list[list[TransferRow]],
                      traffic: Traffic, start_ns: int) -> tuple[int, int]:
    """`_run_round` with the fetches in shared processes (`shared_fetch_argv`), started in
    this kernel's own namespace; each result line names its request."""
    items = [(i, int(net.node(req.client).pid), rows)
             for i, (req, rows) in enumerate(zip(requests, batch, strict=True))]
    parts = [items[j:j + PER_SHARED] for j in range(0, len(items), PER_SHARED)]
    procs: list[subprocess.Popen[str] | None] = []
    for part in parts:
        try:
            procs.append(net.transfer_here(shared_fetch_argv(part, traffic, start_ns)))
        except OSError as exc:
            procs.append(None)
            for _, _, rows in part:
                for row in rows:
                    row.error = f"could not start a shared fetch: {exc}"
    deadline = time.monotonic() + traffic.timeout_s + FETCH_GRACE_S
    ended, late = 0, 0
    for part, proc in zip(parts, procs, strict=True):
        if proc is None:
            continue
        try:
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            failure = f"shared fetch exited {proc.returncode}: {(err or '').strip()[-300:]}"
        except subprocess.TimeoutExpired:
            net.end(proc)
            out, failure = "", "a shared fetch did not finish in time; it was stopped"
        net.end(proc)
        lines: dict[int, list[str]] = {}
        for line in (out or "").splitlines():
            if line.startswith("{"):
                with contextlib.suppress(json.JSONDecodeError, ValueError):
                    lines.setdefault(int(json.loads(line).get("request", -1)), []).append(line)
        for i, _, rows in part:
            for res in merge_fetch_output(rows, "\n".join(lines.get(i, [])), failure):
                ended = max(ended, int(res.get("end_ns", 0)))
                late = max(late, int(res.get("late_ns", 0)))
            bad = [r for r in rows if not r.ok]
            if bad:
                log.warning("group %d (%s): %d of %d transfers failed: %s",
                            requests[i].group_id, requests[i].client, len(bad), len(rows),
                            bad[0].error)
    return ended, late


def row_dicts(rows: list[TransferRow]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]
