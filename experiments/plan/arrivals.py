"""Open-loop traffic: Poisson flow arrivals with sizes from an empirical CDF (pure, seeded).

Every host is a client. Its fetches arrive as a Poisson process whose rate makes the
offered load (bytes asked for per second) `load` times its access link rate:
λ = load · rate_bps / (8 · mean size). Each fetch goes to a uniformly random other
host, with a size drawn from the CDF by inverse transform, interpolating linearly
between the CDF's points (as ns-3's EmpiricalRandomVariable and the pFabric/Homa
generators do). The same seed gives the same flows.

The distributions (websearch, datamining) and CDF files are `pathdiv.experiments.
config.sizes`. A run holds at most MAX_TRANSFERS flows (`pathdiv check` bounds the
expected count first, in closed form).
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from pathdiv.experiments.config.checks import MAX_TRANSFERS, parse_size
from pathdiv.experiments.config.load import Config
from pathdiv.experiments.config.sizes import (  # noqa: F401  (re-exported: the sizes' home)
    DATAMINING,
    DISTRIBUTIONS,
    MIN_SIZE,
    WEBSEARCH,
    Cdf,
    cdf_at,
    cut,
    mean_size,
    size_cdf,
)


def sample(cdf: Cdf, u: float) -> int:
    """Inverse transform: the size at cumulative probability u in [0, 1)."""
    ps = [p for _, p in cdf]
    i = bisect.bisect_right(ps, u)
    if i == 0:
        return max(MIN_SIZE, round(cdf[0][0]))
    if i >= len(cdf):
        return max(MIN_SIZE, round(cdf[-1][0]))
    (x0, p0), (x1, p1) = cdf[i - 1], cdf[i]
    x = x0 if p1 == p0 else x0 + (x1 - x0) * (u - p0) / (p1 - p0)
    return max(MIN_SIZE, round(x))


@dataclass(frozen=True)
class Flow:
    """One fetch: `client` asks `server` for `size_bytes` at `at_s` into the run."""

    flow_id: int
    at_s: float
    client: str
    server: str
    size_bytes: int


def arrival_rate(load: float, rate_mbps: float, cdf: Cdf) -> float:
    """Fetches per second per host that offer `load` of a `rate_mbps` access link."""
    return load * rate_mbps * 1e6 / 8 / mean_size(cdf)


def arrivals(hosts: Sequence[str], rate_mbps: float, cdf: Cdf, load: float,
             duration_s: float, seed: int, label: str = "poisson",
             partners: dict[str, str] | None = None) -> list[Flow]:
    """Every flow of a window of `duration_s`, in arrival order, ids from 0.

    `partners` (client -> server) fixes each client's server instead of drawing one
    per flow (the background permutation)."""
    if len(hosts) < 2:
        raise ValueError(f"poisson traffic needs at least 2 hosts, got {len(hosts)}")
    if not (load > 0 and rate_mbps > 0 and duration_s > 0):
        raise ValueError(f"load ({load}), rate ({rate_mbps} Mbit/s) and duration "
                         f"({duration_s} s) must be > 0")
    lam = arrival_rate(load, rate_mbps, cdf)
    raw: list[tuple[float, str, str, int]] = []
    for client in hosts:
        rng = random.Random(f"pathdiv-{label}|{seed}|{client}")
        others = [h for h in hosts if h != client]
        t = 0.0
        while True:
            t += -math.log(1.0 - rng.random()) / lam
            if t >= duration_s:
                break
            server = partners[client] if partners else rng.choice(others)
            raw.append((t, client, server, sample(cdf, rng.random())))
            if len(raw) > MAX_TRANSFERS:
                raise ValueError(
                    f"{label}: more than {MAX_TRANSFERS} flows in {duration_s:g} s on "
                    f"{len(hosts)} hosts at load {load:g}; a run holds at most "
                    f"{MAX_TRANSFERS}: shorten workload.duration_s or lower the load")
    raw.sort()
    return [Flow(i, round(t, 6), c, s, n) for i, (t, c, s, n) in enumerate(raw)]


def offered_load(flows: Sequence[Flow], hosts: int, rate_mbps: float,
                 duration_s: float) -> float:
    """Bytes asked for, as a fraction of `hosts` access links over the window."""
    asked = sum(f.size_bytes for f in flows)
    return asked * 8 / (hosts * rate_mbps * 1e6 * duration_s)


def access_rate_mbps(cfg: Config) -> float:
    rate = cfg.link_params()["host"].bw_mbps  # type: ignore[index]
    if rate is None:
        raise ValueError("topology.links.host.bw_mbps: null (unshaped) leaves no link rate "
                         "to offer a load against; set a rate for poisson or background load")
    return float(rate)


def poisson_flows(cfg: Config, hosts: list[str], seed: int) -> list[Flow]:
    """The measured flows of a `poisson` run (pure)."""
    w = cfg.data["workload"]
    cap = parse_size(w["max_size"]) if w["max_size"] is not None else None
    return arrivals(hosts, access_rate_mbps(cfg), size_cdf(str(w["sizes"]), cap),
                    float(w["load"]), float(w["duration_s"]), seed)
