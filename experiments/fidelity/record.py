"""A run's fidelity record: start the monitor on a running net, judge, write it down.

`fidelity.json` in the run folder holds everything (verdict, reasons, key figures, per
core and per backlogged link shares, RTOs and retransmitted segments per host, CPU
seconds per software switch, packets lost per switch, the monitor's own cost); the
manifest's `fidelity` section holds the verdict, reasons and key figures.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from pathdiv.experiments.fidelity.monitor import Monitor, read_proc
from pathdiv.experiments.fidelity.verdict import Samples, Thresholds, judge
from pathdiv.experiments.manifest import write_json_atomic
from pathdiv.experiments.running import RunningNetwork

FILE = "fidelity.json"


def machine_clock(cmdline: str | None = None) -> str:
    """'virtual' on a User-Mode Linux kernel booted with time-travel, else 'real'."""
    text = read_proc("/proc/cmdline") if cmdline is None else cmdline
    return "virtual" if any(w.startswith("time-travel") for w in text.split()) else "real"


def egress_rates(topo: Any) -> dict[str, float | None]:
    """'node:intf' -> configured egress rate in bit/s for both ends of every link."""
    out: dict[str, float | None] = {}
    for link in topo.links:
        bw = link.params.bw_mbps
        for end in (link.a, link.b):
            out[f"{end.node}:{end.intf}"] = None if bw is None else float(bw) * 1e6
    return out


def lab_monitor(net: RunningNetwork, section: dict[str, Any]) -> Monitor:
    """A monitor over every node of a running `network.Network` (not started)."""
    nodes = {name: int(net.node(name).pid) for name in net.topo.nodes}
    return Monitor(nodes, egress_rates(net.topo), list(net.topo.hosts),
                   float(section["sample_interval_s"]),
                   host_cpu=getattr(net, "host_cpu", None),
                   switches=list(net.topo.switches))


def build_record(samples: Samples, monitor: Monitor | None, section: dict[str, Any],
                 clock: str, planned: str | None = None) -> dict[str, Any]:
    verdict = judge(samples, Thresholds.from_config(section), clock, planned)
    return {
        "clock": clock,
        **verdict.to_dict(),
        "cores": [asdict(c) for c in samples.cores],
        "links": [{**asdict(lk), "ratio": None if lk.ratio is None else round(lk.ratio, 4)}
                  for lk in samples.links],
        "rtos": samples.rtos,
        "windows_closed": samples.windows_closed,
        "reordering": samples.reordering,
        "host_cpu_s": None if samples.host_cpu_s is None
        else {h: round(v, 4) for h, v in samples.host_cpu_s.items()},
        "retrans": samples.retrans,
        "switch_cpu_s": samples.switch_cpu_s,
        "switch_lost": samples.switch_lost,
        "monitor": None if monitor is None else monitor.cost(),
    }


def manifest_section(record: dict[str, Any]) -> dict[str, Any]:
    """The manifest's `fidelity`: verdict, reasons, key figures (details in the file)."""
    return {"verdict": record["verdict"], "reasons": record["reasons"],
            "clock": record["clock"], "figures": record["figures"], "file": FILE}


def unmonitored(reason: str, clock: str) -> dict[str, Any]:
    return {"verdict": "unknown", "reasons": [reason], "clock": clock, "figures": {}}


def write_record(run_dir: Path, record: dict[str, Any]) -> None:
    write_json_atomic(run_dir / FILE, record)
