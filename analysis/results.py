"""A results folder as data: `open(folder)` -> `Results`, tidy pandas DataFrames.

This is the public way to read what `pathdiv run` and `pathdiv analyze` wrote, from
Python or a notebook, without re-parsing files by hand:

    from pathdiv.analysis import results
    res = results.open("docs/reproduction/noisy")
    res.observations            # metrics.csv, factor columns as ordered categoricals
    res.stats.manova()          # every cluster's MANOVA, one tidy table
    res.stats.summary_frame("condition=noisy / flow_type=long")  # like statsmodels'

What each attribute holds (empty DataFrames when the folder lacks the file):

- `observations` - metrics.csv, one row per (run, host group, flow type); the factor
  columns (the analysis' clusters and IVs, `flow_type`, `fidelity`) are ordered
  categoricals, levels in the order the config lists them;
- `transfers`    - every run's runs/<id>/transfers.csv, with a `run_id` column;
- `links`        - per-link byte and packet counters over each run's capture window, from
  the manifests' `interface_counters` (one row per run and link direction);
- `fidelity`     - one row per run: its verdict, from the manifests (or metrics.csv);
- `provenance`   - plan.json's runs (factors, seeds, status, wall time) as a table;
  `run_info` holds run.txt's `key: value` lines and `config` the folder's config.yaml;
- `stats`        - stats.json as a `Statistics` object (tables as DataFrames), or None;
- `notes`        - what could not be read (a link, a file too large, a bad manifest)
  and was left out: the folder is read as one written by others (analysis/readers.py).

Only reading happens here: nothing is emulated and nothing is written. The statistics
can be recomputed from the observations with `res.analyze()` (the same code
`pathdiv analyze` runs).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

import pathdiv.analysis.readers as readers
from pathdiv.analysis.generation import interrupted_commit
from pathdiv.analysis.report.analyze import spec_from_config
from pathdiv.analysis.report.fidelity import VERDICTS
from pathdiv.analysis.report.fidelity import split as fidelity_split
from pathdiv.analysis.report.linkmap import LINK_COLUMNS, link_map_svg, link_table
from pathdiv.analysis.stats.spec import AnalysisSpec
from pathdiv.analysis.stats.study import StudyResults, analyze_metrics
from pathdiv.topologies.conditions import fat_tree_of
from pathdiv.topologies.fattree import FatTree

__all__ = ["LINK_COLUMNS", "Results", "Statistics", "link_table", "open"]

# statsmodels' MultivariateTestResults.summary_frame names, for the MANOVA tables.
_STATSMODELS_STATISTIC = {"pillai": "Pillai's trace", "wilks": "Wilks' lambda",
                          "hotelling_lawley": "Hotelling-Lawley trace",
                          "roy": "Roy's greatest root"}


@dataclass
class Statistics:
    """stats.json as objects: the analysis design and, per cluster, its tables."""

    spec: AnalysisSpec
    n_observations: int
    notes: list[str]
    clusters: list[dict[str, Any]]
    excess_traffic: pd.DataFrame

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Statistics:
        spec_keys = ("clusters", "ivs", "dvs", "alpha", "lower_is_better", "min_effect_pct",
                     "level_scope")
        spec = AnalysisSpec(**{k: data["spec"][k] for k in spec_keys if k in data["spec"]})
        return cls(spec=spec, n_observations=int(data.get("n_observations", 0)),
                   notes=list(data.get("notes", [])), clusters=list(data.get("clusters", [])),
                   excess_traffic=pd.DataFrame(data.get("excess_traffic", [])))

    @classmethod
    def from_study(cls, study: StudyResults) -> Statistics:
        return cls.from_dict(json.loads(json.dumps(study.to_dict(), default=str)))

    @property
    def labels(self) -> list[str]:
        """The clusters' labels, e.g. 'condition=noisy / flow_type=long'."""
        return [str(c["label"]) for c in self.clusters]

    def _cluster(self, label: str) -> dict[str, Any]:
        for c in self.clusters:
            if c["label"] == label:
                return c
        raise KeyError(f"no cluster {label!r}; clusters are {self.labels}")

    def _table(self, name: str, cluster: str | None) -> pd.DataFrame:
        chosen = [self._cluster(cluster)] if cluster is not None else self.clusters
        frames = []
        for c in chosen:
            frame = pd.DataFrame(c.get(name, []))
            for position, (k, v) in enumerate(c["key"].items()):
                frame.insert(position, k, v)
            frames.append(frame)
        non_empty = [f for f in frames if not f.empty]
        return pd.concat(non_empty, ignore_index=True) if non_empty else pd.DataFrame()

    def manova(self, cluster: str | None = None) -> pd.DataFrame:
        """MANOVA rows (effect, statistic, value, f, num_df, den_df, p), per cluster."""
        return self._table("manova", cluster)

    def anova(self, cluster: str | None = None) -> pd.DataFrame:
        """Type III univariate ANOVAs with partial eta squared."""
        return self._table("anova", cluster)

    def posthoc(self, cluster: str | None = None) -> pd.DataFrame:
        """Holm-corrected pairwise comparisons."""
        return self._table("posthoc", cluster)

    def rankings(self, cluster: str | None = None) -> pd.DataFrame:
        """Levels ranked per metric, with confidence intervals."""
        return self._table("rankings", cluster)

    def summary_frame(self, cluster: str) -> pd.DataFrame:
        """One cluster's MANOVA shaped as statsmodels' `summary_frame`: index (Effect,
        Statistic), columns Value, Num DF, Den DF, F Value, Pr > F."""
        table = pd.DataFrame(self._cluster(cluster).get("manova", []))
        if table.empty:
            return pd.DataFrame(columns=["Value", "Num DF", "Den DF", "F Value", "Pr > F"])
        table["statistic"] = table["statistic"].map(lambda s: _STATSMODELS_STATISTIC.get(s, s))
        frame = table.rename(columns={"effect": "Effect", "statistic": "Statistic",
                                      "value": "Value", "num_df": "Num DF",
                                      "den_df": "Den DF", "f": "F Value", "p": "Pr > F"})
        return frame.set_index(["Effect", "Statistic"])[
            ["Value", "Num DF", "Den DF", "F Value", "Pr > F"]]


@dataclass
class Results:
    """One results folder, read (see the module's docstring for each attribute)."""

    folder: Path
    observations: pd.DataFrame
    transfers: pd.DataFrame
    links: pd.DataFrame
    fidelity: pd.DataFrame
    provenance: pd.DataFrame
    run_info: dict[str, str]
    config: dict[str, Any] | None
    stats: Statistics | None
    manifests: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be read, and why

    @property
    def spec(self) -> AnalysisSpec:
        """The analysis design: stats.json's, else the config's `analysis`, else defaults."""
        if self.stats is not None:
            return self.stats.spec
        return spec_from_config(self.config)  # as `pathdiv analyze` reads it

    @property
    def topology(self) -> FatTree:
        """The fat tree the runs used (the config's; k=4 without a config)."""
        return fat_tree_of(self.config or {})

    def analyze(self, include_invalid: bool = False) -> Statistics:
        """Recompute the statistics from `observations` (what `pathdiv analyze` does,
        without writing anything); invalid runs are left out unless `include_invalid`."""
        metrics = _plain(self.observations)
        chosen = fidelity_split(metrics, include_invalid)
        return Statistics.from_study(analyze_metrics(chosen.kept, self.spec))

    def run_ids(self, **factors: str) -> list[str]:
        """Run ids whose factor levels match, e.g. `run_ids(switching="ps-tcp")`
        (keys are plan.json's columns: factors, flow_type, repetition, ...)."""
        frame = self.provenance
        if frame.empty:
            frame = self.observations.drop_duplicates("run_id")
        for key, value in factors.items():
            if key not in frame.columns:
                raise KeyError(f"no column {key!r} to select runs by; columns are "
                               f"{sorted(map(str, frame.columns))}")
            frame = frame[frame[key].astype(str) == str(value)]
        return [str(r) for r in frame["run_id"]]

    def draw(self, run_ids: Sequence[str] | None = None,
             paths: Sequence[Sequence[str]] = (), title: str = "",
             path: str | Path | None = None, **factors: str) -> str:
        """The fat tree as an SVG picture: each link coloured by the bytes it carried
        (both directions) over `run_ids`, or the runs matching `factors`
        (e.g. `draw(switching="ps-mptcp", flow_type="long")`), or all runs; `paths`
        (node-name tuples) drawn over it. Written to `path` too when given."""
        if run_ids is None and factors:
            run_ids = self.run_ids(**factors)
        if not title:
            chosen = ", ".join(f"{k}={v}" for k, v in factors.items()) or "all runs"
            title = f"Bytes per link: {chosen}"
        svg = link_map_svg(self.topology, self.link_bytes(run_ids), paths, title)
        if path is not None:
            Path(path).write_text(svg)
        return svg

    def link_bytes(self, run_ids: Sequence[str] | None = None) -> dict[tuple[str, str], int]:
        """Bytes per link direction (src, dst), summed over `run_ids` (all runs if None)."""
        links = self.links
        if run_ids is not None:
            links = links[links["run_id"].isin(list(run_ids))]
        grouped = links.groupby(["src", "dst"])["bytes"].sum()
        return {(str(s), str(d)): int(b) for (s, d), b in grouped.items()}


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with categorical columns back to plain values (what the statistics read)."""
    out = frame.copy()
    for col in out.columns:
        if isinstance(out[col].dtype, pd.CategoricalDtype):
            out[col] = out[col].astype(object)
    return out


def _read_json(path: Path, notes: list[str]) -> Any:
    return readers.read_record(path, notes)


def _config_levels(config: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """Level order per factor column as the config lists it."""
    config = config or {}
    levels: dict[str, list[str]] = {}
    for factor, values in (config.get("factors") or {}).items():
        if isinstance(values, Mapping):
            levels[str(factor)] = [str(v) for v in values]
        elif isinstance(values, Sequence) and not isinstance(values, str):
            levels[str(factor)] = [str(v) for v in values]
    flow_types = (config.get("workload") or {}).get("flow_types")
    if isinstance(flow_types, Mapping):
        levels["flow_type"] = [str(v) for v in flow_types]
    levels["fidelity"] = list(VERDICTS)
    return levels


def as_categoricals(frame: pd.DataFrame, columns: Sequence[str],
                    levels: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """`frame` with each of `columns` (those present) as an ordered categorical: the
    levels `levels` names first, in that order, then any others in order of appearance."""
    out = frame.copy()
    for col in columns:
        if col not in out.columns:
            continue
        values = out[col].astype(object).where(out[col].notna(), None)
        seen = [str(v) for v in dict.fromkeys(values.dropna())]
        order = [str(lv) for lv in levels.get(col, [])]
        order += [v for v in seen if v not in order]
        out[col] = pd.Categorical(values.map(lambda v: None if v is None else str(v)),
                                  categories=order, ordered=True)
    return out


def _fidelity_table(manifests: Sequence[Mapping[str, Any]],
                    metrics: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for m in manifests:
        section = m.get("fidelity") or {}
        rows.append({"run_id": str(m.get("run_id", "")),
                     "verdict": str(section.get("verdict", "unknown")),
                     "reasons": "; ".join(section.get("reasons", []) or [])})
    if not rows and {"run_id", "fidelity"} <= set(metrics.columns):
        runs = metrics.drop_duplicates("run_id")
        rows = [{"run_id": str(r), "verdict": str(v), "reasons": ""}
                for r, v in zip(runs["run_id"], runs["fidelity"].fillna("unknown"), strict=True)]
    frame = pd.DataFrame(rows, columns=["run_id", "verdict", "reasons"])
    return as_categoricals(frame, ["verdict"], {"verdict": list(VERDICTS)})


def _provenance_table(plan: Any, levels: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    runs = (plan or {}).get("runs") or [] if isinstance(plan, dict) else []
    rows = [{**{k: v for k, v in r.items() if k != "factors"}, **(r.get("factors") or {})}
            for r in runs if isinstance(r, dict)]
    frame = pd.DataFrame(rows)
    return as_categoricals(frame, [*levels, "flow_type", "status"], levels)


def _run_info(path: Path) -> dict[str, str]:
    try:
        text = readers.read_bytes(path, readers.MAX_RECORD_BYTES).decode("utf-8", "replace")
    except (OSError, readers.FolderError):
        return {}
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def open(folder: str | Path) -> Results:
    """Read a results folder (what `pathdiv run --out DIR` and `pathdiv analyze DIR`
    wrote, or a committed reproduction under docs/reproduction/) into a `Results`.

    The folder is read as hostile (analysis/readers.py: no link followed, every file
    bounded, config.yaml within a config's bounds); a run whose files cannot be read is
    left out and said in `notes`, and so is an analysis whose commit was cut short."""
    folder = Path(folder)
    metrics_path = folder / "metrics.csv"
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder; expected a results folder "
                                "holding metrics.csv (written by `pathdiv run --out DIR`)")
    notes: list[str] = []
    if interrupted_commit(folder):
        notes.append(f"{folder}: the last analysis was cut off while its files were "
                     "swapped in; `pathdiv analyze` on the folder finishes it")
    config = readers.read_config(folder)
    levels = _config_levels(config)
    stats_data = _read_json(folder / "stats.json", notes)
    stats = Statistics.from_dict(stats_data) if isinstance(stats_data, dict) else None
    spec_section = (config or {}).get("analysis") or {}
    factor_cols = [*(stats.spec.clusters if stats else spec_section.get("clusters", [])),
                   *(stats.spec.ivs if stats else spec_section.get("ivs", [])),
                   *levels, "flow_type", "condition", "switching", "host"]
    factor_cols = list(dict.fromkeys(factor_cols))
    try:
        metrics = readers.read_table(metrics_path)
    except FileNotFoundError:
        metrics = pd.DataFrame()
    observations = as_categoricals(metrics, factor_cols, levels)
    manifests = [m for _, m in readers.manifests(folder, notes)]
    transfers = []
    for run_dir in readers.run_folders(folder):
        try:
            frame = readers.read_table(run_dir / "transfers.csv")
        except FileNotFoundError:
            continue
        except readers.FolderError as exc:
            notes.append(f"{exc}; left out.")
            continue
        frame.insert(0, "run_id", run_dir.name)
        transfers.append(frame)
    res = Results(
        folder=folder, observations=observations,
        transfers=pd.concat(transfers, ignore_index=True) if transfers else pd.DataFrame(),
        links=pd.DataFrame(columns=LINK_COLUMNS), fidelity=_fidelity_table(manifests, metrics),
        provenance=_provenance_table(_read_json(folder / "plan.json", notes), levels),
        run_info=_run_info(folder / "run.txt"), config=config, stats=stats,
        manifests=manifests, notes=notes)
    res.links = link_table(manifests, res.topology)
    return res
