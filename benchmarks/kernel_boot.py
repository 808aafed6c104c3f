"""Lab kernel boot time: boot UML on the host root, run `true`, power off, per clock.

    python benchmarks/kernel_boot.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from pathdiv.kernels import uml
from pathdiv.kernels.build import build_lab_kernel, find_lab_kernel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    image = find_lab_kernel() or build_lab_kernel()
    for clock in uml.CLOCKS:
        times = []
        with tempfile.TemporaryDirectory() as share:
            for _ in range(args.runs):
                res = uml.run_in_uml(["true"], Path(share), image, timeout_s=300, clock=clock)
                assert res.returncode == 0, res.stderr
                times.append(res.seconds)
        print(f"kernel {res.kernel_release}, {clock} clock: boot+run+poweroff wall seconds "
              + " ".join(f"{t:.2f}" for t in times) + f"  median {statistics.median(times):.2f}")


if __name__ == "__main__":
    main()
