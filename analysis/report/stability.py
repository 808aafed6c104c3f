"""The seed-to-seed stability table: did a reproduction's verdicts survive a rerun?

    python -m pathdiv.analysis.report.stability FIRST SECOND [FIRST SECOND ...] \
        [--design CONFIG] [--write docs/reproduction.md] [--rows PAGE]
    pathdiv compare FIRST SECOND            (every row, for one pair)

takes results folders in pairs (one config run with two seeds), marks every claim of
the config's reference in each from its metrics.csv (as `pathdiv analyze` does:
`agreement.mark_claims` on the runs the fidelity monitor kept, with the folder's
config.yaml, or --design for every folder, or FOLDER:CONFIG for one: the design of
CONFIG, as `pathdiv analyze --design` re-analyses a folder run before its config
scoped its levels), and per pair: the tally of the counted comparisons (a verdict
held in both seeds, by verdict; unstable; measured in one seed only), one row per
measured claim comparison with both seeds' verdicts and the observations its verdict
needs, and the cells with more than one mode (timeouts) with the share in each mode
and the repetitions they need (pathdiv.analysis.stats.stability says how and why).
`--write PAGE` puts one summary line per pair between `<!-- stability:begin -->` and
`<!-- stability:end -->` of PAGE, `--rows PAGE` every row and cell between
`<!-- stability-rows:begin -->` and `<!-- stability-rows:end -->`; without either,
every row is printed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import pathdiv.analysis.readers as readers
from pathdiv.analysis.report import fidelity
from pathdiv.analysis.report.analyze import spec_from_config
from pathdiv.analysis.report.generated import write_or_print
from pathdiv.analysis.stats import agreement, claims, stability
from pathdiv.analysis.stats.spec import AnalysisSpec
from pathdiv.analysis.stats.study import in_plan

BEGIN = "<!-- stability:begin -->"
END = "<!-- stability:end -->"
ROWS_BEGIN = "<!-- stability-rows:begin -->"
ROWS_END = "<!-- stability-rows:end -->"


@dataclass
class Folder:
    """One results folder, marked against its references."""

    path: Path
    seed: str
    spec: AnalysisSpec
    metrics: pd.DataFrame
    marks: pd.DataFrame
    repetitions: int  # the most any cluster has
    per_cluster: dict[str, int]  # {claim row's cluster label: repetitions}

    @property
    def repetitions_text(self) -> str:
        counts = sorted(set(self.per_cluster.values()))
        return "-".join(str(n) for n in (counts[0], counts[-1]) if counts) if len(
            counts) > 1 else str(self.repetitions)


def load(folder: Path, design: Path | None = None) -> Folder:
    """A folder's metrics and marks, read as the analysis reads them (analysis/readers.py:
    no link followed, bounded, config.yaml within a config's bounds)."""
    own = readers.read_config(folder) or {}
    config = readers.read_named_config(design) if design is not None else own
    seed_of = own
    spec = spec_from_config(config or {})
    metrics = readers.read_table(folder / "metrics.csv")
    # as the analysis reads them: valid runs, and only where every level acts (a folder run
    # before applies_to holds TCP x rb cells, which repeat TCP x vanilla under a new name)
    kept = in_plan(fidelity.split(metrics, False).kept, spec)[0]
    names = [spec.reference] if isinstance(spec.reference, str) else list(spec.reference or [])
    tables = [agreement.mark_claims(claims.load_reference(n), kept, spec.clusters, spec.alpha,
                                    spec.lower_is_better, spec.min_effect_pct) for n in names]
    marks = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(
        columns=agreement.COLUMNS)
    reps = int(kept["repetition"].nunique()) if "repetition" in kept.columns else 0
    per_cluster: dict[str, int] = {}
    clusters = [c for c in spec.clusters if c in kept.columns]
    if clusters and "repetition" in kept.columns:
        for key, frame in kept.groupby(clusters, sort=False):
            values = key if isinstance(key, tuple) else (key,)
            label = " / ".join(f"{c}={v}" for c, v in zip(clusters, values, strict=True))
            per_cluster[label] = int(frame["repetition"].nunique())
    return Folder(folder, str((seed_of or {}).get("seed", "?")), spec, kept, marks, reps,
                  per_cluster)


def compare(first: Folder, second: Folder) -> pd.DataFrame:
    per_cluster = {k: min(n, second.per_cluster.get(k, n))
                   for k, n in first.per_cluster.items()}
    return stability.compare_verdicts(first.marks, second.marks, first.spec.alpha,
                                      first.spec.min_effect_pct,
                                      per_cluster or min(first.repetitions,
                                                         second.repetitions) or None)


def modes(first: Folder, second: Folder) -> pd.DataFrame:
    """The cells with more than one mode in either run or in both runs' observations
    together, with the most observations any of the three readings needs."""
    cells = list(first.spec.clusters + first.spec.ivs)
    used = set(first.marks.metric) if not first.marks.empty else set()
    columns = list(dict.fromkeys([*first.spec.dvs, *sorted(used)]))
    one = stability.bimodal_cells(first.metrics, cells, columns)
    two = stability.bimodal_cells(second.metrics, cells, columns)
    both = pd.concat([first.metrics.assign(repetition=first.metrics["repetition"]),
                      second.metrics.assign(repetition=second.metrics["repetition"]
                                            + 10_000)], ignore_index=True)
    pooled = stability.bimodal_cells(both, cells, columns)
    key = ["cell", "metric"]
    table = pd.concat([one[key], two[key], pooled[key]]).drop_duplicates()
    table = table.merge(one[[*key, "modes"]].rename(columns={"modes": "modes_1"}), on=key,
                        how="left")
    table = table.merge(two[[*key, "modes"]].rename(columns={"modes": "modes_2"}), on=key,
                        how="left")
    table = table.merge(pooled[[*key, "modes"]], on=key, how="left")
    # what the cell needs: the most any reading asks (a mode one run shows may vanish
    # among both runs' observations, and the other way round)
    need = pd.concat([one, two, pooled])[[*key, "needed_n", "needed_repetitions"]]
    table = table.merge(need.groupby(key, as_index=False).max(), on=key, how="left")
    return table.sort_values(key, kind="stable").reset_index(drop=True)


def _verdict(verdict: object, ours: object) -> str:
    figure = f" {ours}" if isinstance(ours, str) and ours else ""
    return f"{verdict}{figure}"


def _cell(text: object) -> str:
    return str(text if text is not None and not pd.isna(text) else "").replace("|", "\\|")


def _whole(x: object) -> str:
    return "" if x is None or pd.isna(x) else f"{int(x)}"  # type: ignore[call-overload]


def _head(first: Folder, second: Folder, table: pd.DataFrame) -> str:
    counts = stability.tally(table)
    n1, n2 = first.path.name, second.path.name
    held = ", ".join(f"{k} {counts[k]}" for k in ("agree", "negligible", "inconclusive",
                                                  "disagree"))
    return (f"**{n1} (seed {first.seed}) vs {n2} (seed {second.seed})**: "
            f"{sum(counts[k] for k in stability.RESULTS[:6])} counted comparisons; held in "
            f"both seeds: {held}; unstable {counts[stability.UNSTABLE]}; measured in one "
            f"seed only {counts[stability.ONCE]}; not comparable "
            f"{counts[stability.APART]}. {first.repetitions_text} and "
            f"{second.repetitions_text} repetitions.")


def markdown(first: Folder, second: Folder) -> str:
    """Every row and bimodal cell of one pair."""
    table = compare(first, second)
    measured = table[~table.pair.isin([stability.UNMEASURED, stability.APART])]
    lines = [_head(first, second, table), "",
             f"| § | claim | cluster | metric | a vs b | seed {first.seed} | "
             f"seed {second.seed} | both seeds | needs (obs. per side / repetitions) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in measured.itertuples(index=False):
        cluster = str(r.cluster).replace("condition=", "").replace("flow_type=", "")
        pair = f"{r.a} vs {r.b}" if r.b else str(r.a)
        lines.append("| " + " | ".join(_cell(x) for x in (
            r.section, r.claim_id, cluster, r.metric, pair,
            _verdict(r.verdict_1, r.ours_1), _verdict(r.verdict_2, r.ours_2),
            r.result + ("" if r.counted else " (not counted)"),
            _needs(r, first.spec.min_effect_pct))) + " |")
    cells = modes(first, second)
    lines += [""]
    if cells.empty:
        lines.append("No cell has more than one mode in either run.")
    else:
        lines += [f"Cells with more than one mode ({len(cells)}):", "",
                  f"| cell | metric | seed {first.seed} | seed {second.seed} | both runs | "
                  "needs (obs. / repetitions) |", "| --- | --- | --- | --- | --- | --- |"]
        for r in cells.itertuples(index=False):
            need = ("" if pd.isna(r.needed_n) else
                    f"{_whole(r.needed_n)} / {_whole(r.needed_repetitions)}")
            lines.append("| " + " | ".join(_cell(x) for x in (
                r.cell, r.metric, r.modes_1 if isinstance(r.modes_1, str) else "one mode",
                r.modes_2 if isinstance(r.modes_2, str) else "one mode",
                r.modes if isinstance(r.modes, str) else "one mode", need)) + " |")
    return "\n".join(lines) + "\n"


def _needs(r: Any, min_effect_pct: float) -> str:
    needed = r.needed_n
    if not np.isfinite(needed):
        return ""
    text = f"{_whole(needed)} / {_whole(r.needed_repetitions)}"
    if r.below_min_effect:
        text += f" (difference < {min_effect_pct:g} %)"
    return text


def summary_line(first: Folder, second: Folder) -> str:
    """One row of the summary table: the pair's tally, its bimodal cells and the most
    repetitions a counted unstable comparison or a bimodal cell needs."""
    table = compare(first, second)
    counts = stability.tally(table)
    cells = modes(first, second)
    flipped = table[(table.pair == stability.UNSTABLE) & table.counted.astype(bool)]
    need = pd.concat([flipped.needed_repetitions, cells.needed_repetitions]).dropna()
    most = _whole(need.max()) if len(need) else ""
    return "| " + " | ".join(_cell(x) for x in (
        f"{first.path.name} / {second.path.name}", f"{first.seed} / {second.seed}",
        f"{first.repetitions_text} / {second.repetitions_text}",
        " / ".join(str(counts[k]) for k in ("agree", "negligible", "inconclusive",
                                            "disagree")),
        counts[stability.UNSTABLE], counts[stability.ONCE], len(cells), most)) + " |"


def parse_source(text: str) -> tuple[Path, Path | None]:
    """FOLDER or FOLDER:CONFIG (a .yaml whose design marks the folder)."""
    folder, sep, config = text.rpartition(":")
    if sep and config.endswith((".yaml", ".yml")):
        return Path(folder), Path(config)
    return Path(text), None


def _loaded(sources: Sequence[str], design: Path | None) -> list[tuple[Folder, Folder]]:
    parsed = [parse_source(s) for s in sources]
    loaded = [load(folder, config or design) for folder, config in parsed]
    return list(zip(loaded[::2], loaded[1::2], strict=True))


def _generated(sources: Sequence[str]) -> str:
    return ("Generated by `python -m pathdiv.analysis.report.stability "
            + " ".join(sources) + "`; do not edit by hand.")


def render(sources: Sequence[str], design: Path | None = None) -> str:
    """Every row and bimodal cell of the folders `sources` (FOLDER or FOLDER:CONFIG),
    taken in pairs."""
    parts = [_generated(sources), ""]
    for a, b in _loaded(sources, design):
        parts.append(markdown(a, b))
    return "\n".join(parts)


def render_summary(sources: Sequence[str], design: Path | None = None) -> str:
    """One line per pair (counted comparisons held in both seeds, by verdict)."""
    lines = [_generated(sources), "",
             "| results (first / second seed) | seeds | repetitions | held: agree / "
             "negligible / inconclusive / disagree | unstable | one seed only | bimodal "
             "cells | most repetitions needed |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += [summary_line(a, b) for a, b in _loaded(sources, design)]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+",
                        help="results folders in pairs: FIRST SECOND [FIRST SECOND ...]; "
                             "FOLDER:CONFIG marks a folder with CONFIG's design")
    parser.add_argument("--design", type=Path, metavar="CONFIG",
                        help="mark with this config's analysis section, not each folder's")
    parser.add_argument("--write", type=Path, help="the Markdown page for the summary")
    parser.add_argument("--rows", type=Path, help="the Markdown page for every row")
    args = parser.parse_args(argv)
    if len(args.folders) % 2:
        parser.error(f"{len(args.folders)} folders: give them in pairs (one config, two "
                     "seeds)")
    for text in args.folders:
        folder, config = parse_source(text)
        if not (folder / "metrics.csv").is_file():
            parser.error(f"{folder} has no metrics.csv (a results folder or "
                         "docs/reproduction/<name>)")
        if config is not None and not config.is_file():
            parser.error(f"{text}: {config} is not a file")
    if args.write is None and args.rows is None:
        write_or_print(render(args.folders, args.design), None, "", BEGIN, END)
        return 0
    if args.write is not None:
        write_or_print(render_summary(args.folders, args.design), args.write,
                       "stability summary", BEGIN, END)
    if args.rows is not None:
        write_or_print(render(args.folders, args.design), args.rows, "stability rows",
                       ROWS_BEGIN, ROWS_END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
