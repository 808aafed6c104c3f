"""metrics.csv's row of a run on the parallel-paths topology (topology.kind: paths).

Such a run has one measured MPTCP (or TCP) fetch and writes its measurements to
`paths.json` (experiments/traffic/paths_run.py) instead of transfers.csv and a capture
of every link. Its row carries the measures that file holds; the fat tree's
(utilization, shared subflows, ...) are NaN. Added measures: `ofo_mean_pkts` (the
receiver's mean out-of-order queue, analysis/metrics/reorder_queue.py), `copied_pct`
(data segments repeating a DSN), `path<i>_share` (each path's share of the data
segments' bytes the client received) and, for a run with `events`,
`goodput_before_mbps` / `goodput_after_mbps` (what the client read before the first
event and after it, over the time on each side: seed 003's Fig. 10 compares schedulers
while both paths are good and after one breaks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pathdiv.analysis.readers as readers

PATHS_RESULT = "paths.json"
MAX_PATH_COLUMNS = 8


def paths_row(result: dict[str, Any]) -> dict[str, Any]:
    """The measures of one paths run (NaN where the run did not measure one)."""
    nan = float("nan")
    fct = float(result.get("fct_s") or nan)
    got = int(result.get("bytes") or 0)
    per_path = result.get("bytes_per_path") or {}
    total = sum(per_path.values())
    row: dict[str, Any] = {
        "transfers": 1,
        "ok": bool(result.get("complete")),
        "payload_bytes": got,
        "fct_s": fct,
        "goodput_mbps": 8 * got / fct / 1e6 if fct > 0 else nan,
        "throughput_mbps": 8 * total / fct / 1e6 if fct > 0 and total else nan,
        "subflows": float(result.get("subflows_seen") or nan),
        "ofo_mean_pkts": float(result.get("ofo_mean_pkts", nan)),
        "copied_pct": 100.0 * float(result.get("copied_share", nan)),
        "error": "" if result.get("complete") else "incomplete fetch",
    }
    row["goodput_before_mbps"], row["goodput_after_mbps"] = around_first_event(result)
    for i in range(1, MAX_PATH_COLUMNS + 1):
        if f"path{i}" in per_path or i <= len(result.get("topology") or []):
            row[f"path{i}_share"] = per_path.get(f"path{i}", 0) / total if total else nan
    return row


def around_first_event(result: dict[str, Any]) -> tuple[float, float]:
    """Goodput (Mbit/s) before the run's first event and after it: the bytes the client
    read in the goodput series' bins ending by the event's time, over that time, and the
    rest over the rest of the fetch. NaN on a side with no time (no event, or the fetch
    ended before it). Bins are SAMPLE_S long and end at multiples of it; an event time
    between two bin ends counts the bin that holds it after the event."""
    nan = float("nan")
    events = result.get("events") or []
    fct = float(result.get("fct_s") or 0.0)
    series = result.get("goodput_series") or []
    if not events or fct <= 0 or not series:
        return nan, nan
    at = min(float(e["at_s"]) for e in events)
    step = float(series[0][0])  # the first bin ends one step after the start
    # a bin is before the event when it ends by the event (1 ms of slack: rounding)
    early = [(t, v) for t, v in series if t <= at + 1e-3]
    cut = min(max((t for t, _ in early), default=0.0), fct)
    before_mbit = sum(v * step for _, v in early)
    total_mbit = 8 * float(result.get("bytes") or 0) / 1e6
    before = before_mbit / cut if cut > 0 else nan
    after = (total_mbit - before_mbit) / (fct - cut) if fct > cut else nan
    return before, after


SERIES_FILE = "paths_series.csv"  # a results folder's time series of its paths runs
SERIES_COLUMNS = ["run_id", "series", "path", "t_s", "value"]


def series_rows(run_id: str, result: dict[str, Any]) -> list[dict[str, Any]]:
    """A paths run's time series as long rows: goodput of the connection (Mbit/s, what
    the client read), throughput per subflow (Mbit/s acknowledged, by path), the
    receiver's out-of-order queue (segments), each per sampling step, and each subflow's
    sampled state (series subflow_rtt_ms, subflow_unacked_pkts, subflow_notsent_bytes,
    subflow_pacing_mbps, by path)."""
    rows = [{"run_id": run_id, "series": "goodput_mbps", "path": "", "t_s": t, "value": v}
            for t, v in result.get("goodput_series") or []]
    for path, points in sorted((result.get("subflow_mbps") or {}).items()):
        rows += [{"run_id": run_id, "series": "subflow_mbps", "path": path, "t_s": t,
                  "value": v} for t, v in points]
    rows += [{"run_id": run_id, "series": "ofo_pkts", "path": "", "t_s": t, "value": v}
             for t, v in result.get("ofo_series") or []]
    state = dict(result.get("subflow_state") or {})
    fields = state.pop("fields", [])
    for path, points in sorted(state.items()):
        for point in points:
            rows += [{"run_id": run_id, "series": f"subflow_{name}", "path": path,
                      "t_s": point[0], "value": value}
                     for name, value in zip(fields[1:], point[1:], strict=True)]
    return rows


def read_paths_result(run_dir: Path) -> dict[str, Any]:
    """The run's paths.json (a guest wrote it: read through no link, bounded)."""
    value = readers.read_record(Path(run_dir) / PATHS_RESULT)
    if not isinstance(value, dict):
        raise readers.FolderError(f"{Path(run_dir) / PATHS_RESULT} is missing or not an "
                                  "object")
    return value
