"""Open-loop traffic: Poisson flow arrivals with sizes from an empirical CDF (pure, seeded).

Every host is a client. Its fetches arrive as a Poisson process whose rate makes the
offered load (bytes asked for per second) `load` times its access link rate:
λ = load · rate_bps / (8 · mean size). Each fetch goes to a uniformly random other
host, with a size drawn from the CDF by inverse transform, interpolating linearly
between the CDF's points (as ns-3's EmpiricalRandomVariable and the pFabric/Homa
generators do). The same seed gives the same flows.

Distributions (bytes, cumulative probability):
  websearch   DCTCP web search (Alizadeh et al., SIGCOMM 2010, Fig. 4), as tabulated in
              traffic_gen/WebSearch_distribution.txt of HPCC (Li et al., SIGCOMM 2019);
              mean 1.7 MB.
  datamining  VL2 data mining (Greenberg et al., SIGCOMM 2009, Fig. 2), as tabulated in
              Figure1_traffic/datamining.csv of Opera (Mellette et al., NSDI 2020); mean
              5.0 MB, up to 1 GB (cut it with workload.max_size on slow links).
A CDF file (`workload.sizes: FILE`) is read by `pathdiv.experiments.config.sizes`.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from pathdiv.experiments.config.checks import parse_size
from pathdiv.experiments.config.load import Config
from pathdiv.experiments.config.sizes import Cdf, read_cdf

WEBSEARCH: Cdf = [
    (0, 0.0), (10_000, 0.15), (20_000, 0.20), (30_000, 0.30), (50_000, 0.40),
    (80_000, 0.53), (200_000, 0.60), (1_000_000, 0.70), (2_000_000, 0.80),
    (5_000_000, 0.90), (10_000_000, 0.97), (30_000_000, 1.0),
]
DATAMINING: Cdf = [
    (100, 0.0), (180, 0.085), (250, 0.14), (560, 0.33), (900, 0.47), (1_100, 0.55),
    (1_870, 0.65), (3_160, 0.70), (10_000, 0.80), (100_001, 0.874), (400_000, 0.90),
    (1_850_000, 0.95), (10_000_000, 0.97), (30_000_000, 0.98), (100_000_000, 0.99),
    (250_000_000, 0.995), (1_000_000_000, 1.0),
]
DISTRIBUTIONS = {"websearch": WEBSEARCH, "datamining": DATAMINING}
MIN_SIZE = 1  # a fetch asks for at least one byte


def size_cdf(sizes: str, max_size: int | None = None) -> Cdf:
    """The named distribution or CDF file, cut at `max_size` bytes when given."""
    cdf = DISTRIBUTIONS[sizes] if sizes in DISTRIBUTIONS else read_cdf(sizes)
    return cut(cdf, max_size) if max_size else list(cdf)


def cut(cdf: Cdf, max_size: int) -> Cdf:
    """Every size above `max_size` becomes `max_size` (a point mass at the top)."""
    if cdf[-1][0] <= max_size:
        return list(cdf)
    if cdf[0][0] >= max_size:
        return [(float(max_size), 0.0), (float(max_size), 1.0)]
    kept = [(x, p) for x, p in cdf if x < max_size]
    kept.append((float(max_size), cdf_at(cdf, max_size)))
    kept.append((float(max_size), 1.0))
    return kept


def cdf_at(cdf: Cdf, size: float) -> float:
    xs = [x for x, _ in cdf]
    i = bisect.bisect_right(xs, size)
    if i == 0:
        return 0.0
    if i == len(cdf):
        return 1.0
    (x0, p0), (x1, p1) = cdf[i - 1], cdf[i]
    return p0 if x1 == x0 else p0 + (p1 - p0) * (size - x0) / (x1 - x0)


def mean_size(cdf: Cdf) -> float:
    """Mean of the interpolated distribution (mass below the first point sits on it)."""
    total = cdf[0][0] * cdf[0][1]
    for (x0, p0), (x1, p1) in itertools.pairwise(cdf):
        total += (p1 - p0) * (x0 + x1) / 2
    return total


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
