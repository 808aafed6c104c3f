"""Subflows that share links, and what a transfer cost in CPU (pure).

- `shared_subflows`: subflows of the connection whose server -> client packets crossed
  at least one fabric link (switch to switch) that another of its subflows' crossed
  too. A subflow's path is where its packets went, handshake included: a subflow
  opened too late to carry payload still took its path (`subflows` counts those that
  carried payload); a subflow that was never set up (no SYN-ACK, no payload: a join
  the peer refused) did not. The client's and the server's access links are left out (with one
  interface per host every subflow crosses them). In a k=4 fat tree two subflows on
  different cores still share a link when their cores hang off the same aggregation
  switch; on one core they share four.
- `distinct_paths`: distinct sets of fabric links among the subflows (between pods
  under ECMP: the number of distinct cores used).
- `cpu_ms_per_mb`: CPU time of the client thread that received the transfer and of the
  server thread that sent it (CLOCK_THREAD_CPUTIME_ID: user + system, including the
  softirq work the kernel ran in those threads' context), per MB (10^6 bytes) of
  payload. Only on the real clock; NaN for runs whose manifest says `clock: virtual`.
- `energy_j`: a power model over that CPU time, not a measurement: busy watts per core
  (`energy.busy_watts_per_core`) times the CPU seconds, plus idle watts per host
  (`energy.idle_watts`) times the FCT times the hosts taking part. Energy is not
  measured on the virtual clock: CPU work takes no time there, so the figure is NaN.
  What the CPU time leaves out: softirq work the kernel ran outside the two threads
  (e.g. in ksoftirqd or on behalf of forwarding), the switches, and everything else
  on the machine; RAPL, where it exists, is read by benchmarks/subflow_cpu.py.
  Per host this is the host's own share: the client's receive thread, the server's
  send thread (with the softirq work run in their context, which on veth pairs
  includes some forwarding of the switches on the path).
- Per run, over its traffic phase (the fidelity monitor's figures), NaN on the virtual
  clock:
  - `run_hosts_cpu_s`: the CPU time of every host's processes (one cgroup per host,
    experiments/fabric/cpuacct.py; per host in fidelity.json's `host_cpu_s`), with the
    softirq work the kernel ran while they were on the CPU: the run's own even on a
    shared machine;
  - `run_energy_j`: the power model over it, with idle watts for every host of the run
    over the traffic phase;
  - `run_cpu_s`, `run_softirq_s`: the whole machine's busy and softirq CPU from
    /proc/stat (`cpu_busy_core_s`, `cpu_softirq_core_s`): every host's and switch's
    work, the captures, pathdiv, all softirq work, and whatever else the machine runs
    (the run's own only while it holds the machine: `flock -x /tmp/pathdiv-cpu.lock`).
"""

from __future__ import annotations

import numpy as np

SHARING_MEASURES = ["shared_subflows", "distinct_paths"]


def subflow_link_sets(subflow: np.ndarray, link: np.ndarray, carries: np.ndarray,
                      fabric: np.ndarray) -> dict[int, frozenset[int]]:
    """subflow id -> the fabric links its data packets (`carries`) crossed; `fabric`
    is a boolean mask over link indices."""
    keep = carries & fabric[link]
    out: dict[int, set[int]] = {}
    for sf, lk in zip(subflow[keep].tolist(), link[keep].tolist(), strict=True):
        out.setdefault(sf, set()).add(lk)
    return {sf: frozenset(links) for sf, links in out.items()}


def link_sharing(sets: dict[int, frozenset[int]]) -> tuple[int, int]:
    """(shared_subflows, distinct_paths) of one connection's subflow link sets."""
    items = list(sets.values())
    shared = sum(
        1 for i, mine in enumerate(items)
        if any(mine & other for j, other in enumerate(items) if j != i)
    )
    return shared, len(set(items))


def energy_j(cpu_ms: float, fct_s: float, hosts: int, busy_watts_per_core: float,
             idle_watts: float) -> float:
    """The power model's joules for CPU work of `cpu_ms` over a transfer of `fct_s` with
    `hosts` hosts taking part; NaN when the CPU time is unknown (virtual clock)."""
    if not np.isfinite(cpu_ms):
        return float("nan")
    idle = idle_watts * fct_s * hosts if idle_watts else 0.0
    return float(busy_watts_per_core * cpu_ms / 1000 + idle)


def run_energy(figures: dict, clock: str, hosts: int, busy_watts_per_core: float,
               idle_watts: float) -> dict[str, float]:
    """run_cpu_s, run_softirq_s, run_hosts_cpu_s and run_energy_j of one run from its
    fidelity figures (NaN in virtual time or where the monitor recorded no CPU), and
    run_windows_closed:
    the subflow windows mptcp-d closed in the run on every host (NaN where the kernel
    does not count them)."""
    nan = float("nan")

    def num(key: str) -> float:
        value = figures.get(key)
        return nan if value is None or clock == "virtual" else float(value)

    closed = figures.get("windows_closed")
    hosts_cpu, duration = num("hosts_cpu_s"), num("duration_s")
    return {"run_cpu_s": num("cpu_busy_core_s"), "run_softirq_s": num("cpu_softirq_core_s"),
            "run_hosts_cpu_s": hosts_cpu,
            "run_energy_j": energy_j(1000.0 * hosts_cpu, duration, hosts, busy_watts_per_core,
                                     idle_watts) if np.isfinite(duration) else nan,
            "run_windows_closed": nan if closed is None else float(closed)}


def cpu_ms_per_mb(client_ms: float, server_ms: float, payload_bytes: float,
                  clock: str = "real") -> float:
    """(client + server CPU ms) per MB of payload; NaN in virtual time or unknown."""
    if clock == "virtual" or payload_bytes <= 0:
        return float("nan")
    total = client_ms + server_ms
    return float(total / (payload_bytes / 1e6)) if np.isfinite(total) else float("nan")
