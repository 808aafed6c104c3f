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
- Per run (`run_cpu_s`, `run_softirq_s`, `run_energy_j`): the whole machine's busy
  CPU over the run's traffic phase, from /proc/stat (the fidelity monitor's figures
  `cpu_busy_core_s`, `cpu_softirq_core_s`): every process of every host and switch,
  the captures, pathdiv, and all softirq work. It is the run's own only while no other
  work shares the machine (real-clock plans hold `flock -x /tmp/pathdiv-cpu.lock`);
  `run_energy_j` is the same power model over it, with idle watts for every host of
  the run over the traffic phase. NaN on the virtual clock.
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
    """run_cpu_s, run_softirq_s and run_energy_j of one run from its fidelity figures
    (NaN in virtual time or where the monitor recorded no CPU), and run_windows_closed:
    the subflow windows mptcp-d closed in the run on every host (NaN where the kernel
    does not count them)."""
    nan = float("nan")
    closed = figures.get("windows_closed")
    closed_col = {"run_windows_closed": nan if closed is None else float(closed)}
    busy, softirq = figures.get("cpu_busy_core_s"), figures.get("cpu_softirq_core_s")
    duration = figures.get("duration_s")
    if clock == "virtual" or busy is None or softirq is None or duration is None:
        return {"run_cpu_s": nan, "run_softirq_s": nan, "run_energy_j": nan, **closed_col}
    return {"run_cpu_s": float(busy), "run_softirq_s": float(softirq),
            "run_energy_j": energy_j(1000.0 * float(busy), float(duration), hosts,
                                     busy_watts_per_core, idle_watts), **closed_col}


def cpu_ms_per_mb(client_ms: float, server_ms: float, payload_bytes: float,
                  clock: str = "real") -> float:
    """(client + server CPU ms) per MB of payload; NaN in virtual time or unknown."""
    if clock == "virtual" or payload_bytes <= 0:
        return float("nan")
    total = client_ms + server_ms
    return float(total / (payload_bytes / 1e6)) if np.isfinite(total) else float("nan")
