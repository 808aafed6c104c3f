"""Execute a workload on a running Network and return one row per transfer.

One `transfer.py serve` per host (MPTCP listening socket when the transport
is MPTCP; it accepts plain TCP too) is started before the first round and waited on.
Each request of a round is one `transfer.py fetch` in its client's namespace
with all its servers as targets; a round's fetches start together and the next round
starts when they all ended. A failed transfer (refused, timeout, short read, a fetch
that never answered) becomes a row with ok=False and the reason; the run goes on.

`plan_rows`, `fetch_argv` and `merge_fetch_output` are pure; `start_servers` and
`run_workload` run processes.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from pathdiv.experiments.fabric.environment import start_scale
from pathdiv.experiments.fabric.network import Network, NetworkError, wait_for_line
from pathdiv.experiments.traffic.workloads import Request, Round
from pathdiv.topologies.fattree import FatTree

log = logging.getLogger("pathdiv")

SERVER_READY_S = 20.0
FETCH_GRACE_S = 20.0  # process start and teardown on top of the transfer timeout


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


COLUMNS = [f.name for f in fields(TransferRow)]


@dataclass(frozen=True)
class Traffic:
    """What every transfer of a run shares."""

    flow_type: str
    size_bytes: int
    transport: str
    port: int
    timeout_s: float


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


def fetch_argv(rows: list[TransferRow], traffic: Traffic) -> list[str]:
    argv = ["fetch", *(f"{r.server_addr}:{r.server_port}:{r.size_bytes}" for r in rows),
            "--timeout", f"{traffic.timeout_s:g}"]
    return [*argv, "--mptcp"] if traffic.transport == "mptcp" else argv


def merge_fetch_output(rows: list[TransferRow], stdout: str, failure: str) -> None:
    """Fill `rows` from fetch's JSON lines (one per target, in target order).

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
        received = int(res.get("received", 0))
        row.ok = bool(res.get("ok")) and received == row.size_bytes
        row.error = "" if row.ok else (str(res.get("error") or "")
                                       or f"received {received} of {row.size_bytes} bytes")


def start_servers(net: Network, traffic: Traffic, logdir: Path, label: str = "server") -> None:
    """One transfer server per host, each waited on until it listens."""
    logdir.mkdir(parents=True, exist_ok=True)
    args = ["serve", "--port", str(traffic.port)]
    if traffic.transport == "mptcp":
        args.append("--mptcp")
    procs = []
    for host in net.topo.hosts:
        with (logdir / f"{label}-{host}.log").open("w") as err:
            procs.append((host, net.transfer(host, args, stderr=err)))
    for host, proc in procs:
        wait_for_line(proc, proc.stdout, "ready", SERVER_READY_S * start_scale(),
                      f"{label} on {host} (log: {logdir / f'{label}-{host}.log'})")


def run_workload(
    net: Network, plan: list[Round], traffic: Traffic, logdir: Path,
    on_round: Callable[[int, int], None] | None = None,
    on_start: Callable[[], None] | None = None,
) -> list[TransferRow]:
    """Start the servers, run every round, return every transfer's row. `on_start` is
    called once the servers listen, right before the first round."""
    start_servers(net, traffic, logdir)
    if on_start is not None:
        on_start()
    per_request = plan_rows(net.topo, plan, traffic)
    index = 0
    for n, rnd in enumerate(plan):
        batch = per_request[index:index + len(rnd)]
        index += len(rnd)
        _run_round(net, list(rnd), batch, traffic)
        if on_round is not None:
            on_round(n + 1, len(plan))
    return [row for rows in per_request for row in rows]


def _run_round(net: Network, requests: list[Request], batch: list[list[TransferRow]],
               traffic: Traffic) -> None:
    procs = []
    for req, rows in zip(requests, batch, strict=True):
        try:
            procs.append(net.transfer(req.client, fetch_argv(rows, traffic)))
        except (OSError, NetworkError) as exc:
            procs.append(None)
            for row in rows:
                row.error = f"could not start fetch on {req.client}: {exc}"
    grace = FETCH_GRACE_S * start_scale()
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
        merge_fetch_output(rows, out or "", failure)
        bad = [r for r in rows if not r.ok]
        if bad:
            log.warning("group %d (%s): %d of %d transfers failed: %s", req.group_id,
                        req.client, len(bad), len(rows), bad[0].error)


def row_dicts(rows: list[TransferRow]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]
