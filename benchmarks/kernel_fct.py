"""Mean flow completion time of 16 concurrent 4-subflow MPTCP transfers through one
shallow-buffered bottleneck (tbf 20 Mbit/s, 10-packet queue, 2 ms delay on the ACK path),
per scheduler, in the lab kernel on the virtual clock (tests/support/mptcp_lab.py fct).

    python benchmarks/kernel_fct.py [--size 500000] [--flows 16] [--reps 1]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from hoststat import HostLoad

from pathdiv.kernels import uml
from pathdiv.kernels.build import KERNELS_DIR, build_lab_kernel, find_lab_kernel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=500_000)
    parser.add_argument("--flows", type=int, default=16)
    parser.add_argument("--queue-pkts", type=int, default=10)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--clock", choices=uml.CLOCKS, default="virtual")
    args = parser.parse_args()
    image = find_lab_kernel() or build_lab_kernel()
    schedulers = ["default", "rb", "roundrobin"] * args.reps
    argv = [sys.executable, str(KERNELS_DIR.parent / "tests" / "support" / "mptcp_lab.py"), "fct",
            "--schedulers", *schedulers, "--size", str(args.size), "--flows", str(args.flows),
            "--queue-pkts", str(args.queue_pkts)]
    with tempfile.TemporaryDirectory() as share, HostLoad() as host:
        res = uml.run_in_uml(argv, Path(share), image, timeout_s=1800, clock=args.clock)
    if res.returncode:
        raise SystemExit(f"lab-kernel run failed: {res.stderr[-2000:]}")
    report = json.loads(res.stdout)
    print(f"kernel {report['kernel']} ({res.clock} clock; {host}); "
          f"{args.flows} flows x {args.size} B, "
          f"4 subflows, tbf 20 Mbit/s, queue {args.queue_pkts} pkts")
    by_sched: dict[str, list[float]] = {}
    for run in report["runs"]:
        if not run["complete"]:
            raise SystemExit(f"{run['scheduler']}: incomplete transfers {run['bytes']}")
        by_sched.setdefault(run["scheduler"], []).append(run["mean_fct_s"])
    for name, fcts in by_sched.items():
        print(f"{name:<11} mean FCT {sum(fcts) / len(fcts):.3f} s  "
              f"(per rep: {' '.join(f'{f:.3f}' for f in fcts)})")


if __name__ == "__main__":
    main()
