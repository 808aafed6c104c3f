"""`pathdiv probe` with and without a planted disturbance: goodput, steal, verdict.

    .venv/bin/python benchmarks/fidelity_probe.py [--repeat 2] [--only none hog-nice ...]

Builds configs/class-probe.yaml (nftables plane, static mode, 20 Mbit/s links) once
per probe and runs the probe (five single-flow transfers) under each disturbance:

- none: as the machine is;
- hog-nice: one spinning process per core at nice -20 during the probe;
- hog-fifo: one per core at SCHED_FIFO, 50 ms spinning / 10 ms sleeping;
- slow-links: every switch egress drains at 40 % of its configured rate (HTB lowered
  behind the config's back): the symptom CPU starvation or steal gives a data plane.

Prints one line per probe: median goodput fraction, min-max, steal during the five
transfers, the worst backlogged link's share of its rate, the verdict and its reasons,
and the monitor's CPU cost per sample. Figures, not a test: they move with the host.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support
from pathdiv.experiments.classroom.probe import run_probe
from pathdiv.experiments.config.load import load
from pathdiv.experiments.dataplane.nftables.plane import NftablesDataPlane
from pathdiv.experiments.network.network import Network
from tests.support.hog import CpuHog, slow_links

REPO = Path(__file__).resolve().parent.parent
DISTURBANCES = ("none", "hog-nice", "hog-fifo", "slow-links")


def probe(disturbance: str) -> dict:
    cfg = load(REPO / "configs/class-probe.yaml", ["switching.mode=static"])
    with Network(cfg, NftablesDataPlane, Path(tempfile.mkdtemp(prefix="pathdiv-bench-"))) as net:
        hog: contextlib.AbstractContextManager = contextlib.nullcontext()
        if disturbance == "hog-nice":
            hog = CpuHog("nice", 100, 0)
        elif disturbance == "hog-fifo":
            hog = CpuHog("fifo", 50, 10)
        elif disturbance == "slow-links":
            slow_links(net, 0.4)
        with hog:
            return run_probe(net)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--only", nargs="+", choices=DISTURBANCES, default=list(DISTURBANCES))
    args = ap.parse_args()
    print("| disturbance | goodput fraction median (min-max) | steal % | worst link "
          "(share of rate) | verdict | monitor ms/sample |")
    print("| --- | --- | --- | --- | --- | --- |")
    for _ in range(args.repeat):
        for name in args.only:
            r = probe(name)
            fid = r["fidelity"]
            fig = fid["figures"]
            reasons = "; ".join(fid["reasons"])
            print(f"| {name} | {r['goodput_fraction']:.3f} ({r['goodput_fraction_min']:.3f}-"
                  f"{r['goodput_fraction_max']:.3f}) | {r['steal_pct']} | "
                  f"{fig['worst_link']} ({fig['worst_link_ratio']}) | {fid['verdict']}"
                  f"{': ' + reasons if reasons else ''} | "
                  f"{fid['monitor']['cpu_per_sample_ms']} |", flush=True)


if __name__ == "__main__":
    main()
