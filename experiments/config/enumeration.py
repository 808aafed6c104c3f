"""What one run of a config will enumerate, counted in closed form before anything is
drawn: the transfers of a closed pattern (iterations x requests x the pattern's
transfers on the hosts) or the expected arrivals of an open-loop one (offered load over
the mean size). `pathdiv check` refuses a run above MAX_TRANSFERS and a plan above
MAX_PLAN_TRANSFERS from these counts, so the bounds of single keys cannot multiply into
millions of transfers (a k=8 permutation at 1000 x 100 was 12.8 M)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pathdiv.analysis.safe_yaml import shorten
from pathdiv.experiments.config.checks import MAX_TRANSFERS, parse_size
from pathdiv.experiments.config.sizes import MIN_SIZE, mean_size, size_cdf
from pathdiv.experiments.config.workloads import PATTERNS


def run_transfers(data: Mapping[str, Any], hosts: int) -> float:
    """How many transfers one run of `data` makes on `hosts` hosts, in closed form
    (the expected count of an open-loop pattern's arrivals), before any is drawn."""
    w = data["workload"]
    pattern = PATTERNS[str(w["pattern"])]
    if not pattern.open_loop:
        return int(w["iterations"]) * int(w["requests"]) * pattern.transfers(hosts)
    rate = data["topology"]["links"]["host"]["bw_mbps"]
    cap = parse_size(w["max_size"]) if w["max_size"] is not None else None
    mean = mean_size(size_cdf(str(w["sizes"]), cap))
    per_host = float(w["load"]) * float(rate or 0) * 1e6 / 8 / max(mean, MIN_SIZE)
    return hosts * per_host * float(w["duration_s"])


def enumeration_problems(data: Mapping[str, Any], hosts: int) -> list[str]:
    """What one run would enumerate, bounded before anything enumerates it: a closed
    pattern the hosts cannot carry, or more transfers (arrivals) than MAX_TRANSFERS."""
    w = data["workload"]
    pattern = PATTERNS[str(w["pattern"])]
    if not pattern.open_loop:
        why = pattern.hosts_problem(hosts)
        carried = [p.name for p in PATTERNS.values() if not p.hosts_problem(hosts)]
        if why:
            return [f"workload.pattern: {pattern.name!r} cannot be drawn on the {hosts} "
                    f"hosts of this {data['topology']['kind']} topology: it {why}; choose "
                    f"one it can carry ({', '.join(carried)})"]
        count = run_transfers(data, hosts)
        if count > MAX_TRANSFERS:
            return [f"workload.iterations: {w['iterations']} x workload.requests: "
                    f"{w['requests']} x {pattern.transfers(hosts)} transfers of the "
                    f"{pattern.name} pattern on {hosts} hosts make {count} transfers per run; "
                    f"a run has at most {MAX_TRANSFERS}: lower iterations or requests"]
        return []
    count = run_transfers(data, hosts)
    if count > MAX_TRANSFERS * 0.9:  # drawn, a Poisson count stays below the hard cap
        return [f"workload.duration_s: {w['duration_s']} s at workload.load {w['load']} of "
                f"{data['topology']['links']['host']['bw_mbps']} Mbit/s on {hosts} hosts "
                f"makes about {count:.3g} arrivals per run with workload.sizes "
                f"{shorten(Path(str(w['sizes'])).name, 40)}; a run has at most "
                f"{int(MAX_TRANSFERS * 0.9)} expected: shorten the window or lower the load"]
    return []
