"""`pathdiv probe`: does the data plane spread traffic as its mode promises?

For one client/server pair in different pods it measures, per core switch, the
packets forwarded towards the client's pod (the data direction: the server sends,
the client fetches) during (a) 16 concurrent TCP flows, (b) one MPTCP connection
with N subflows and (c) one TCP flow; then the goodput of (c) and of four more such
single-flow transfers, each as a fraction of the path's configured rate, with the CPU
the hypervisor stole during each (/proc/stat). The median is `goodput_fraction`; the
fidelity monitor watches the five and gives them a verdict (docs/fidelity.md). Under
`hosts.subflow_paths: disjoint | eliminate` (b) opens its subflows where the placement
says (`placed` in the output).
"""

from __future__ import annotations

import json
import logging
import platform
import random
import statistics
from dataclasses import dataclass
from typing import Any

from pathdiv.experiments.dataplane.ecmp_model import PathModel
from pathdiv.experiments.execute.boot import guest_kernel_description
from pathdiv.experiments.fabric.nodeprocs import wait_for_line
from pathdiv.experiments.fidelity.monitor import core_shares, parse_proc_stat, read_proc
from pathdiv.experiments.fidelity.record import build_record, lab_monitor, machine_clock
from pathdiv.experiments.network.network import Network
from pathdiv.experiments.running import NetworkError
from pathdiv.experiments.traffic.placement import Placement, place_argv
from pathdiv.topologies.fattree import FatTree

PORT = 5001
log = logging.getLogger("pathdiv")
TCP_FLOWS = 16
TCP_FLOW_BYTES = 512_000
MPTCP_BYTES = 4_000_000
SINGLE_BYTES = 10_000_000
SERIES = 5  # single-flow transfers measured for goodput, one after another


@dataclass(frozen=True)
class ProbePlan:
    client: str
    server: str

    @classmethod
    def for_topology(cls, topo: FatTree) -> ProbePlan:
        """First host of pod 0 fetches from the last host of the last pod."""
        if topo.k < 4:
            raise NetworkError("the probe needs hosts in different pods with several core "
                           f"paths: k >= 4, got k={topo.k}")
        return cls(client=topo.hosts[0], server=topo.hosts[-1])


def core_ports_towards(topo: FatTree, host: str) -> dict[str, str]:
    """core switch -> its interface towards `host`'s pod."""
    pod = topo.nodes[host].pod
    return {
        core: next(lk.b.intf for lk in topo.links_of(core) if topo.nodes[lk.a.node].pod == pod)
        for core in topo.cores
    }


def per_core_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {core: after[core] - before[core] for core in before}


def path_rate_mbps(topo: FatTree, client: str, server: str) -> float | None:
    rates = [lk.params.bw_mbps for lk in topo.path_links(topo.paths(server, client)[0])]
    return None if any(r is None for r in rates) else min(r for r in rates if r is not None)


def _core_tx(net: Network, ports: dict[str, str]) -> dict[str, int]:
    counters = net.counters_of(list(ports))
    return {core: counters[core][intf].tx_packets for core, intf in ports.items()}


def _settled_core_tx(net: Network, ports: dict[str, str]) -> dict[str, int]:
    """Core counters once they stop moving: closing handshakes of the previous phase
    must not be counted in the next one."""
    net.wait_quiet(list(ports))
    return _core_tx(net, ports)


def probe_fetch(net: Network, plan: ProbePlan, sizes: list[int], mptcp: bool
                ) -> list[dict[str, Any]]:
    """One transfer per size from the plan's server to its client (one `transfer.py
    fetch`, placed subflows under MPTCP); fetch's result lines, each checked ok."""
    addr = net.topo.nodes[plan.server].address
    args = [f"{addr}:{PORT}:{n}" for n in sizes] + ["--timeout", "300"]
    if mptcp:
        args.append("--mptcp")
        args += place_argv(placement_of(net), plan.client, [(addr, PORT)] * len(sizes),
                           random.Random(f"pathdiv-probe|{net.cfg.seed}"))
    proc = net.transfer(plan.client, ["fetch", *args])
    out, err = proc.communicate(timeout=330)
    results = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    bad = [r for r in results if not r["ok"]]
    if len(results) != len(sizes) or bad:
        detail = bad[0]["error"] if bad else err.strip()[-300:]
        raise NetworkError(f"probe transfer {plan.client} <- {plan.server} failed: {detail}")
    return results


def placement_of(net: Network) -> Placement | None:
    """The network's subflow placement (None when the kernel's path manager places)."""
    if net.cfg.subflow_paths == "hashed" or net.cfg.transport != "mptcp":
        return None
    return Placement(PathModel(net.topo, net.tables, net.plane.name), net.cfg.subflow_paths,
                     net.cfg.subflows)
def measured_clock() -> str:
    """The clock the probe's rates are measured on: the lab kernel's (virtual or real)
    inside it, the wall clock ("real") anywhere else."""
    return str((guest_kernel_description() or {}).get("clock", "real"))


def run_probe(net: Network) -> dict[str, Any]:
    topo = net.topo
    plan = ProbePlan.for_topology(topo)
    argv = ["serve", "--port", str(PORT), "--mptcp"]
    if placement_of(net) is not None:
        argv.append("--userspace-pm")
    server = net.transfer(plan.server, argv)
    try:
        return _measure(net, plan, server)
    finally:
        net.end(server)


def _measure(net: Network, plan: ProbePlan, server: Any) -> dict[str, Any]:
    topo = net.topo
    wait_for_line(server, server.stdout, "ready", 15, f"transfer server on {plan.server}")
    log.info("probe: server on %s ready; measuring %s <- %s", plan.server, plan.client,
             plan.server)
    ports = core_ports_towards(topo, plan.client)

    def phase(sizes: list[int], mptcp: bool) -> tuple[dict[str, int], list[dict[str, Any]]]:
        before = _settled_core_tx(net, ports)
        results = probe_fetch(net, plan, sizes, mptcp)
        return per_core_delta(before, _settled_core_tx(net, ports)), results

    flows, _ = phase([TCP_FLOW_BYTES] * TCP_FLOWS, mptcp=False)
    mp, mp_res = phase([MPTCP_BYTES], mptcp=True)
    rate = path_rate_mbps(topo, plan.client, plan.server)
    section = net.cfg.data["fidelity"]
    monitor = lab_monitor(net, section).start()
    try:
        before = _settled_core_tx(net, ports)
        series = [_timed_fetch(net, plan, rate)]
        single = per_core_delta(before, _settled_core_tx(net, ports))
        series += [_timed_fetch(net, plan, rate) for _ in range(SERIES - 1)]
    finally:
        samples = monitor.stop()
    record = build_record(samples, monitor, section, machine_clock())
    goodput_mbps = statistics.median(t["goodput_mbps"] for t in series)
    fractions = [t["fraction"] for t in series if t["fraction"] is not None]
    return {
        "dataplane": net.plane.name,
        "mode": net.plane.mode,
        "spray": net.plane.spray,
        "pair": [plan.client, plan.server],
        "direction": "server->client packets forwarded by each core towards the client pod",
        "tcp_flows": {"flows": TCP_FLOWS, "bytes_each": TCP_FLOW_BYTES, "per_core": flows},
        "mptcp": {"bytes": MPTCP_BYTES, "per_core": mp, "subflows": mp_res[0]["subflows"],
                  "subflow_paths": net.cfg.subflow_paths,
                  "placed": mp_res[0].get("placed", "")},
        "tcp_single": {"bytes": SINGLE_BYTES, "per_core": single},
        "goodput_mbps": round(goodput_mbps, 3),
        "link_rate_mbps": rate,
        "goodput_fraction": None if rate is None else round(goodput_mbps / rate, 4),
        "goodput_fraction_min": min(fractions) if fractions else None,
        "goodput_fraction_max": max(fractions) if fractions else None,
        "transfers": series,
        "steal_pct": record["figures"]["steal_pct"],
        "fidelity": {k: record[k] for k in ("verdict", "reasons", "figures", "monitor")},
        "kernel_release": platform.release(),
        "clock": measured_clock(),
    }


def _timed_fetch(net: Network, plan: ProbePlan, rate: float | None) -> dict[str, Any]:
    """One single-flow transfer: its goodput, fraction of `rate` and the steal during it."""
    cpu0 = parse_proc_stat(read_proc("/proc/stat"))
    r = probe_fetch(net, plan, [SINGLE_BYTES], mptcp=False)[0]
    shares = core_shares(cpu0, parse_proc_stat(read_proc("/proc/stat")))
    mbps = r["received"] * 8 / (r["end_s"] - r["start_s"]) / 1e6
    steal = 100 * sum(c.steal for c in shares) / len(shares) if shares else None
    return {"goodput_mbps": round(mbps, 3),
            "fraction": None if rate is None else round(mbps / rate, 4),
            "steal_pct": None if steal is None else round(steal, 2)}


def format_probe(result: dict[str, Any]) -> str:
    lines = [f"probe: {result['dataplane']} data plane, mode {result['mode']}, "
             f"pair {result['pair'][0]} <- {result['pair'][1]}"]
    cores = list(result["tcp_single"]["per_core"])
    lines.append(f"{'packets per core':<28}" + "".join(f"{c:>9}" for c in cores))
    for key, label in (("tcp_flows", "(a) 16 TCP flows"), ("mptcp", "(b) 1 MPTCP connection"),
                       ("tcp_single", "(c) 1 TCP flow")):
        lines.append(f"{label:<28}" + "".join(f"{result[key]['per_core'][c]:>9}" for c in cores))
    lines.append(f"MPTCP subflows used: {result['mptcp']['subflows']}")
    frac = result["goodput_fraction"]
    series = result.get("transfers", [])
    lines.append(f"goodput of {len(series)} single-flow transfers (median): "
                 f"{result['goodput_mbps']} Mbit/s"
                 + ("" if frac is None else f" = {frac:.3f} of {result['link_rate_mbps']:g}, "
                    f"min {result['goodput_fraction_min']:.3f}, "
                    f"max {result['goodput_fraction_max']:.3f}"))
    lines.append("  per transfer (fraction, steal %): " + ", ".join(
        f"{t['fraction']} ({t['steal_pct']})" for t in series))
    fid = result.get("fidelity")
    if fid:
        lines.append(f"steal during them: {result['steal_pct']} %; fidelity {fid['verdict']}"
                     + (f": {'; '.join(fid['reasons'])}" if fid["reasons"] else ""))
    lines.append(f"measured in kernel {result['kernel_release']} on the {result['clock']} "
                 "clock")
    return "\n".join(lines)
