"""Seeded synthetic metrics tables shaped like the study's, with planted effects.

Used by tests, benchmarks and demos to check that the analysis finds an effect that is
there and does not find one that is not. Nothing here touches files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

STUDY_SWITCHING = ("static-tcp", "ecmp-tcp", "ps-tcp", "ecmp-mptcp", "ps-mptcp")
STUDY_HOSTS = ("vanilla", "rb")
STUDY_CONDITIONS = ("silent", "noisy")
STUDY_FLOW_TYPES = ("query", "short", "long")
BASE_MEANS = {"throughput_mbps": 12.0, "goodput_mbps": 11.0, "fct_s": 2.0, "utilization": 0.5}
BASE_SDS = {"throughput_mbps": 1.0, "goodput_mbps": 1.0, "fct_s": 0.2, "utilization": 0.05}


def synthetic_metrics(
    seed: int,
    repetitions: int = 4,
    effects: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None,
    switching: Sequence[str] = STUDY_SWITCHING,
    hosts: Sequence[str] = STUDY_HOSTS,
    conditions: Sequence[str] = STUDY_CONDITIONS,
    flow_types: Sequence[str] = STUDY_FLOW_TYPES,
    n_paths: int = 4,
) -> pd.DataFrame:
    """One row per (condition, flow type, switching, host, repetition).

    `effects` maps factor -> level -> dv -> shift in units of that dv's standard
    deviation, e.g. {"switching": {"ps-mptcp": {"goodput_mbps": 1.5}}}. Dependent
    variables are independent normal draws around `BASE_MEANS` plus the shifts; the
    table also carries excess_pct and per-path shares `path_<i>_share`.
    """
    rng = np.random.default_rng(seed)
    effects = effects or {}
    rows = []
    run = 0
    for condition in conditions:
        for flow_type in flow_types:
            for sw in switching:
                for host in hosts:
                    for rep in range(repetitions):
                        run += 1
                        levels = {"condition": condition, "flow_type": flow_type,
                                  "switching": sw, "host": host}
                        row: dict[str, object] = {**levels, "run_id": f"r{run:04d}",
                                                  "repetition": rep}
                        for dv, mean in BASE_MEANS.items():
                            shift = sum(
                                effects.get(f, {}).get(level, {}).get(dv, 0.0)
                                for f, level in levels.items()
                            )
                            row[dv] = mean + BASE_SDS[dv] * (shift + rng.standard_normal())
                        row["excess_pct"] = 5.0 + 3.0 * ("ps" in sw) + rng.standard_normal()
                        spread = 1.0 if "ecmp" in sw or "ps" in sw else 0.1
                        shares = rng.dirichlet(np.full(n_paths, spread * 5))
                        for i, share in enumerate(shares):
                            row[f"path_{i}_share"] = float(share)
                        rows.append(row)
    return pd.DataFrame(rows)
