"""Build and teardown time of the emulated fat tree (nftables plane), k=4 and k=8.

    .venv/bin/python benchmarks/fattree_build.py [--k 4 8] [--repeat 3]

Prints one line per k: nodes, links, build seconds and teardown seconds (median).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from pathdiv.experiments.config.load import validate
from pathdiv.experiments.dataplane.nftables.plane import NftablesDataPlane
from pathdiv.experiments.network.network import Network


def measure(k: int) -> tuple[float, float, int, int]:
    cfg = validate({"topology": {"k": k}, "hosts": {"transport": "mptcp", "subflows": 4},
                    "dataplane": "kernel"})
    net = Network(cfg, NftablesDataPlane, Path(tempfile.mkdtemp(prefix="pathdiv-bench-")))
    t0 = time.monotonic()
    net.start()
    built = time.monotonic() - t0
    t1 = time.monotonic()
    net.stop()
    return built, time.monotonic() - t1, len(net.topo.nodes), len(net.topo.links)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'k':>3} {'nodes':>6} {'links':>6} {'build_s':>8} {'teardown_s':>10}")
    for k in args.k:
        samples = [measure(k) for _ in range(args.repeat)]
        build = statistics.median(s[0] for s in samples)
        down = statistics.median(s[1] for s in samples)
        print(f"{k:>3} {samples[0][2]:>6} {samples[0][3]:>6} {build:>8.2f} {down:>10.2f}")


if __name__ == "__main__":
    main()
