"""Link-rate fidelity of the UML lab kernel: one flow's goodput ÷ link rate, both clocks.

One UML boot per (clock, rate) runs tests/support/mptcp_lab.py goodput: one MPTCP connection
with one subflow between two namespaces over a veth pair shaped by tbf at the rate, 1 ms
of netem delay on the ACK path. Printed per run: goodput ÷ rate (1448-byte payloads in
1514-byte frames put the ceiling at 0.956; MPTCP's DSS option lowers it to about 0.943),
the wall seconds of the boot + transfer, the host's CPU steal during it (/proc/stat) and
its 1-minute load average after it (the real clock suffers from other jobs on the host).
Then the same virtual-clock run twice: how far the two flow completion times differ.

    python benchmarks/uml_goodput.py [--rates 20 100 1000] [--seconds 10] [--clocks virtual real]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from hoststat import cpu_times, steal_share

from pathdiv.kernels import uml
from pathdiv.kernels.build import build_lab_kernel, find_lab_kernel

LAB = str(uml.REPO_DIR / "tests" / "support" / "mptcp_lab.py")


def one_run(image: Path, clock: str, rate_mbit: float, seconds: float,
            queue_pkts: int) -> dict:
    size = int(rate_mbit * 1e6 / 8 * seconds)
    argv = [sys.executable, LAB, "goodput", "--schedulers", "default", "--subflows", "1",
            "--rate-mbit", str(rate_mbit), "--size", str(size), "--delay-ms", "1",
            "--queue-pkts", str(queue_pkts)]
    before, start = cpu_times(), time.monotonic()
    with tempfile.TemporaryDirectory() as share:
        res = uml.run_in_uml(argv, Path(share), image, timeout_s=1800, clock=clock)
    wall, after = time.monotonic() - start, cpu_times()
    if res.returncode:
        raise SystemExit(f"{clock} {rate_mbit} Mbit/s failed: {res.stderr[-2000:]}")
    run = json.loads(res.stdout)["runs"][0]
    if not run["complete"]:
        raise SystemExit(f"{clock} {rate_mbit} Mbit/s: incomplete transfer {run['bytes']}")
    return {"clock": clock, "rate_mbit": rate_mbit, "size": size,
            "goodput_mbps": run["goodput_mbps"], "ratio": run["goodput_mbps"] / rate_mbit,
            "fct_s": run["fct_s"][0], "wall_s": wall, "steal": steal_share(before, after),
            "load": os.getloadavg()[0]}


def boot_seconds(image: Path, clock: str) -> float:
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as share:
        uml.run_in_uml(["true"], Path(share), image, timeout_s=300, clock=clock)
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", type=float, nargs="+", default=[20, 100, 1000],
                        help="link rates, Mbit/s")
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="transfer length at the link rate (size = rate x seconds)")
    parser.add_argument("--queue-pkts", type=int, default=100)
    parser.add_argument("--clocks", nargs="+", choices=uml.CLOCKS, default=list(uml.CLOCKS))
    parser.add_argument("--no-repeat", action="store_true", help="skip the repeatability run")
    args = parser.parse_args()
    image = find_lab_kernel() or build_lab_kernel()
    print(f"kernel {image} ({image.stat().st_size / 1e6:.1f} MB)")
    for clock in args.clocks:
        print(f"boot + `true` + power-off, {clock} clock: {boot_seconds(image, clock):.1f} s")
    print(f"{'clock':8} {'rate':>7} {'size MB':>8} {'goodput':>9} {'ratio':>6} {'fct s':>8} "
          f"{'wall s':>7} {'steal':>6} {'load':>5}")
    runs = []
    for clock in args.clocks:
        for rate in args.rates:
            r = one_run(image, clock, rate, args.seconds, args.queue_pkts)
            runs.append(r)
            print(f"{clock:8} {rate:7.0f} {r['size'] / 1e6:8.1f} {r['goodput_mbps']:9.2f} "
                  f"{r['ratio']:6.3f} {r['fct_s']:8.3f} {r['wall_s']:7.1f} {r['steal']:6.1%} "
                  f"{r['load']:5.1f}",
                  flush=True)
    if not args.no_repeat and "virtual" in args.clocks:
        rate = args.rates[0]
        a, b = (one_run(image, "virtual", rate, args.seconds, args.queue_pkts)
                for _ in range(2))
        diff = abs(a["fct_s"] - b["fct_s"])
        print(f"repeatability, virtual clock, {rate:.0f} Mbit/s twice: fct {a['fct_s']:.6f} s "
              f"and {b['fct_s']:.6f} s (differ by {diff * 1e3:.3f} ms, "
              f"{diff / a['fct_s']:.2e} of the fct); wall {a['wall_s']:.1f} s and "
              f"{b['wall_s']:.1f} s")


if __name__ == "__main__":
    main()
