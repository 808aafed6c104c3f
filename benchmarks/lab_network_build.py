"""Seconds of one k=4 fat-tree build and teardown in the lab kernel, with the node shells
started under Mininet's open-file limit and under pathdiv's, side by side in one boot.

    .venv/bin/python benchmarks/lab_network_build.py [--repeat 4] [--config configs/noisy.yaml]

Mininet raises the soft open-file limit to 16384, and `mnexec -c`, which starts each
node's shell, closes every descriptor number below it: one system call each, and a
system call in User-Mode Linux costs tens of microseconds. pathdiv starts the shells
under a small limit (`fabric/nodeprocs.few_descriptors`). The benchmark boots the lab
kernel once on the real clock (so the guest's clock is the wall clock), then builds and
tears down the network `--repeat` times each way, alternating, and prints the medians,
the ratio pair by pair, and the host's steal and load over the whole measurement.
Needs root and the built lab kernel (`make kernel`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hoststat import HostLoad

REPO = Path(__file__).resolve().parent.parent
WAYS = ("mininet", "pathdiv")  # the limit the node shells start under


def inside(config: str, repeat: int) -> None:
    """In the guest: build and tear down `repeat` times each way; one JSON line each."""
    from pathdiv.experiments.config.load import load
    from pathdiv.experiments.dataplane.select import choose_for_config
    from pathdiv.experiments.fabric import nodeprocs
    from pathdiv.experiments.network.network import Network

    cfg = load(REPO / config)
    cls = choose_for_config(cfg).switches()
    ours = nodeprocs.shell_fd_limit
    for i in range(repeat):
        for way in WAYS:
            nodeprocs.shell_fd_limit = ours if way == "pathdiv" else (lambda *a: None)
            net = Network(cfg, cls, Path(tempfile.mkdtemp(prefix="pathdiv-bench-")))
            t0 = time.monotonic()
            try:
                net.start()
            finally:
                t1 = time.monotonic()
                net.stop()
            print(json.dumps({"way": way, "pair": i, "build_s": t1 - t0,
                              "teardown_s": time.monotonic() - t1}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--config", default="configs/noisy.yaml")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        inside(args.config, args.repeat)
        return
    with tempfile.TemporaryDirectory(prefix="pathdiv-bench-") as share, HostLoad() as load:
        done = subprocess.run(
            [sys.executable, "-m", "pathdiv.kernels.uml", "run", "--clock", "real",
             "--share", share, "--timeout", "1800", "--", sys.executable,
             str(Path(__file__).resolve()), "--inside", "--repeat", str(args.repeat),
             "--config", args.config], capture_output=True, text=True, cwd=REPO)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or len(rows) != 2 * args.repeat:
        sys.exit(f"lab_network_build: the guest failed (exit {done.returncode}): "
                 f"{(done.stderr or done.stdout).strip()[-800:]}")
    builds = {w: [r["build_s"] for r in rows if r["way"] == w] for w in WAYS}
    downs = {w: [r["teardown_s"] for r in rows if r["way"] == w] for w in WAYS}
    print(f"k=4 fat tree ({args.config}), lab kernel, real clock, {args.repeat} pairs:")
    for w in WAYS:
        print(f"  shells under {w:8s} limit: build median {statistics.median(builds[w]):.1f} s "
              f"(min {min(builds[w]):.1f}, max {max(builds[w]):.1f}), teardown median "
              f"{statistics.median(downs[w]):.1f} s")
    ratios = [p / m for p, m in zip(builds["pathdiv"], builds["mininet"], strict=True)]
    print(f"  build pathdiv/mininet, pair by pair: median {statistics.median(ratios):.2f} "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f})")
    print(f"  host: {load}")


if __name__ == "__main__":
    main()
