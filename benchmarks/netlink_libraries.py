"""pathdiv's hand-written netlink and nftables bindings beside the libraries that do the
same (docs/decisions/0010-netlink-libraries.md): what each costs per call and to import.

    .venv/bin/python benchmarks/netlink_libraries.py --pyroute2 DIR --nftables DIR [--pairs 7]

DIR: a folder holding the package (`pip install --target DIR pyroute2`; the Debian
package python3-nftables extracted with `dpkg -x`: its usr/lib/python3/dist-packages).
Neither is a dependency of pathdiv. As root, in this process's own network namespace
(it creates nothing), paired, A B A B: per pair, the median of `--calls` calls of

- a dump of every qdisc and class (the check between runs reads one per node, the
  fidelity monitor a qdisc dump per node every sample): `fabric/rtnl.py` RouteSocket
  against pyroute2's IPRoute (get_qdiscs + get_classes), each on a socket opened once;
- `nft list ruleset` as JSON in a fresh context (one per node namespace): `fabric/nftlib.py`
  against python3-nftables' Nftables;

and, whole-process, the interpreter's start with each import: what the transfer tool
(`traffic/transfer.py`, run with `python -S`, standard library only) would pay per
transfer for pyroute2's MPTCP module against `traffic/mptcp_pm.py`. Figures are
min/median/max over the pairs, with the CPU steal of the whole measurement beside them.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from hoststat import median_call_s, steal_ticks

REPO = Path(__file__).resolve().parents[1]


def process_s(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, env=env, capture_output=True)
    return time.perf_counter() - t0


def paired(name_a: str, a: Callable[[], float], name_b: str, b: Callable[[], float],
           pairs: int, unit: float, label: str) -> None:
    xs, ys = [], []
    for _ in range(pairs):
        xs.append(a())
        ys.append(b())
    ratios = [y / x for x, y in zip(xs, ys, strict=True)]
    def spread(values: list[float], scale: float = 1.0) -> str:
        return (f"min {min(values) * scale:.3f} / median {statistics.median(values) * scale:.3f}"
                f" / max {max(values) * scale:.3f}")

    print(f"{label}:")
    print(f"  {name_a:<28} {spread(xs, unit)}")
    print(f"  {name_b:<28} {spread(ys, unit)}")
    print(f"  ratio {name_b} / {name_a}: {spread(ratios)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pyroute2", type=Path, required=True, help="folder holding pyroute2")
    ap.add_argument("--nftables", type=Path, required=True,
                    help="folder holding python3-nftables' `nftables` package")
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("netlink_libraries: run as root (nftables listing needs CAP_NET_ADMIN)")
    sys.path[:0] = [str(args.pyroute2), str(args.nftables)]
    import nftables  # type: ignore[import-not-found]
    from pyroute2 import IPRoute  # type: ignore[import-not-found]

    from pathdiv.experiments.fabric.nftlib import Nft
    from pathdiv.experiments.fabric.rtnl import RouteSocket

    steal0, wall0 = steal_ticks(), time.monotonic()
    intfs = [name for _, name in socket.if_nameindex()]
    ours, theirs = RouteSocket(os.getpid()), IPRoute()

    def rtnl_ours() -> float:
        return median_call_s(lambda: ours.tc(intfs), args.calls)

    def rtnl_theirs() -> float:
        return median_call_s(lambda: (theirs.get_qdiscs(), theirs.get_classes()),
                             args.calls)

    paired("fabric/rtnl.py", rtnl_ours, "pyroute2 IPRoute", rtnl_theirs, args.pairs, 1e3,
           f"qdiscs and classes of {len(intfs)} interfaces, ms per dump")
    nft = Nft.open()
    if nft is None:
        sys.exit("netlink_libraries: libnftables.so.1 cannot be loaded here")

    def nft_ours() -> float:
        return median_call_s(lambda: nft.ruleset(os.getpid()), args.calls // 4)

    def nft_theirs() -> float:
        def call() -> str:
            ctx = nftables.Nftables()
            ctx.set_json_output(True)
            rc, out, err = ctx.cmd("list ruleset")
            if rc:
                raise RuntimeError(err)
            return str(out)
        return median_call_s(call, args.calls // 4)

    paired("fabric/nftlib.py", nft_ours, "python3-nftables", nft_theirs, args.pairs, 1e3,
           "nft list ruleset (JSON) in a fresh context, ms per call")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(args.pyroute2), str(REPO / "experiments" / "traffic")]))
    ours_start = [sys.executable, "-S", "-c", "import mptcp_pm"]
    theirs_start = [sys.executable, "-c",
                    "import sys; sys.path.insert(0, sys.argv[1]); "
                    "import pyroute2.netlink.generic.mptcp", str(args.pyroute2)]
    paired("python -S + mptcp_pm.py", lambda: process_s(ours_start, env),
           "python + pyroute2 mptcp", lambda: process_s(theirs_start, env),
           args.pairs, 1e3, "interpreter start with the import, ms per process")
    ticks = os.sysconf("SC_CLK_TCK")
    wall = time.monotonic() - wall0
    print(f"CPU steal over the measurement: {(steal_ticks() - steal0) / ticks:.2f} s of "
          f"{wall:.1f} s wall (all CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
