"""Process executions and seconds of one k=4 fat-tree build and teardown (nftables plane).

    .venv/bin/python benchmarks/lab_build_execs.py [--config configs/class-quick.yaml]
                                                   [--repeat 3] [--by-program]

Exec counts come from one build+teardown run under `strace -f -e trace=execve`
(successful execs only, split at the moment the build returned); seconds are the median
of --repeat runs without strace. Where an exec costs much more than here (the former
QEMU TCG VM: ~20-30x), the exec count is the figure that predicts the build time.
Needs root (network namespaces) and strace.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def one_run(config: str) -> dict[str, float]:
    """Build and tear down one lab in this process; wall-clock marks for the parent."""
    from pathdiv.experiments.config.load import load
    from pathdiv.experiments.dataplane.nftables.plane import NftablesDataPlane
    from pathdiv.experiments.network.network import Network

    net = Network(load(REPO / config), NftablesDataPlane,
              Path(tempfile.mkdtemp(prefix="pathdiv-bench-")))
    t0 = time.time()
    try:
        net.start()
    except BaseException:
        net.stop()
        raise
    t1 = time.time()
    net.stop()
    t2 = time.time()
    return {"t0": t0, "t1": t1, "t2": t2, "build_s": t1 - t0, "teardown_s": t2 - t1}


def child_argv(config: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", "--config", config]


def run_child(config: str, prefix: list[str]) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([*prefix, *child_argv(config)], check=True, capture_output=True,
                         text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


EXECVE = re.compile(r'execve\("[^"]*", \["([^"]*)"(?:, "([^"]*)")?')


def execs(trace: Path) -> list[tuple[float, str]]:
    """(time, program) of every successful execve in an `strace -f -ttt` trace.

    Lines look like `PID 1700000000.123456 execve("/usr/sbin/ip", ["ip", ...]) = 0`; a
    call interrupted by another process's is split into `<unfinished ...>` and
    `<... execve resumed>` lines, of which the resumed one carries the result."""
    found, pending = [], {}
    for line in trace.read_text(errors="replace").splitlines():
        fields = line.split(maxsplit=2)
        if len(fields) < 3 or "execve" not in fields[2]:
            continue
        pid, stamp, call = fields[0], float(fields[1]), fields[2]
        named = EXECVE.search(call)
        if named:
            program = Path(named.group(1)).name
            if program in ("ip", "tc") and named.group(2):
                program += " " + named.group(2)
            pending[pid] = program
        if call.rstrip().endswith("= 0"):
            found.append((stamp, pending.pop(pid, "?")))
    return found


def split(found: list[tuple[float, str]], marks: dict[str, float]) -> tuple[Counter, Counter]:
    """Programs executed while building and while tearing down."""
    build = Counter(p for t, p in found if marks["t0"] <= t < marks["t1"])
    down = Counter(p for t, p in found if marks["t1"] <= t <= marks["t2"])
    return build, down


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/class-quick.yaml")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--by-program", action="store_true", help="also list execs per program")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one_run(args.config)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "execve.trace"
        marks = run_child(args.config, ["strace", "-f", "-qq", "-ttt", "-e", "trace=execve",
                                        "-o", str(trace)])
        build, down = split(execs(trace), marks)
    samples = [run_child(args.config, []) for _ in range(args.repeat)]
    build_s = statistics.median(s["build_s"] for s in samples)
    down_s = statistics.median(s["teardown_s"] for s in samples)
    print(f"{'phase':<9} {'execs':>6} {'seconds':>8}")
    print(f"{'build':<9} {sum(build.values()):>6} {build_s:>8.2f}")
    print(f"{'teardown':<9} {sum(down.values()):>6} {down_s:>8.2f}")
    if args.by_program:
        for phase, counts in (("build", build), ("teardown", down)):
            print(f"{phase}: " + ", ".join(f"{p} {n}" for p, n in counts.most_common()))

if __name__ == "__main__":
    main()
