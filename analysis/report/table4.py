"""Table IV's excess traffic beside ours on both clocks: the test of the switches' CPU.

    python -m pathdiv.analysis.report.table4 FOLDER... [--write docs/reproduction.md]

The study's excess traffic (seed 001, V.B, Table IV) grows with flow size and load; on
the lab kernel's virtual clock ours shrinks. The hypothesis under test: the study's 20
software switches on 4 cores fell behind on the wall clock, lost packets outside the
emulated queues, and the retransmissions are the excess. Each FOLDER is a results folder
(or docs/reproduction/<name>) holding metrics.csv and config.yaml, and for runs with the
fidelity monitor fidelity.csv (one row per run, analysis/report/fidelity.py) and, when
made with benchmarks/cpu_load.py, load.json. One row per Table IV cell and folder: the
paper's figure, our mean excess and retransmitted share over the cell's observations
(with a host factor, the vanilla hosts: the study's), and from fidelity.csv the per-run
means of the evidence: packets lost inside switches, queue (qdisc) drops, TCP timeouts,
the switches' CPU in cores, host steal, and the runs per verdict. The cells are those the
wall-clock folders measured (all cells when every folder ran on the virtual clock).
Written between `<!-- table4:begin -->` and `<!-- table4:end -->` of the file.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from pathdiv.analysis.report.fidelity import FIGURES_FILE
from pathdiv.analysis.report.generated import write_or_print
from pathdiv.analysis.stats.claims import load_reference

BEGIN = "<!-- table4:begin -->"
END = "<!-- table4:end -->"
CELL = ["condition", "flow_type", "switching"]
EVIDENCE = {"switch_lost_packets": "lost in switches", "qdisc_drops": "queue drops",
            "rtos": "timeouts", "switch_cpu_cores": "switch CPU (cores)",
            "steal_pct": "steal %"}


@dataclass
class Folder:
    path: Path
    metrics: pd.DataFrame
    config: dict[str, Any]
    figures: pd.DataFrame | None
    load: dict[str, Any] | None

    @property
    def name(self) -> str:
        return str(self.config.get("name") or self.path.name)

    @property
    def clock(self) -> str:
        if self.figures is not None and "clock" in self.figures and len(self.figures):
            return str(self.figures["clock"].mode().iloc[0])
        hosts = self.config.get("hosts") or {}
        lab = self.config.get("lab") or {}
        return "virtual" if hosts.get("kernel") == "lab" and lab.get("clock", "virtual") \
            == "virtual" else "real"

    @property
    def setting(self) -> str:
        """Kernel, data plane and, from load.json, the extra load."""
        hosts = self.config.get("hosts") or {}
        kernel = "lab kernel" if hosts.get("kernel") == "lab" else "host kernel"
        plane = str(self.config.get("dataplane", "auto"))
        if plane == "auto":  # resolved when the runs started: only fidelity.csv says to what
            plane = "data plane not recorded (auto)"
        if self.figures is not None and self.figures.get("dataplane") is not None \
                and self.figures["dataplane"].notna().any():
            plane = str(self.figures["dataplane"].dropna().mode().iloc[0])  # as it ran
        text = f"{kernel}, {plane}, {self.clock} clock"
        if self.load and self.load.get("spinners"):
            text += f", +{self.load['spinners']} spinners"
        return text


def load(path: Path) -> Folder:
    path = Path(path)
    config = yaml.safe_load((path / "config.yaml").read_text()) or {}
    figures_path = path / FIGURES_FILE
    load_path = path / "load.json"
    return Folder(path, pd.read_csv(path / "metrics.csv"), config,
                  pd.read_csv(figures_path) if figures_path.is_file() else None,
                  json.loads(load_path.read_text()) if load_path.is_file() else None)


def paper_cells() -> dict[tuple[str, str, str], float]:
    """(condition, flow type, switching) -> the study's percentage (Table IV)."""
    out = {}
    for claim in load_reference("seed001").of_kind("excess"):
        where, side = claim.where[0], claim.compare[0][0]
        out[(where["condition"][0], where["flow_type"][0], side["switching"])] = \
            float(claim.paper_pct or np.nan)
    return out


def _study_rows(metrics: pd.DataFrame) -> pd.DataFrame:
    if "host" in metrics.columns and (metrics["host"] == "vanilla").any():
        return metrics[metrics["host"] == "vanilla"]
    return metrics


def rows(folders: Sequence[Folder]) -> pd.DataFrame:
    """One row per (Table IV cell, folder) measured; see the module docstring."""
    paper = paper_cells()
    wall = [f for f in folders if f.clock == "real"]
    wanted = {tuple(c) for f in (wall or folders)
              for c in _study_rows(f.metrics)[CELL].drop_duplicates().itertuples(index=False)}
    out = []
    for cell in sorted(c for c in wanted if c in paper):
        for folder in folders:
            data = _study_rows(folder.metrics)
            here = data[(data[CELL] == pd.Series(cell, index=CELL)).all(axis=1)]
            if here.empty:
                continue
            row: dict[str, Any] = {
                "condition": cell[0], "flow_type": cell[1], "switching": cell[2],
                "paper": paper[cell], "results": folder.name, "setting": folder.setting,
                "n": len(here), "excess_pct": here["excess_pct"].mean(),
                "retrans_pct": here["retrans_pct"].mean()
                if "retrans_pct" in here else np.nan,
                "fct_s": here["fct_s"].mean()}
            figures = folder.figures
            if figures is not None and len(figures):
                runs = figures[(figures["flow_type"] == cell[1])
                               & (figures.get("switching") == cell[2])]
                for key in EVIDENCE:
                    row[key] = pd.to_numeric(runs[key], errors="coerce").mean() \
                        if key in runs else np.nan
                counts = runs["verdict"].value_counts() if "verdict" in runs else {}
                row["verdicts"] = ", ".join(f"{n} {v}" for v, n in sorted(dict(counts).items()))
            out.append(row)
    return pd.DataFrame(out)


def _num(value: Any, digits: int = 1) -> str:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return ""
    return "" if not np.isfinite(x) else f"{x:.{digits}f}"


def _text(value: Any) -> str:
    """A text cell; a folder without fidelity.csv leaves it empty (NaN in the frame)."""
    return value if isinstance(value, str) else ""


def markdown(folders: Sequence[Folder], command: str) -> str:
    table = rows(folders)
    lines = [f"Generated by `{command}`; do not edit by hand.", ""]
    head = ["cell", "paper %", "results", "setting", "n", "excess %", "retransmitted %",
            "FCT s", *EVIDENCE.values(), "runs per verdict"]
    lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in table.to_dict("records"):
        cell = f"{r['condition']} / {r['flow_type']} / {r['switching']}"
        evidence = [_num(r.get(k), 2 if k == "switch_cpu_cores" else 1) for k in EVIDENCE]
        lines.append("| " + " | ".join([
            cell, _num(r["paper"], 2), r["results"], r["setting"], str(r["n"]),
            _num(r["excess_pct"], 2), _num(r["retrans_pct"], 2), _num(r["fct_s"], 3),
            *evidence, _text(r.get("verdicts"))]) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path, help="results folders")
    ap.add_argument("--write", type=Path, help="the Markdown file to fill")
    args = ap.parse_args(argv)
    command = "python -m pathdiv.analysis.report.table4 " + " ".join(
        str(f) for f in args.folders)
    text = markdown([load(f) for f in args.folders], command)
    write_or_print(text, args.write, "Table IV block", BEGIN, END)


if __name__ == "__main__":
    main()
