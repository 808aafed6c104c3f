"""What a P4 plane costs in the lab kernel: `pathdiv probe` on it versus the nftables plane.

Both run the same probe (configs/class-probe.yaml, hosts.kernel: lab, virtual clock) in
turn, kernel then the P4 plane (`--plane bmv2` or `p4-ebpf`), `--reps` pairs; each prints
its wall time, the CPU time of the lab kernel's processes (UML and everything in the
guest are host processes), the host's steal share beside it, and what the probe
measured (so a cheaper run that forwards worse shows). The ratio P4/kernel is taken pair
by pair, so a machine whose speed drifts between pairs still compares like with like.
Root; one emulation at a time. The host compiles the P4 programs before the first pair.

    python benchmarks/p4_lab.py [--plane bmv2|p4-ebpf] [--reps 1]
                                [--config configs/class-probe.yaml] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from hoststat import HostLoad

REPO = Path(__file__).resolve().parents[1]
P4_PLANES = ("bmv2", "p4-ebpf")


def probe(config: str, plane: str, sets: list[str]) -> tuple[dict, HostLoad]:
    argv = [sys.executable, "-m", "pathdiv.experiments.cli", "probe", config, "--json",
            "--set", "hosts.kernel=lab", "--set", f"dataplane={plane}"]
    for item in sets:
        argv += ["--set", item]
    with HostLoad() as host:
        proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"probe on {plane} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout), host


def spread(per_core: dict[str, int]) -> str:
    total = sum(per_core.values()) or 1
    return "/".join(f"{n / total:.2f}" for n in per_core.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plane", choices=P4_PLANES, default="bmv2")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--config", default="configs/class-probe.yaml")
    parser.add_argument("--set", action="append", default=[], help="extra config override")
    args = parser.parse_args()
    planes = ("kernel", args.plane)
    ratios_wall, ratios_cpu = [], []
    for rep in range(args.reps):
        pair = {}
        for plane in planes:
            result, host = probe(args.config, plane, args.set)
            pair[plane] = host
            print(f"rep {rep + 1} {plane:<7} {host}; goodput fraction "
                  f"{result['goodput_fraction']:.4f}, one flow's spray/ecmp core shares "
                  f"{spread(result['tcp_single']['per_core'])}, "
                  f"{result['kernel_release']} ({result['clock']} clock)", flush=True)
        ratios_wall.append(pair[args.plane].wall_s / pair["kernel"].wall_s)
        ratios_cpu.append(pair[args.plane].cpu_s / max(pair["kernel"].cpu_s, 1e-9))
        steal = max(pair[p].steal for p in planes)
        print(f"rep {rep + 1} {args.plane}/kernel: wall {ratios_wall[-1]:.2f}x, CPU "
              f"{ratios_cpu[-1]:.2f}x (host steal up to {steal:.1%})", flush=True)
    print(f"median {args.plane}/kernel over {args.reps} pair(s): wall "
          f"{statistics.median(ratios_wall):.2f}x, CPU {statistics.median(ratios_cpu):.2f}x")


if __name__ == "__main__":
    main()
