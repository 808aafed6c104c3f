"""Single-flow goodput as a fraction of the configured link rate (nftables plane).

    .venv/bin/python benchmarks/link_fidelity.py [--rates 20 100 1000]
    .venv/bin/python benchmarks/link_fidelity.py --kernel lab [--clocks virtual real]

For each rate, builds a k=4 fat tree with every link at that rate, fetches one 25 MB
(or rate-scaled: `--seconds` of traffic at the rate) TCP transfer between pods with the
probe's machinery, and prints the goodput and its fraction of the rate. Header overhead
alone caps the fraction near 0.956 (1448 payload bytes per 1514-byte frame); lower
values at high rates show where this machine's CPU, not the shaper, limits the
emulation. With `--kernel lab` each (clock, rate) runs in its own boot of the lab kernel
(User-Mode Linux): on the virtual clock CPU work takes no time, so only the links limit
the rate, and the wall time depends on the packets, not on the rate. Every line carries
the wall seconds (the boot included), the host's CPU steal and its load average.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from hoststat import HostLoad

from pathdiv.experiments.classroom.probe import PORT, ProbePlan, probe_fetch
from pathdiv.experiments.config.load import validate
from pathdiv.experiments.dataplane.nftables.plane import NftablesDataPlane
from pathdiv.experiments.fabric.nodeprocs import wait_for_line
from pathdiv.experiments.network.network import Network


def transfer_bytes(rate: float, seconds: float) -> int:
    return max(25_000_000, int(rate * 1e6 / 8 * seconds))


def goodput(rate: float, mode: str, size: int) -> tuple[float, float]:
    links = {t: {"bw_mbps": rate, "queue_pkts": 100 if rate <= 100 else 1000}
             for t in ("host", "edge", "core")}
    cfg = validate({"topology": {"k": 4, "links": links}, "dataplane": "kernel",
                    "switching": {"mode": mode}})
    with Network(cfg, NftablesDataPlane, Path(tempfile.mkdtemp(prefix="pathdiv-bench-"))) as net:
        plan = ProbePlan.for_topology(net.topo)
        server = net.transfer(plan.server, ["serve", "--port", str(PORT)])
        wait_for_line(server, server.stdout, "ready", 15, "server")
        r = probe_fetch(net, plan, [size], mptcp=False)[0]
    mbps = r["received"] * 8 / (r["end_s"] - r["start_s"]) / 1e6
    return mbps, mbps / rate


def in_lab_kernel(rate: float, mode: str, size: int, clock: str) -> tuple[dict, HostLoad]:
    """One boot of the lab kernel measuring one rate; the guest runs this script."""
    from pathdiv.kernels import uml
    from pathdiv.kernels.build import build_lab_kernel, find_lab_kernel

    image = find_lab_kernel() or build_lab_kernel()
    argv = [sys.executable, str(Path(__file__).resolve()), "--rates", str(rate), "--mode",
            mode, "--size", str(size), "--json"]
    with tempfile.TemporaryDirectory(prefix="pathdiv-bench-") as share, HostLoad() as host:
        res = uml.run_in_uml(argv, Path(share), image, timeout_s=7200, clock=clock)
    if res.returncode:
        raise SystemExit(f"{clock} {rate:g} Mbit/s failed: {res.stderr[-2000:]}")
    return json.loads(res.stdout.splitlines()[-1]), host


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", type=float, nargs="+", default=[20, 100, 1000])
    ap.add_argument("--mode", default="ecmp", choices=["static", "ecmp", "spray"])
    ap.add_argument("--seconds", type=float, default=5.0,
                    help="traffic at the rate (size = max(25 MB, rate x seconds))")
    ap.add_argument("--size", type=int, help="transfer size in bytes (overrides --seconds)")
    ap.add_argument("--kernel", choices=("host", "lab"), default="host")
    ap.add_argument("--clocks", nargs="+", choices=("virtual", "real"), default=["virtual"],
                    help="lab kernel clocks to measure (--kernel lab)")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # the guest's
    args = ap.parse_args()
    print(f"{'kernel':<12} {'rate_mbps':>10} {'size_MB':>8} {'goodput_mbps':>13} "
          f"{'fraction':>9} {'wall_s':>7} {'steal':>6} {'load':>5}", flush=True)
    for clock in args.clocks if args.kernel == "lab" else ["host"]:
        for rate in args.rates:
            size = args.size or transfer_bytes(rate, args.seconds)
            if args.kernel == "lab":
                r, host = in_lab_kernel(rate, args.mode, size, clock)
                mbps, frac = r["goodput_mbps"], r["fraction"]
            else:
                with HostLoad() as host:
                    mbps, frac = goodput(rate, args.mode, size)
                if args.json:
                    print(json.dumps({"goodput_mbps": mbps, "fraction": frac}))
                    continue
            print(f"{'lab-' + clock if args.kernel == 'lab' else 'host':<12} {rate:>10g} "
                  f"{size / 1e6:>8.0f} {mbps:>13.2f} {frac:>9.3f} {host.wall_s:>7.1f} "
                  f"{host.steal:>6.1%} {host.load:>5.1f}", flush=True)


if __name__ == "__main__":
    main()
