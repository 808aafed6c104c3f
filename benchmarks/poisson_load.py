"""Offered versus achieved load of the `poisson` pattern on the k=4 fat tree.

For each target load (a fraction of every host's access link rate) one run of the
web-search distribution executes through the runner (nftables plane, ECMP, TCP,
captures off), then prints:

  offered    bytes the schedule asked for / (hosts · rate · window)  (the generator)
  achieved   bytes of flows that completed / (hosts · rate · window) (what the network
             and the agents delivered, whenever they finished)
  done       share of flows completed; late = flows still running at window end
  slowdown   p50 / p99 of FCT slowdown (application FCT over the ideal on an idle path)
  steal      CPU share the hypervisor stole during the run (/proc/stat), beside them

    python benchmarks/poisson_load.py [--loads 0.3 0.5 0.7] [--duration 60] [--rate 20]
                                      [--max-size 3MB] [--transport tcp] [--seed 1]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from pathdiv.analysis.metrics.slowdown import slowdowns
from pathdiv.experiments.config.load import validate
from pathdiv.experiments.execute.run import execute_run
from pathdiv.experiments.plan.runs import expand


def cpu_steal() -> tuple[int, int]:
    """(steal, total) jiffies of the whole machine."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[7], sum(fields)


def one_run(load: float, seed: int, args: argparse.Namespace,
            folder: Path) -> dict[str, float]:
    cfg = validate({
        "name": f"poisson-{load:g}", "seed": seed,
        "topology": {"k": 4, "links": {t: {"bw_mbps": args.rate}
                                       for t in ("host", "edge", "core")}},
        "dataplane": "kernel", "switching": {"mode": "ecmp"},
        "hosts": {"transport": args.transport, "kernel": "host"},
        "workload": {"pattern": "poisson", "flow_types": {"web": "1KB"}, "load": load,
                     "sizes": "websearch", "max_size": args.max_size,
                     "duration_s": args.duration, "timeout_s": 60},
        "capture": {"enabled": False},
    })
    (run,) = expand(cfg)
    run_dir = folder / f"load-{load:g}" / run.run_id
    run_dir.mkdir(parents=True)
    s0, t0 = cpu_steal()
    manifest = execute_run(run, run_dir)
    s1, t1 = cpu_steal()
    if manifest["status"] != "complete":
        raise SystemExit(f"load {load}: run failed: {manifest.get('error')}")
    tr = pd.read_csv(run_dir / "transfers.csv")
    tr["ok"] = tr["ok"].astype(str).str.lower().eq("true")
    hosts = len(cfg.topology().hosts)
    capacity = hosts * args.rate * 1e6 / 8 * args.duration
    window_end = manifest["workload_start_wall_s"] + args.duration
    sd = slowdowns(tr, cfg.topology(), cfg.link_conditions())
    return {
        "load": load,
        "seed": seed,
        "flows": len(tr),
        "offered": manifest["side_traffic"]["offered_bytes"] / capacity,
        "achieved": tr.loc[tr["ok"], "size_bytes"].sum() / capacity,
        "done": tr["ok"].mean(),
        "late": (tr["end_s"] > window_end).mean(),
        "sd_p50": float(np.nanpercentile(sd, 50)),
        "sd_p99": float(np.nanpercentile(sd, 99)),
        "steal": (s1 - s0) / max(1, t1 - t0),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--loads", type=float, nargs="+", default=[0.3, 0.5, 0.7])
    ap.add_argument("--duration", type=float, default=60.0,
                    help="arrival window, s (20 s draws vary by ~9%% around the target)")
    ap.add_argument("--rate", type=float, default=20.0, help="every link, Mbit/s")
    ap.add_argument("--max-size", default="3MB", help="cut of the web-search sizes")
    ap.add_argument("--transport", default="tcp", choices=("tcp", "mptcp"))
    ap.add_argument("--seed", type=int, default=1, help="master seed of the first load")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="pathdiv-poisson-") as tmp:
        for i, load in enumerate(args.loads):
            # one master seed per load: with one seed the draws would share their random
            # stream, so every load would miss its target by the same factor
            rows.append(one_run(load, args.seed + i, args, Path(tmp)))
            r = rows[-1]
            print(f"load {r['load']:.1f} (seed {r['seed']}): {r['flows']:4d} flows  "
                  f"offered {r['offered']:.3f}  "
                  f"achieved {r['achieved']:.3f}  done {r['done']:.1%}  "
                  f"late {r['late']:.1%}  slowdown p50 {r['sd_p50']:.1f} "
                  f"p99 {r['sd_p99']:.1f}  steal {r['steal']:.1%}", flush=True)
    print(f"k=4, {args.rate:g} Mbit/s links, {args.duration:g} s window, web search cut at "
          f"{args.max_size}, {args.transport}")


if __name__ == "__main__":
    main()
