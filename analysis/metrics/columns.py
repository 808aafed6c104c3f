"""The names of metrics.csv's measures: the vocabulary the config's `analysis.dvs` is
checked against at `pathdiv check`, kept apart from the arithmetic (no numpy here)."""

from __future__ import annotations

# The study's metrics, one column each in metrics.csv (names kept from the issue).
METRIC_COLUMNS = [
    "fct_s",
    "throughput_mbps",
    "goodput_mbps",
    "utilization",
    "excess_pct",
    "retrans_pct",
    "reorder_pct",
    "subflows",
]

# Numeric columns of metrics.csv a MANOVA can take as dependent variables.
DEPENDENT_VARIABLES = (*METRIC_COLUMNS, "shared_subflows", "distinct_paths", "ce_pct",
                       "rtt_ms", "open_subflows", "cpu_ms_per_mb", "energy_j",
                       "subflows_opened", "paths_used", "wire_bytes",
                       # parallel-paths runs (topology.kind: paths; metrics/paths_run.py)
                       "ofo_mean_pkts", "copied_pct", "path1_share", "path2_share",
                       "goodput_before_mbps", "goodput_after_mbps")


def dependent_variables() -> tuple[str, ...]:
    """DEPENDENT_VARIABLES and the metrics registered from user code (registry.py)."""
    from pathdiv.analysis.metrics.registry import METRICS

    return (*DEPENDENT_VARIABLES, *METRICS)
