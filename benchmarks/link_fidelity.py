"""Single-flow goodput as a fraction of the configured link rate (kernel data plane).

    .venv/bin/python benchmarks/link_fidelity.py [--rates 20 100 1000]

For each rate, builds a k=4 fat tree with every link at that rate, fetches one 25 MB
(or rate-scaled) TCP transfer between pods with the probe's machinery, and prints the
goodput and its fraction of the rate. Header overhead alone caps the fraction near
0.956 (1448 payload bytes per 1514-byte frame); lower values at high rates show where
this machine's CPU, not the shaper, limits the emulation.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from pathdiv.experiments.classroom.probe import PORT, ProbePlan, _fetch
from pathdiv.experiments.config.load import validate
from pathdiv.experiments.dataplane.kernel import KernelDataPlane
from pathdiv.experiments.fabric.network import Network, wait_for_line


def goodput(rate: float, mode: str) -> tuple[float, float]:
    links = {t: {"bw_mbps": rate, "queue_pkts": 100 if rate <= 100 else 1000}
             for t in ("host", "edge", "core")}
    cfg = validate({"topology": {"k": 4, "links": links}, "dataplane": "kernel",
                    "switching": {"mode": mode}})
    size = max(25_000_000, int(rate * 1e6 / 8 * 5))  # at least ~5 s of traffic
    with Network(cfg, KernelDataPlane, Path(tempfile.mkdtemp(prefix="pathdiv-bench-"))) as net:
        plan = ProbePlan.for_topology(net.topo)
        server = net.transfer(plan.server, ["serve", "--port", str(PORT)])
        wait_for_line(server, server.stdout, "ready", 15, "server")
        r = _fetch(net, plan, [size], mptcp=False)[0]
    mbps = r["received"] * 8 / (r["end_s"] - r["start_s"]) / 1e6
    return mbps, mbps / rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", type=float, nargs="+", default=[20, 100, 1000])
    ap.add_argument("--mode", default="ecmp", choices=["static", "ecmp", "spray"])
    args = ap.parse_args()
    print(f"{'rate_mbps':>10} {'goodput_mbps':>13} {'fraction':>9}")
    for rate in args.rates:
        mbps, frac = goodput(rate, args.mode)
        print(f"{rate:>10g} {mbps:>13.2f} {frac:>9.3f}")


if __name__ == "__main__":
    main()
