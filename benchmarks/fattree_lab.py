"""Cost of bigger fat trees on the lab kernel (virtual clock): one run per k.

    python benchmarks/fattree_lab.py                   # k = 4 6 8, noisy query, ecmp-mptcp
    python benchmarks/fattree_lab.py --ks 4 8 --flow-type query --memory-mb 6144
    python benchmarks/fattree_lab.py --config configs/permutation.yaml --ks 16 \
        --only transport=ecmp-tcp --set capture.links=access --set workload.flow_types.long=2MB

Per k one `pathdiv run --jobs 1 --no-analyze` of the config (configs/noisy.yaml: its
pattern scales its groups, two halves of k^3/8 hosts, one client fetching from the rest
of its half; `--only` picks one run, by default the noisy plan's ecmp-mptcp vanilla run of
`--flow-type`) with topology.k=K, in a fresh folder. Printed per k: nodes and links; the
host's wall time to the first round (boot, network build, reachability check, capture
start: read from the guest's progress file) and of the whole run; the simulated seconds of traffic
(the guest's clock) and the wall seconds each cost; the guest's memory in use once built,
with captures running and after the traffic (the manifest's `memory_mb`: MemTotal -
MemAvailable in the guest); the most host memory the run took (the drop of the host's
MemAvailable, sampled every 0.5 s); the estimate `pathdiv check` gave for the run at
0 runs (this machine's history before it) against its actual wall time; CPU steal and
load beside; the payload the run moved and how much of it per wall second of its
traffic phase (simulated traffic per wall second).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml
from hoststat import HostLoad

from pathdiv.experiments.api.plans import expected_time
from pathdiv.experiments.config.load import load
from pathdiv.experiments.execute.lab_runs import PROGRESS_FILE
from pathdiv.experiments.manifest import memory_mb
from pathdiv.experiments.plan.estimate import run_work
from pathdiv.experiments.plan.history import estimator
from pathdiv.experiments.plan.runs import expand

REPO = Path(__file__).resolve().parents[1]


def host_available_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return 0


class Watch:
    """Samples the host's available memory and the guest's progress file."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.stop = folder, threading.Event()
        self.start = time.monotonic()
        self.base = host_available_mb()
        self.lowest = self.base
        self.first_round_s: float | None = None
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self) -> None:
        while not self.stop.wait(0.5):
            self.lowest = min(self.lowest, host_available_mb())
            if self.first_round_s is None:
                try:
                    doc = json.loads((self.folder / PROGRESS_FILE).read_text())
                except (OSError, ValueError):
                    continue
                if doc.get("rounds"):
                    self.first_round_s = time.monotonic() - self.start

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", type=int, nargs="+", default=[4, 6, 8])
    ap.add_argument("--config", default="configs/noisy.yaml")
    ap.add_argument("--flow-type", default="query")
    ap.add_argument("--only", action="append", default=None, metavar="KEY=VALUE",
                    help="the run (default: switching=ecmp-mptcp host=vanilla, noisy's)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--memory-mb", default="auto",
                    help="lab.memory_mb of every run (the guest's ceiling, not its use)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="fattree-lab-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"folders in {root}; host RAM {memory_mb()[0] if memory_mb() else '?'} MB")
    print("| k | nodes | links | to first round s | run wall s | traffic (guest) s | "
          "wall s per simulated s | payload MB | MB per wall s of traffic | guest MB "
          "(of lab.memory_mb) built / capturing / after | host MB taken | "
          "ETA at 0 s (error) | steal | load |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
          "| --- |")
    only = args.only or ["switching=ecmp-mptcp", "host=vanilla"]
    memory = int(args.memory_mb) if str(args.memory_mb).isdigit() else "auto"
    for k in args.ks:
        sets = [s.split("=", 1) for s in args.set]
        cfg = load(REPO / args.config).with_overrides(
            [("topology.k", k), ("lab.memory_mb", memory),
             *((key, yaml.safe_load(value)) for key, value in sets)])
        topo = cfg.topology()
        runs = expand(cfg, repetitions=1, flow_types=[args.flow_type],
                      only=dict(o.split("=", 1) for o in only))
        eta = expected_time(runs, 1, estimator()).seconds
        payload_mb = sum(run_work(r.config, r.flow_type, r.workload_seed).payload_mb
                         for r in runs)
        folder = root / f"k{k}"
        cmd = [sys.executable, "-m", "pathdiv.experiments.cli", "run", args.config,
               "--out", str(folder), "--no-analyze", "--quiet", "--reps", "1",
               "--jobs", "1", "--set", f"topology.k={k}",
               "--set", f"lab.memory_mb={memory}",
               *(a for s in args.set for a in ("--set", s)),
               *(a for o in only for a in ("--only", o)),
               "--only", f"flow_type={args.flow_type}"]
        folder.mkdir(parents=True, exist_ok=True)
        watch = Watch(folder)
        with HostLoad() as hl:
            rc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.DEVNULL, check=False).returncode
        watch.close()
        manifests = list(folder.glob("runs/*/manifest.json"))
        m = json.loads(manifests[0].read_text()) if manifests else {}
        if rc != 0 or m.get("status") != "complete":
            print(f"| {k} | {len(topo.switches) + len(topo.hosts)} | {len(topo.links)} | "
                  f"failed (exit {rc}): {str(m.get('error', ''))[:200]} | | | | | | | | "
                  f"{eta:.0f} | {hl.steal:.1%} | {hl.load:.1f} |")
            continue
        traffic = float(m["timings"]["traffic_s"])
        first = watch.first_round_s or float("nan")
        wall_traffic = hl.wall_s - first
        mem = m.get("memory_mb") or {}
        print(f"| {k} | {len(topo.switches) + len(topo.hosts)} | {len(topo.links)} | "
              f"{first:.1f} | {hl.wall_s:.1f} | {traffic:.2f} | "
              f"{wall_traffic / traffic if traffic else float('nan'):.0f} | "
              f"{payload_mb:.0f} | {payload_mb / wall_traffic:.1f} | {mem.get('total')}: "
              f"{mem.get('built')} / {mem.get('capturing')} / {mem.get('after_traffic')} | "
              f"{watch.base - watch.lowest} | {eta:.0f} ({eta / hl.wall_s - 1:+.0%}) | "
              f"{hl.steal:.1%} | {hl.load:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
