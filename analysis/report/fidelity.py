"""Which runs the statistics use, by their fidelity verdict (pure).

metrics.csv carries each run's verdict in its `fidelity` column (ok, degraded,
invalid; `unknown` for runs recorded without the monitor). By default the statistics
use ok and degraded runs (and unknown ones, which older folders hold only): a degraded
run was measurably slowed but its rates stay within the configured tolerance, and
dropping it would bias a study towards the host's quiet hours; an invalid run's rates
are the host's, not the network's, so it is left out, and the report says how many
and why. `include_invalid` keeps every run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pathdiv.analysis.report.blocks import Block, Heading, Paragraph, Table

COLUMN = "fidelity"
VERDICTS = ("ok", "degraded", "invalid", "unknown")
LEFT_OUT = ("invalid",)


@dataclass
class FidelitySplit:
    """The rows the statistics use and what was left out."""

    kept: pd.DataFrame
    rows_left_out: int = 0
    runs_left_out: list[str] = field(default_factory=list)
    include_invalid: bool = False
    monitored: bool = True

    def note(self) -> str | None:
        if not self.monitored:
            return None
        if self.include_invalid:
            return ("All runs are analysed, invalid ones included (--include-invalid): "
                    "rates and FCTs of invalid runs are the host's, not the network's.")
        if not self.rows_left_out:
            return None
        return (f"{self.rows_left_out} observation(s) of {len(self.runs_left_out)} run(s) "
                "judged invalid by the fidelity monitor were left out of the statistics "
                "(see Fidelity); `pathdiv analyze DIR --include-invalid` keeps them.")


def verdicts(metrics: pd.DataFrame) -> pd.Series:
    if COLUMN not in metrics.columns:
        return pd.Series("unknown", index=metrics.index)
    return metrics[COLUMN].fillna("unknown").astype(str)


def split(metrics: pd.DataFrame, include_invalid: bool = False) -> FidelitySplit:
    monitored = COLUMN in metrics.columns
    v = verdicts(metrics)
    out = v.isin(LEFT_OUT) & (not include_invalid)
    runs = sorted(set(metrics.loc[out, "run_id"].astype(str))) if "run_id" in metrics else []
    return FidelitySplit(metrics.loc[~out].reset_index(drop=True), int(out.sum()), runs,
                         include_invalid, monitored)


def verdict_counts(metrics: pd.DataFrame, clusters: Sequence[str]) -> pd.DataFrame:
    """Runs per verdict in each cluster (a run counts once per cluster it has rows in)."""
    cols = [c for c in clusters if c in metrics.columns]
    frame = metrics.assign(_verdict=verdicts(metrics))
    if "run_id" in frame.columns:
        frame = frame.drop_duplicates([*cols, "run_id"])
    if cols:
        table = frame.groupby([*cols, "_verdict"]).size().unstack("_verdict", fill_value=0)
    else:
        table = frame.groupby("_verdict").size().to_frame().T
    table = table.reindex(columns=list(VERDICTS), fill_value=0)
    table = table.loc[:, (table != 0).any(axis=0) | table.columns.isin(VERDICTS[:3])]
    return table.reset_index(drop=not cols).rename_axis(None, axis=1)


FIGURES_FILE = "fidelity.csv"


def figures_table(manifests: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per run: its cell, data plane, clock, verdict and the monitor's key figures (steal,
    busiest core, qdisc drops, RTOs, retransmitted segments, software switches' CPU and
    the packets they lost, the captures' CPU; docs/fidelity.md) and reasons. Written
    beside metrics.csv as fidelity.csv: the evidence of real-clock runs, compact."""
    rows = []
    for m in sorted(manifests, key=lambda m: str(m.get("run_id"))):
        section = m.get("fidelity") or {}
        rows.append({"run_id": m.get("run_id"), "flow_type": m.get("flow_type"),
                     **(m.get("factors") or {}), "repetition": m.get("repetition"),
                     "dataplane": (m.get("dataplane") or {}).get("dataplane"),
                     "clock": section.get("clock", m.get("clock")),
                     "verdict": section.get("verdict", "unknown"),
                     **(section.get("figures") or {}),
                     "reasons": "; ".join(section.get("reasons", []))})
    return pd.DataFrame(rows)


def fidelity_blocks(metrics: pd.DataFrame, chosen: FidelitySplit, clusters: Sequence[str],
                    manifests: Sequence[Mapping[str, Any]] = ()) -> list[Block]:
    if not chosen.monitored:
        return []
    blocks: list[Block] = [
        Heading("Fidelity", 2),
        Paragraph("Each run's fidelity verdict (docs/fidelity.md): ok, degraded (the host "
                  "slowed the emulation measurably), invalid (the rates are the host's). "
                  "The statistics use ok and degraded runs unless --include-invalid."),
        Table(verdict_counts(metrics, clusters), "Runs per verdict and test cluster"),
    ]
    note = chosen.note()
    if note:
        blocks.append(Paragraph(note, "warning" if chosen.rows_left_out else "note"))
    reasons = {str(m.get("run_id")): (m.get("fidelity") or {}).get("reasons", [])
               for m in manifests}
    flagged = sorted(set(metrics.loc[verdicts(metrics).isin(("invalid", "degraded")),
                                     "run_id"].astype(str))) if "run_id" in metrics else []
    if flagged:
        v = dict(zip(metrics["run_id"].astype(str), verdicts(metrics), strict=True))
        rows = [{"run": r, "verdict": v[r],
                 "used": "no" if r in chosen.runs_left_out else "yes",
                 "reasons": "; ".join(reasons.get(r, [])) or "–"} for r in flagged]
        blocks.append(Table(pd.DataFrame(rows), "Runs that were not ok, and why"))
    return blocks
