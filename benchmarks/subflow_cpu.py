"""CPU cost per MB delivered: TCP and MPTCP with 1, 2, 4, 8 subflows, hashed vs disjoint.

On a k=4 fat tree (nftables plane, ECMP, configs/class-probe.yaml: 20 Mbit/s links), h1
fetches --size bytes from h16, --reps times per configuration, one transfer at a time.
Per transfer it records the CPU time of the client thread that received and of the
server thread that sent (CLOCK_THREAD_CPUTIME_ID; this kernel has no
CONFIG_IRQ_TIME_ACCOUNTING, so softirq work the kernel runs on the way out of their
system calls is charged to them), and from /proc/stat the machine's softirq and steal
time over the transfer (all CPUs: on a shared machine other work shows there too).
RAPL energy is read from /sys/class/powercap when it exists (it does not on most VMs).

    python benchmarks/subflow_cpu.py [--size 5000000] [--reps 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from pathdiv.experiments.config.load import load
from pathdiv.experiments.dataplane.ecmp_model import PathModel
from pathdiv.experiments.dataplane.nftables.plane import NftablesDataPlane
from pathdiv.experiments.fabric.nodeprocs import wait_for_line
from pathdiv.experiments.network.network import Network
from pathdiv.experiments.traffic.placement import Placement, place_argv

REPO = Path(__file__).resolve().parents[1]
PORT = 5003
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")
RAPL = Path("/sys/class/powercap")


def proc_stat() -> dict[str, int]:
    """Aggregate CPU ticks from /proc/stat's first line."""
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:9]
    return dict(zip(names, map(int, fields), strict=True))


def rapl_uj() -> int | None:
    zones = sorted(RAPL.glob("intel-rapl:*/energy_uj")) if RAPL.exists() else []
    return sum(int(z.read_text()) for z in zones) if zones else None


def configurations() -> list[tuple[str, list[str]]]:
    out = [("tcp", ["hosts.transport=tcp"])]
    for paths in ("hashed", "disjoint"):
        for n in (1, 2, 4, 8):
            out.append((f"mptcp-{n}-{paths}", ["hosts.transport=mptcp", f"hosts.subflows={n}",
                                               f"hosts.subflow_paths={paths}"]))
    return out


def measure(label: str, overrides: list[str], size: int, reps: int, tmp: Path
            ) -> dict[str, Any]:
    cfg = load(REPO / "configs/class-probe.yaml", ["dataplane=kernel", *overrides])
    mptcp = cfg.transport == "mptcp"
    placement: Placement | None = None
    rng = random.Random(1)
    cpu_log = tmp / f"{label}.cpu.jsonl"
    rows = []
    with Network(cfg, NftablesDataPlane, tmp / label) as net:
        if mptcp and cfg.subflow_paths != "hashed":
            placement = Placement(PathModel(net.topo, net.tables, "kernel"),
                                  cfg.subflow_paths, cfg.subflows)
        server_argv = ["serve", "--port", str(PORT), "--cpu-log", str(cpu_log)]
        if mptcp:
            server_argv.append("--mptcp")
        if placement is not None:
            server_argv.append("--userspace-pm")
        server = net.transfer("h16", server_argv)
        wait_for_line(server, server.stdout, "ready", 15, "benchmark server")
        addr = net.topo.nodes["h16"].address
        for _ in range(reps):
            argv = ["fetch", f"{addr}:{PORT}:{size}", "--timeout", "300"]
            if mptcp:
                argv += ["--mptcp", *place_argv(placement, "h1", [(addr, PORT)], rng)]
            net.wait_quiet()
            s0, e0 = proc_stat(), rapl_uj()
            proc = net.transfer("h1", argv)
            out, err = proc.communicate(timeout=330)
            s1, e1 = proc_stat(), rapl_uj()
            res = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
            if not res["ok"]:
                raise SystemExit(f"{label}: transfer failed: {res['error']} {err[-300:]}")
            net.wait_quiet()
            server_ms = json.loads(cpu_log.read_text().splitlines()[-1])["cpu_ms"]
            ticks = {k: s1[k] - s0[k] for k in s0}
            total = sum(ticks.values()) or 1
            rows.append({
                "client_ms": res["cpu_ms"], "server_ms": server_ms,
                "softirq_ms": ticks["softirq"] * TICK_MS,
                "steal_pct": 100 * ticks["steal"] / total,
                "busy_ms": (total - ticks["idle"] - ticks["iowait"]) * TICK_MS,
                "subflows": res["subflows"], "seconds": res["end_s"] - res["start_s"],
                "energy_j": None if e0 is None or e1 is None else (e1 - e0) / 1e6,
            })
        net.end(server)
    mb = size / 1e6

    def med(key: str) -> float:
        return statistics.median(r[key] for r in rows)

    return {
        "config": label, "reps": reps, "size_bytes": size,
        "subflows_seen": sorted({r["subflows"] for r in rows}),
        "cpu_ms_per_mb": round((med("client_ms") + med("server_ms")) / mb, 3),
        "client_ms_per_mb": round(med("client_ms") / mb, 3),
        "server_ms_per_mb": round(med("server_ms") / mb, 3),
        "softirq_ms_per_mb": round(med("softirq_ms") / mb, 3),
        "machine_busy_ms_per_mb": round(med("busy_ms") / mb, 3),
        "steal_pct": round(med("steal_pct"), 2),
        "seconds": round(med("seconds"), 3),
        "energy_j_per_mb": None if rows[0]["energy_j"] is None
        else round(med("energy_j") / mb, 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=5_000_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="pathdiv-subflow-cpu-") as tmp:
        for label, overrides in configurations():
            results.append(measure(label, overrides, args.size, args.reps, Path(tmp)))
            print(f"{label} done", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps({"results": results, "rapl": RAPL.exists()}, indent=1))
        return
    print(f"median of {args.reps} transfers of {args.size / 1e6:g} MB each, h1 <- h16, "
          f"k=4, 20 Mbit/s, ECMP; CPU ms per MB delivered")
    print(f"{'config':<20}{'client+server':>14}{'client':>8}{'server':>8}{'softirq*':>9}"
          f"{'busy*':>8}{'steal%':>8}{'s':>7}")
    for r in results:
        print(f"{r['config']:<20}{r['cpu_ms_per_mb']:>14.2f}{r['client_ms_per_mb']:>8.2f}"
              f"{r['server_ms_per_mb']:>8.2f}{r['softirq_ms_per_mb']:>9.2f}"
              f"{r['machine_busy_ms_per_mb']:>8.2f}{r['steal_pct']:>8.2f}{r['seconds']:>7.2f}")
    print("* machine-wide from /proc/stat over the transfer (all CPUs, other work included)")
    print("RAPL: " + ("read from /sys/class/powercap" if RAPL.exists()
                      else "/sys/class/powercap absent here: no energy figures"))


if __name__ == "__main__":
    main()
