"""The runner's three calls around a run's traffic phase; none of them fails a run.

`start` records the clock and starts the monitor (None when fidelity.enabled is false
or the monitor cannot start: the manifest then says why); `stop` stops it; `finish`
judges the samples, writes fidelity.json and the manifest's `fidelity` section and
returns the record; `captures` adds what the link captures lost once they stopped.

On the virtual clock a run is `ok` by construction (the host's CPU cannot slow a link:
verdict.py) and the samples are only recorded, so the monitor samples at most once per
VIRTUAL_INTERVAL_S there: in the lab kernel every sample is a netlink dump per
namespace, system calls that each cost a round trip through the host.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pathdiv.experiments.fidelity.monitor import Monitor
from pathdiv.experiments.fidelity.record import (
    build_record,
    lab_monitor,
    manifest_section,
    unmonitored,
    write_record,
)
from pathdiv.experiments.fidelity.verdict import Samples, judge_captures, planned_disturbance
from pathdiv.experiments.running import RunningNetwork

log = logging.getLogger("pathdiv")
VIRTUAL_INTERVAL_S = 1.0


def start(net: RunningNetwork, section: dict[str, Any], manifest: dict[str, Any],
          pace: Callable[[int], object] | None = None) -> Monitor | None:
    """The fidelity monitor of a run, started; None (and why, in the manifest) when off or
    when it cannot start. The run's clock is the manifest's (written by the runner); on
    the virtual clock `pace` puts the samples on the run's clock grid (Monitor)."""
    clock = str(manifest["clock"])
    if not section.get("enabled", True):
        manifest["fidelity"] = unmonitored("fidelity.enabled is false", clock)
        return None
    if clock == "virtual":
        section = {**section, "sample_interval_s": max(
            float(section["sample_interval_s"]), VIRTUAL_INTERVAL_S)}
    try:
        monitor = lab_monitor(net, section)
        monitor.pace = pace
        return monitor.start()
    except Exception as exc:
        manifest["fidelity"] = unmonitored(f"the monitor could not start: "
                                           f"{type(exc).__name__}: {exc}", clock)
        return None


def stop(monitor: Monitor | None) -> Samples | None:
    if monitor is None:
        return None
    try:
        return monitor.stop()
    except Exception as exc:
        monitor.errors.append(f"stop: {type(exc).__name__}: {exc}")
        return None


def finish(monitor: Monitor | None, samples: Samples | None, section: dict[str, Any],
           manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The run's fidelity record, judged, its summary in the manifest (not yet written:
    `captures` adds the captures' losses, `save` writes it once)."""
    clock = manifest.get("clock", "real")
    if monitor is None:
        return None
    if samples is None:
        manifest["fidelity"] = unmonitored(f"the monitor failed: {monitor.errors[-1:]}", clock)
        return None
    try:
        record = build_record(samples, monitor, section, clock,
                              planned_disturbance(manifest.get("config") or {}))
        manifest["fidelity"] = manifest_section(record)
        log.info("fidelity: %s %s", record["verdict"], "; ".join(record["reasons"]))
        return record
    except Exception as exc:
        manifest["fidelity"] = unmonitored(f"the verdict failed: {type(exc).__name__}: {exc}",
                                           clock)
        return None


def captures(record: dict[str, Any] | None, stopped: dict[str, Any],
             manifest: dict[str, Any]) -> None:
    """Judge what the captures lost (`stopped`: `LinkCaptures.stop`'s figures) into the run's
    record and manifest (verdict.judge_captures); nothing without a record."""
    if record is None:
        return
    dropped = int(stopped.get("dropped_by_kernel") or 0)
    full = [str(f) for f in stopped.get("files_full") or []]
    record["figures"]["capture_dropped"] = dropped
    record["figures"]["captures_full"] = len(full)
    record["verdict"], record["reasons"] = judge_captures(
        record["verdict"], record["reasons"], dropped, full)
    manifest["fidelity"] = manifest_section(record)


def save(record: dict[str, Any] | None, run_dir: Path) -> None:
    """Write the run's record (fidelity.json) once, after the captures are judged into
    it; nothing without a record."""
    if record is not None:
        write_record(run_dir, record)
