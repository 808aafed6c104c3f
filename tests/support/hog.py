"""Planted disturbances, for tests and benchmarks of the fidelity monitor.

`slow_links(net, share)` makes every switch egress of a running lab drain at `share` of
its configured rate (its HTB class lowered behind the config's back): the symptom a
starved data plane, or CPU steal, gives a link, planted deterministically.

`CpuHog(policy)` starts one spinning process pinned to each core, spinning `on_ms` then
sleeping `off_ms`, until `stop()`. policy 'nice': SCHED_OTHER at nice -20; 'fifo':
SCHED_FIFO priority 1 (the kernel still keeps 5 % of each second for everything else):
both above the lab's processes and the kernel's softirq threads, starving the data plane
on purpose, as a hypervisor stealing the CPU does. 'normal': SCHED_OTHER at nice 0, an
equal competitor of every other process (another job on the machine).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from typing import Any

SPIN = """
import os, sys, time
cpu, policy, on_s, off_s = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
os.sched_setaffinity(0, {cpu})
if policy == "fifo":
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
elif policy == "nice":
    os.nice(-20)
while True:
    end = time.monotonic() + on_s
    while time.monotonic() < end:
        pass
    if off_s > 0:
        time.sleep(off_s)
"""


class CpuHog:
    def __init__(self, policy: str = "nice", on_ms: float = 100, off_ms: float = 0,
                 cpus: list[int] | None = None) -> None:
        if policy not in ("nice", "fifo", "normal"):
            raise ValueError(f"policy {policy!r}: expected nice, fifo or normal")
        self.args = (policy, on_ms / 1000, off_ms / 1000)
        self.cpus = sorted(os.sched_getaffinity(0)) if cpus is None else cpus
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> CpuHog:
        for cpu in self.cpus:
            policy, on_s, off_s = self.args
            self.procs.append(subprocess.Popen(
                [sys.executable, "-S", "-c", SPIN, str(cpu), policy, str(on_s), str(off_s)]))
        return self

    def stop(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        for proc in self.procs:
            proc.wait(timeout=10)
        self.procs.clear()

    def __enter__(self) -> CpuHog:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def slow_links(net: Any, share: float) -> None:
    """Lower the HTB rate of every switch port of `lab` to `share` of its link's rate."""
    for switch in net.topo.switches:
        for link in net.topo.links_of(switch):
            port, bw = link.port_of(switch), link.params.bw_mbps
            if bw is None:
                continue
            rate = f"{bw * share:g}mbit"
            net.cmd(switch, ["tc", "class", "change", "dev", port.intf, "parent", "1:",
                             "classid", "1:1", "htb", "rate", rate, "ceil", rate,
                             "quantum", "1514"])
