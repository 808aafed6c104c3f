"""Runs → metrics.csv: one row per (run, transfer group), ready for the statistics.

`compute_transfer_metrics(run_dir)` measures every transfer of one run
(`pathdiv.analysis.metrics.transfer` holds the definitions); `compute_run_metrics(run_dir)`
folds the transfers of each group (a partition-aggregate request's fan-out, or one
silent transfer) into one row; `compute_metrics(results_dir)` does that for every
complete run and writes `metrics.csv` (and the per-transfer `transfer_metrics.csv`).

A group's `fct_s` is its longest transfer's; its throughput, goodput and excess use
the group's summed bytes over that FCT; `utilization`, `subflows` and the path counts
are means over its transfers; `retrans_pct`, `reorder_pct` and `ce_pct` are pooled ratios,
`rtt_ms` the mean of every transfer's RTT samples pooled.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import pathdiv.analysis.readers as readers
from pathdiv.analysis.atomic import write_bytes_atomic, write_text_atomic
from pathdiv.analysis.capture.flows import (
    capture_files,
    group_connections,
    match_transfers,
    read_link_captures,
    split_subflows,
)
from pathdiv.analysis.capture.pcap import ip_to_int
from pathdiv.analysis.metrics import measured
from pathdiv.analysis.metrics.columns import METRIC_COLUMNS
from pathdiv.analysis.metrics.paths_run import (
    SERIES_COLUMNS,
    SERIES_FILE,
    paths_row,
    read_paths_result,
    series_rows,
)
from pathdiv.analysis.metrics.registry import METRICS, as_number
from pathdiv.analysis.metrics.sharing import cpu_ms_per_mb, energy_j, run_energy
from pathdiv.analysis.metrics.slowdown import slowdown_table, slowdowns
from pathdiv.analysis.metrics.timeline import goodput_timeline
from pathdiv.analysis.metrics.transfer import (
    MEASURES,
    PairGeometry,
    measure_transfer,
)
from pathdiv.topologies.conditions import fat_tree_of, resolve
from pathdiv.topologies.fattree import FatTree

log = logging.getLogger(__name__)



# Columns after the run's factors, run_id, repetition, seed, condition and group_id.
GROUP_COLUMNS = [
    "flow_type",
    "transfers",
    "ok",
    "payload_bytes",
    *METRIC_COLUMNS,
    "shared_subflows",
    "distinct_paths",
    "ce_pct",
    "rtt_ms",
    "open_subflows",
    "cpu_ms_per_mb",
    "energy_j",
    "subflows_opened",
    "paths",
    "paths_used",
    "wire_bytes",
    "error",
]

# Columns of the whole run, the same on each of its rows (sharing.run_energy): compare
# them over runs (one value per run_id), not over the rows.
RUN_COLUMNS = ["run_hosts_cpu_s", "run_energy_j", "run_cpu_s", "run_softirq_s",
               "run_windows_closed"]


class RunLayoutError(ValueError):
    """A run folder without the files the runner writes."""


class KeptRowsError(ValueError):
    """Recorded rows of a run whose captures are gone that cannot stand beside rows
    measured now (the message names the run and the fix)."""


def load_manifest(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "manifest.json"
    doc = readers.read_record(path)  # no link followed, bounded (readers.py)
    if doc is None:
        raise RunLayoutError(
            f"{path} missing; expected a run folder written by `pathdiv run` "
            "(manifest.json, transfers.csv, captures/)"
        )
    if not isinstance(doc, dict):
        raise RunLayoutError(f"{path} is not a JSON object")
    return doc


def run_topology(config: dict[str, Any]) -> FatTree:
    """The run's fat tree as the runner built it (alias addresses for MPTCP subflows)."""
    kind = config.get("topology", {}).get("kind", "fattree")
    if kind != "fattree":
        raise RunLayoutError(f"topology.kind {kind!r} not supported by analysis; expected fattree")
    return fat_tree_of(config)


def load_transfers(run_dir: Path) -> pd.DataFrame:
    path = run_dir / "transfers.csv"
    try:
        tr = readers.read_table(path, dtype={"error": str, "client_addr": str,
                                             "server_addr": str})
    except FileNotFoundError:
        raise RunLayoutError(f"{path} missing; the runner writes one per run") from None
    tr["ok"] = tr["ok"].astype(str).str.strip().str.lower().isin(["true", "1", "yes"])
    tr["error"] = tr["error"].fillna("") if "error" in tr else ""
    return tr


# Measures that need the fabric's links (a transfer's bytes on each of its paths), empty
# when only the hosts' access links were captured (capture.links: access).
FABRIC_MEASURES = ("throughput_mbps", "wire_bytes", "excess_pct", "utilization",
                   "paths_used", "shared_subflows", "distinct_paths", "path_bytes",
                   "path_pkts", "links_used")


def compute_transfer_metrics(run_dir: Path, extras: Path | None = None) -> pd.DataFrame:
    """One row per transfer of the run: transfers.csv's columns plus the measures.
    `extras`: where the run's timeline.csv goes (default: the run's folder)."""
    run_dir = Path(run_dir)
    manifest = load_manifest(run_dir)
    topo = run_topology(manifest.get("config", {}))
    clock = str(manifest.get("clock") or "real")  # lab-kernel runs in a UML guest: virtual
    transfers = load_transfers(run_dir).rename(columns={"subflows": "subflows_app"})
    log.info("run %s: reading captures", manifest.get("run_id", run_dir.name))
    full = ((manifest.get("capture") or {}).get("stop") or {}).get("files_full")
    if full:
        log.warning(
            "run %s: captures %s hit their size cap; transfers after that are measured "
            "from incomplete captures (raise capture.budget_mb)",
            manifest.get("run_id", run_dir.name), ", ".join(map(str, full)),
        )
    packets = read_link_captures(run_dir / "captures", topo)
    pk, table = split_subflows(packets)
    table = group_connections(table)
    members = match_transfers(transfers, table, topo)
    index = pk.groupby("subflow").indices
    geometry: dict[tuple[str, str], PairGeometry] = {}
    conds = resolve(topo, (manifest.get("config", {}).get("topology") or {})
                    .get("link_overrides") or {})
    rows = []
    for tr in transfers.itertuples(index=False):
        pair = (str(tr.client), str(tr.server))
        if pair not in geometry:
            edge = topo.links_of(pair[1])[0].peer_of(pair[1]).node
            geometry[pair] = PairGeometry.of(topo, *pair,
                                             server_mbps=conds[(pair[1], edge)].bw_mbps)
        sfs = members.get(int(tr.transfer_id), [])
        # The client's addresses: the topology's, plus any its subflows came from.
        server_addrs = {ip_to_int(a) for a in topo.host_addresses(pair[1])}
        initiators = set(table.loc[sfs, "init_addr"].astype(int)) - server_addrs if sfs else set()
        client_addrs = np.array(
            sorted({ip_to_int(a) for a in topo.host_addresses(pair[0])} | initiators),
            dtype=np.uint32,
        )
        rows_of = [index[s] for s in sfs if s in index]
        tp = pk.iloc[np.sort(np.concatenate(rows_of))] if rows_of else pk.iloc[0:0]
        m = measure_transfer(tp, geometry[pair], client_addrs, int(tr.size_bytes))
        m["measured"] = bool(sfs) and bool(np.isfinite(m["fct_s"]))
        m["cpu_ms_per_mb"] = cpu_ms_per_mb(
            float(getattr(tr, "cpu_ms", float("nan"))),
            float(getattr(tr, "server_cpu_ms", float("nan"))), float(tr.size_bytes), clock)
        rows.append(m)
    columns = [*MEASURES, "cpu_ms_per_mb", "measured"]
    measures = pd.DataFrame(rows, columns=columns, index=transfers.index)
    if (((manifest.get("capture") or {}).get("start") or {}).get("links")) == "access":
        measures[list(FABRIC_MEASURES)] = np.nan  # read off links that were not captured
    log.info("run %s: measured %d transfers", manifest.get("run_id"), len(transfers))
    out = pd.concat([transfers, measures], axis=1)
    for metric in (m for m in METRICS.values() if m.per == "transfer"):
        out[metric.name] = [as_number(metric.name, metric.compute(row))
                            for row in out.to_dict("records")]
    write_run_extras(extras or run_dir, manifest, packets, out)
    return out


def registered_values(g: pd.DataFrame) -> dict[str, float]:
    """A group's values of the registered metrics (registry.py: pathdiv's own and the
    user's)."""
    values = {}
    for metric in METRICS.values():
        if metric.per == "transfer":
            # NaN where the transfers were measured without it (rows built elsewhere)
            values[metric.name] = (metric.group_value([float(v) for v in g[metric.name]])
                                   if metric.name in g else float("nan"))
        else:
            values[metric.name] = as_number(metric.name, metric.compute(g))
    return values


def write_run_extras(run_dir: Path, manifest: dict[str, Any], packets: pd.DataFrame,
                     transfers: pd.DataFrame) -> None:
    """timeline.csv (goodput over time) and, for poisson runs, the slowdown column."""
    config = manifest.get("config", {})
    t0 = manifest.get("workload_start_wall_s")
    if not t0 and len(transfers):
        t0 = float(transfers["start_s"].min())
    if not config or not t0:
        return
    port = int(config.get("workload", {}).get("server_port", 8080))
    topo = run_topology(config)
    timeline = goodput_timeline(packets, topo, port, float(t0))
    write_text_atomic(run_dir / "timeline.csv", timeline.to_csv(index=False))
    if config.get("workload", {}).get("pattern") == "poisson":
        conds = resolve(topo, config["topology"].get("link_overrides") or {})
        transfers["slowdown"] = slowdowns(transfers, topo, conds)


def path_columns(n_paths: int) -> list[str]:
    """metrics.csv's per-path columns: `path_1_share` is the busiest path's share."""
    return [f"path_{i}_share" for i in range(1, n_paths + 1)]


def path_shares(g: pd.DataFrame, n_paths: int) -> list[float]:
    """Mean over the group's transfers of each one's data bytes per equal-cost path as
    shares, busiest path first (padded with 0 where a pair has fewer paths): 1, 0, 0, 0
    is one path; .25 each is all four alike. NaN when a transfer was not measured."""
    shares = []
    for text in g["path_bytes"] if "path_bytes" in g else []:
        values = sorted((float(v) for v in str(text).split(";") if v not in ("", "nan")),
                        reverse=True)
        total = sum(values)
        if not values or total <= 0:
            return [float("nan")] * n_paths
        padded = (values + [0.0] * n_paths)[:n_paths]
        shares.append([v / total for v in padded])
    if not shares:
        return [float("nan")] * n_paths
    return [float(x) for x in np.mean(np.array(shares), axis=0)]


def _group_row(g: pd.DataFrame, power: tuple[float, float] = (15.0, 0.0)) -> dict[str, Any]:
    """One group's row; a transfer that could not be measured makes its metrics NaN.
    `power`: (busy watts per core, idle watts per host) of the energy model."""

    def total(col: str) -> float:
        return float(g[col].sum(min_count=len(g)))

    def mean(col: str) -> float:
        return float(g[col].mean(skipna=False))

    fct = g["fct_s"].max(skipna=False)
    wire, payload = total("wire_bytes"), g["payload_bytes"].sum()
    sent, retx = total("data_bytes_sent"), total("retrans_bytes")
    received, late = total("data_pkts_received"), total("reordered_pkts")
    ect, ce = total("ect_pkts_received"), total("ce_pkts")
    nan = float("nan")
    cpu_ms = (g["cpu_ms_per_mb"] * g["payload_bytes"] / 1e6).sum(min_count=len(g))
    samples = g["rtt_samples"].fillna(0) if "rtt_samples" in g else pd.Series(0.0, g.index)
    rtt_sum = (g["rtt_ms"].fillna(0) * samples).sum() if "rtt_ms" in g else 0.0
    ok = bool(g["ok"].all() and g["measured"].all())
    return {
        "flow_type": "+".join(sorted(set(g["flow_type"].astype(str)))),
        "transfers": len(g),
        "ok": ok,
        "payload_bytes": payload,
        "fct_s": fct,
        "throughput_mbps": wire * 8 / fct / 1e6 if fct > 0 else nan,
        "goodput_mbps": payload * 8 / fct / 1e6 if fct > 0 else nan,
        "utilization": mean("utilization"),
        "excess_pct": 100.0 * (wire - payload) / payload if payload > 0 else nan,
        "retrans_pct": 100.0 * retx / sent if sent > 0 else nan,
        "reorder_pct": 100.0 * late / received if received > 0 else nan,
        "subflows": mean("subflows"),
        "shared_subflows": mean("shared_subflows"),
        "distinct_paths": mean("distinct_paths"),
        "ce_pct": 100.0 * ce / ect if ect > 0 else nan,
        "rtt_ms": float(rtt_sum / samples.sum()) if samples.sum() > 0 else nan,
        "open_subflows": mean("open_subflows") if "open_subflows" in g else nan,
        "cpu_ms_per_mb": float(cpu_ms / (payload / 1e6)) if payload > 0 else nan,
        "energy_j": energy_j(float(cpu_ms), float(fct),
                             len(set(g["client"].astype(str)) | set(g["server"].astype(str)))
                             if "client" in g and "server" in g else 0, *power),
        "subflows_opened": mean("subflows_opened"),
        "paths": mean("paths"),
        "paths_used": mean("paths_used"),
        "wire_bytes": wire,
        "error": "; ".join(e for e in g["error"].astype(str) if e),
    }


def _lead(manifest: dict[str, Any]) -> dict[str, Any]:
    """The columns every metrics.csv row starts with: the run's factors and identity."""
    config = manifest.get("config", {})
    return {
        **dict(manifest.get("factors", {})),
        "run_id": manifest.get("run_id"),
        "repetition": manifest.get("repetition"),
        "seed": manifest.get("seed"),
        "condition": config.get("workload", {}).get("pattern"),
        "fidelity": (manifest.get("fidelity") or {}).get("verdict", "unknown"),
    }


def group_metrics(transfers: pd.DataFrame, manifest: dict[str, Any]) -> pd.DataFrame:
    """Fold per-transfer measures into one row per group with the run's factors."""
    config = manifest.get("config", {})
    lead = _lead(manifest)
    n_paths = (run_topology(config).k // 2) ** 2
    per_path = path_columns(n_paths)
    model = config.get("energy") or {}
    power = (float(model.get("busy_watts_per_core", 15.0)), float(model.get("idle_watts", 0.0)))
    hosts = (set(transfers["client"].astype(str)) | set(transfers["server"].astype(str))
             if "client" in transfers and "server" in transfers else set())
    fidelity = manifest.get("fidelity") or {}
    run = run_energy(fidelity.get("figures") or {},
                     str(manifest.get("clock") or fidelity.get("clock") or "real"),
                     len(hosts), *power)
    rows = [
        {**lead, "group_id": gid, **_group_row(g, power), **run,
         **dict(zip(per_path, path_shares(g, n_paths), strict=True)), **registered_values(g)}
        for gid, g in transfers.groupby("group_id", sort=True)
    ]
    return pd.DataFrame(rows, columns=[*lead, "group_id", *GROUP_COLUMNS, *RUN_COLUMNS,
                                       *per_path, *METRICS])


def paths_group(run_dir: Path, manifest: dict[str, Any]) -> pd.DataFrame:
    """The one metrics.csv row of a parallel-paths run (analysis/metrics/paths_run.py)."""
    lead = _lead(manifest)
    row = {**lead, "group_id": 0, "flow_type": manifest.get("flow_type"),
           **paths_row(read_paths_result(run_dir))}
    extra = [c for c in row if c not in lead and c not in ("group_id", *GROUP_COLUMNS)]
    return pd.DataFrame([row], columns=[*lead, "group_id", *GROUP_COLUMNS, *extra])


def compute_run_metrics(run_dir: Path) -> pd.DataFrame:
    """metrics.csv rows of one run (one per transfer group)."""
    run_dir = Path(run_dir)
    return group_metrics(compute_transfer_metrics(run_dir), load_manifest(run_dir))


def captures_gone(run_dir: Path) -> bool:
    """Whether the run has no capture file left (its captures/ deleted or emptied)."""
    try:
        return not capture_files(run_dir / "captures")
    except OSError:
        return True


class Recorded:
    """A folder's metrics stage as the last analysis left it (metrics.csv,
    transfer_metrics.csv, measured.json, runs/<id>/timeline.csv), for the runs whose
    captures are gone since."""

    def __init__(self, folder: Path, notes: list[str]) -> None:
        self.folder = Path(folder)
        self.runs = measured.read_measured(self.folder, notes)
        self._tables: dict[str, pd.DataFrame | None] = {}

    def table(self, name: str) -> pd.DataFrame | None:
        if name not in self._tables:
            try:
                self._tables[name] = readers.read_table(self.folder / name)
            except (FileNotFoundError, readers.FolderError):
                self._tables[name] = None
        return self._tables[name]

    def rows(self, name: str, run_id: str) -> pd.DataFrame | None:
        table = self.table(name)
        if table is None or "run_id" not in table:
            return None
        mine = table[table["run_id"].astype(str) == run_id]
        return mine if len(mine) else None


def _keep(recorded: Recorded, run_dir: Path, run_id: str, manifest: dict[str, Any],
          target: Path) -> pd.DataFrame | None:
    """The recorded metrics.csv rows of a run whose captures are gone, if it has any
    (KeptRowsError when they came from another analysis or another run); its recorded
    timeline.csv goes into `target` with them."""
    rows = recorded.rows("metrics.csv", run_id)
    if rows is None:
        return None
    why = measured.why_not_kept(run_id, recorded.runs.get(run_id), manifest)
    if why is not None:
        raise KeptRowsError(
            f"{recorded.folder}/metrics.csv holds rows of run {run_id}, whose captures are "
            f"gone, that cannot stand beside the runs measured now: {why}. Restore "
            f"{run_dir / 'captures'} to measure it again, or remove run {run_id}'s rows "
            "from metrics.csv to leave it out, or analyse the recorded metrics.csv as it "
            "is with `pathdiv analyze --stats-only` (no run measured again); nothing was "
            "changed")
    timeline = recorded.folder / "runs" / run_dir.name / "timeline.csv"
    there = target / "runs" / run_dir.name / "timeline.csv"
    if timeline != there:
        try:
            write_bytes_atomic(there, readers.read_bytes(timeline, readers.MAX_TABLE_BYTES))
        except (FileNotFoundError, readers.FolderError):
            pass
    return rows


def compute_metrics(results_dir: Path, out: Path | None = None,
                    notes: list[str] | None = None, recorded: Path | None = None) -> Path:
    """Write metrics.csv (and transfer_metrics.csv, measured.json, each run's
    timeline.csv) over every complete run under results_dir/runs/ into `out` (default:
    results_dir; an analysis gives its generation's staging folder,
    analysis/generation.py); return the metrics.csv path. A run that cannot be measured
    (an unreadable manifest, transfers or captures: a guest may have written anything)
    is skipped, its reason logged and appended to `notes`; only when no run is left is
    it an error. With `recorded` (the folder whose metrics stage an earlier analysis
    wrote), a run whose captures are gone keeps its recorded rows, said in `notes`, if
    measured.json says they came from this analysis and this run (KeptRowsError
    otherwise, naming the run and the fix)."""
    results_dir = Path(results_dir)
    target = Path(out) if out is not None else results_dir
    notes = notes if notes is not None else []
    found = readers.manifests(results_dir, notes)
    before = Recorded(recorded, notes) if recorded is not None else None
    groups, transfers = [], []
    series: list[dict[str, Any]] = []
    factors: set[str] = set()
    records: dict[str, dict[str, str]] = {}
    for run_dir, manifest in found:
        if manifest.get("status") != "complete":
            log.info("skipping run %s: status %s", run_dir.name, manifest.get("status"))
            continue
        run_id = str(manifest.get("run_id", run_dir.name))
        config = manifest.get("config")
        topology = config.get("topology") if isinstance(config, dict) else None
        is_paths = isinstance(topology, dict) and topology.get("kind") == "paths"
        if before is not None and not is_paths and captures_gone(run_dir):
            kept = _keep(before, run_dir, run_id, manifest, target)
            if kept is not None:
                say = (f"run {run_id}: its captures are gone; its metrics.csv rows were "
                       "kept as measured before its captures were deleted (same analysis, "
                       "same run)")
                log.warning("%s", say)
                notes.append(say)
                groups.append(kept)
                records[run_id] = before.runs[run_id]
                factors |= set(manifest.get("factors") or {})
                per = before.rows("transfer_metrics.csv", run_id)
                if per is not None:
                    transfers.append(per.reset_index(drop=True))
                continue
        try:
            if is_paths:
                group = paths_group(run_dir, manifest)
                more = series_rows(str(manifest.get("run_id")), read_paths_result(run_dir))
                groups.append(group)
                records[run_id] = measured.record(manifest)
                series += more
                continue
            per_transfer = compute_transfer_metrics(run_dir, target / "runs" / run_dir.name)
            group = group_metrics(per_transfer, manifest)
        except Exception as exc:  # one bad run is reported and skipped, not fatal
            why = f"run {run_dir.name} was not measured: {type(exc).__name__}: {exc}"
            log.warning("%s", why)
            notes.append(why[:600] + ("..." if len(why) > 600 else ""))
            continue
        groups.append(group)
        records[run_id] = measured.record(manifest)
        factors |= set(manifest.get("factors") or {})
        per_transfer.insert(0, "run_id", manifest.get("run_id", run_dir.name))
        transfers.append(per_transfer)
    if not groups:
        raise RunLayoutError(
            f"no complete runs under {results_dir / 'runs'} ({len(found)} manifests "
            "found); run or resume the experiment with `pathdiv run CONFIG --out "
            f"{results_dir}` first"
            + (f" ({'; '.join(notes[:3])})" if notes else "")
        )
    path = target / "metrics.csv"
    write_text_atomic(path, pd.concat(groups, ignore_index=True).to_csv(index=False))
    write_text_atomic(target / measured.MEASURED_FILE, measured.measured_json(records))
    if series:
        write_text_atomic(target / SERIES_FILE,
                          pd.DataFrame(series, columns=SERIES_COLUMNS).to_csv(index=False))
    if not transfers:  # parallel-paths runs only: no transfers.csv to fold
        log.info("wrote %s (%d rows)", path, sum(len(g) for g in groups))
        return path
    every = pd.concat(transfers, ignore_index=True)
    write_text_atomic(target / "transfer_metrics.csv", every.to_csv(index=False))
    if "slowdown" in every.columns:
        write_text_atomic(target / "slowdown.csv",
                          slowdown_table(every, sorted(factors)).to_csv(index=False))
    log.info("wrote %s (%d rows)", path, sum(len(g) for g in groups))
    return path
