"""What the reserve of low descriptor numbers costs a libnftables call
(experiments/fabric/lowfds.py): `Nft.ruleset`, which releases the reserve around the
library call and takes it back, against the same call with an empty reserve (the
library call alone).

    sudo .venv/bin/python benchmarks/nft_reserve.py [--pairs 7] [--calls 300]

As root, in a fresh network namespace holding one table (made here, removed with its
holder process), paired, A B A B: per pair, the median of `--calls` calls of each;
min/median/max over the pairs, and the ratio per pair, with the CPU steal of the whole
measurement beside them. Run it alone on the machine (under the machine lock).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from hoststat import median_call_s, steal_ticks


def spread(values: list[float], scale: float = 1.0) -> str:
    return (f"min {min(values) * scale:.3f} / median {statistics.median(values) * scale:.3f}"
            f" / max {max(values) * scale:.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("nft_reserve: run as root (a network namespace and its ruleset)")
    from pathdiv.experiments.fabric import nftlib
    from pathdiv.experiments.fabric.lowfds import LowDescriptors

    nft = nftlib.Nft.open()
    if nft is None:
        sys.exit("nft_reserve: libnftables.so.1 cannot be loaded here")
    reserve, needed = nftlib.LOW_FDS, nftlib.NEEDED_FDS
    empty = LowDescriptors(0)  # releases and takes back nothing
    holder = subprocess.Popen(["unshare", "-n", "sleep", "600"])
    try:
        time.sleep(0.3)
        pid = holder.pid
        subprocess.run(["nsenter", "-t", str(pid), "-n", "nft", "add", "table", "inet",
                        "pd_bench"], check=True)


        def reserved() -> float:
            nftlib.LOW_FDS, nftlib.NEEDED_FDS = reserve, needed
            return median_call_s(lambda: nft.ruleset(pid), args.calls)

        def alone() -> float:
            nftlib.LOW_FDS, nftlib.NEEDED_FDS = empty, 0  # the library, no reserve
            return median_call_s(lambda: nft.ruleset(pid), args.calls)

        steal0, wall0 = steal_ticks(), time.monotonic()
        xs, ys = [], []
        for _ in range(args.pairs):
            xs.append(reserved())
            ys.append(alone())
        wall = time.monotonic() - wall0
    finally:
        nftlib.LOW_FDS, nftlib.NEEDED_FDS = reserve, needed
        holder.kill()
        holder.wait()
    ratios = [x / y for x, y in zip(xs, ys, strict=True)]
    print(f"nft list ruleset (JSON) in a fresh context, ms per call, {args.pairs} pairs of "
          f"the median of {args.calls} calls; reserve {nftlib.RESERVE_FDS} numbers:")
    print(f"  with the reserve released and taken back  {spread(xs, 1e3)}")
    print(f"  the library call alone                    {spread(ys, 1e3)}")
    print(f"  ratio reserve / alone: {spread(ratios)}")
    print(f"  calls that ran the nft program: {nft.programs}")
    print(f"CPU steal over the measurement: "
          f"{(steal_ticks() - steal0) / os.sysconf('SC_CLK_TCK'):.2f} s of {wall:.1f} s wall "
          f"(all CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
