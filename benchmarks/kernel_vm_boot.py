"""Lab VM boot time: boot the lab kernel on the host root, run `true`, power off.

    python benchmarks/kernel_vm_boot.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from pathdiv.kernels import vm as labvm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    image = labvm.find_lab_kernel() or labvm.build_lab_kernel()
    times = []
    with tempfile.TemporaryDirectory() as share:
        for _ in range(args.runs):
            res = labvm.run_in_lab(["true"], Path(share), image, timeout_s=300)
            assert res.returncode == 0, res.stderr
            times.append(res.seconds)
    print(f"kernel  {res.kernel_release}  accel {res.accel} ({labvm.detect_accel().reason})")
    print("boot+run+poweroff seconds: " + " ".join(f"{t:.1f}" for t in times)
          + f"  median {statistics.median(times):.1f}")


if __name__ == "__main__":
    main()
