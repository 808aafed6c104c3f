"""MPTCP goodput in the lab VM versus on the host kernel: one 4-subflow transfer between two
namespaces over one veth pair, no shaping (kernels/mptcp_lab.py goodput), default scheduler.

    python benchmarks/kernel_goodput.py [--size 50000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from pathdiv.kernels import vm as labvm

LAB = str(labvm.KERNELS_DIR / "mptcp_lab.py")


def goodput(report: dict) -> float:
    return report["runs"][0]["goodput_mbps"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=50_000_000)
    args = parser.parse_args()
    argv = [sys.executable, LAB, "goodput", "--schedulers", "default", "--delay-ms", "0",
            "--size", str(args.size)]
    host = json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)
    image = labvm.find_lab_kernel() or labvm.build_lab_kernel()
    with tempfile.TemporaryDirectory() as share:
        res = labvm.run_in_lab(argv, Path(share), image, timeout_s=900)
    if res.returncode:
        raise SystemExit(f"in-VM run failed: {res.stderr[-2000:]}")
    vm = json.loads(res.stdout)
    print(f"host {host['kernel']:<24} goodput {goodput(host):8.1f} Mbit/s")
    print(f"vm   {vm['kernel']:<24} goodput {goodput(vm):8.1f} Mbit/s ({res.accel})")
    print(f"ratio vm/host {goodput(vm) / goodput(host):.3f}")


if __name__ == "__main__":
    main()
