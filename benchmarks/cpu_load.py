"""Run a command under a deliberately heavier CPU load, and say what the host did meanwhile.

    .venv/bin/python benchmarks/cpu_load.py [--policy normal] [--record FILE] -- CMD ...

Starts one spinning process pinned to each core (tests/support/hog.py; `normal`: nice 0,
an equal competitor of the run's switches and hosts, as another job on the machine would
be; `nice`/`fifo` starve everything else) for as long as CMD runs, `--policy none` runs
CMD alone. Samples the 1-minute load average every 5 s and the host's CPU steal over the
whole command, prints them with the wall time and CMD's exit code, and writes them as
JSON to --record. Used for the wall-clock Table IV runs (docs/reproduction.md, "Table IV:
excess traffic"): the same config with and without the spinners. Figures, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support
from hoststat import HostLoad

from tests.support.hog import CpuHog


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", choices=("none", "normal", "nice", "fifo"), default="normal")
    ap.add_argument("--record", type=Path, help="write the figures here (JSON)")
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the command to run")
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("no command: put it after --")
    loads: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(5.0):
            loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    hog = contextlib.nullcontext() if args.policy == "none" else CpuHog(args.policy, 100, 0)
    with HostLoad() as host, hog:
        sampler.start()
        code = subprocess.call(cmd)
        stop.set()
    figures = {
        "command": cmd, "policy": args.policy, "spinners": 0 if args.policy == "none"
        else len(os.sched_getaffinity(0)), "cores": os.cpu_count(), "exit_code": code,
        "wall_s": round(host.wall_s, 1), "steal_pct": round(100 * host.steal, 2),
        "load_1min_mean": round(sum(loads) / len(loads), 2) if loads else None,
        "load_1min_max": round(max(loads), 2) if loads else None,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(f"cpu_load: {args.policy} spinners {figures['spinners']}, exit {code}, wall "
          f"{figures['wall_s']} s, steal {figures['steal_pct']} %, load (1-min) mean "
          f"{figures['load_1min_mean']} max {figures['load_1min_max']}")
    if args.record:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(figures, indent=1) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
