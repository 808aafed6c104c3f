"""docs/reproduction.md's claim table, generated from the reports' reference.json.

    python -m pathdiv.analysis.report.claim_table docs/reproduction/noisy \
        docs/reproduction/silent --write docs/reproduction.md

reads every folder's reference.json (written by `pathdiv analyze`) and puts one table per
study between the markers `<!-- claims:begin -->` and `<!-- claims:end -->` of the file:
each claim of the study per cluster, with the paper's figure, ours, the agreement mark,
the Holm-corrected p-value and the effect. A claim that no folder could measure (its
clusters or levels are in none of them) keeps one row marked `not measured`.
`--rerun FOLDER OTHER` names a rerun of FOLDER with another seed: a row whose verdict
differs between the two (pathdiv.analysis.stats.stability) says `unstable`, never
`yes`. Without --write the tables are printed.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from pathdiv.analysis.report.generated import write_or_print
from pathdiv.analysis.stats import stability

BEGIN = "<!-- claims:begin -->"
END = "<!-- claims:end -->"
UNMEASURED_CLUSTER = "all observations"
UNSTABLE = "unstable"


def _p(value: object) -> str:
    if value is None or pd.isna(value):
        return ""
    p = float(value)  # type: ignore[arg-type]
    return "< .001" if p < 0.001 else f"{p:.3f}"


def _cell(text: object) -> str:
    return str(text if text is not None and not pd.isna(text) else "").replace("|", "\\|")


def _claims(folder: Path) -> dict[str, pd.DataFrame]:
    data = json.loads((folder / "reference.json").read_text())
    return {study: pd.DataFrame(comparison.get("claims", []))
            for study, comparison in data.items()}


def _unstable(rows: pd.DataFrame, rerun: pd.DataFrame) -> pd.DataFrame:
    """`rows` with `agrees` set to unstable where the rerun's verdict differs."""
    if rerun.empty:
        return rows
    rows = rows.copy()
    both = stability.compare_verdicts(rows, rerun)
    flipped = both.loc[both.verdict == stability.UNSTABLE, stability.KEY]
    hit = stability.keyed(rows)[stability.KEY].merge(flipped.assign(_flip=True),
                                                     on=stability.KEY, how="left")["_flip"]
    rows.loc[hit.fillna(False).astype(bool).to_numpy(), "agrees"] = UNSTABLE
    return rows


def collect(folders: Sequence[Path],
            reruns: dict[Path, Path] | None = None) -> dict[str, pd.DataFrame]:
    """Per study, every claim row of every folder (with the folder's name); rows whose
    verdict flipped in the folder's rerun (`reruns`: folder -> rerun) are unstable."""
    frames: dict[str, list[pd.DataFrame]] = {}
    for folder in folders:
        rerun = _claims(reruns[folder]) if reruns and folder in reruns else {}
        for study, rows in _claims(folder).items():
            if rows.empty:
                continue
            if study in rerun:
                rows = _unstable(rows, rerun[study])
            rows.insert(0, "results", folder.name)
            frames.setdefault(study, []).append(rows)
    out = {}
    for study, parts in frames.items():
        table = pd.concat(parts, ignore_index=True)
        order = {cid: i for i, cid in enumerate(dict.fromkeys(table.claim_id))}  # the file's
        measured = set(table.loc[table.cluster != UNMEASURED_CLUSTER, "claim_id"])
        fallback = (table.cluster == UNMEASURED_CLUSTER) & table.claim_id.isin(measured)
        table = table[~fallback]
        # a claim no folder measured: one row per (claim, pair, metric), not per folder
        table = table.drop_duplicates(subset=["claim_id", "cluster", "metric", "a", "b",
                                              "mark", "ours"])
        table = table.assign(_order=table.claim_id.map(order)).sort_values(
            ["_order", "results", "cluster", "metric", "a", "b"], kind="stable")
        table = table.drop(columns="_order")
        out[study] = table.reset_index(drop=True)
    return out


def markdown(study: str, table: pd.DataFrame) -> str:
    """One study's table, then the claims' sentences, as Markdown."""
    tally = table.agrees.value_counts()
    unstable = (f", unstable between seeds {int(tally[UNSTABLE])}"
                if UNSTABLE in tally else "")
    head = (f"**{study}**: {len(table)} comparisons of {table.claim_id.nunique()} claims; "
            f"agree {int(tally.get('yes', 0))}, disagree {int(tally.get('no', 0))}{unstable}, "
            f"not measured {int(tally.get('–', 0))}.")
    lines = [head, "",
             "| § | claim | results | cluster | metric | a vs b | paper | ours | p (Holm) | "
             "effect | mark | agrees |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in table.itertuples(index=False):
        cluster = str(r.cluster).replace("condition=", "").replace("flow_type=", "")
        if r.cluster == UNMEASURED_CLUSTER:
            cluster = "–"
        pair = f"{r.a} vs {r.b}" if r.b else str(r.a)
        lines.append("| " + " | ".join(_cell(x) for x in (
            r.section, r.claim_id, r.results if r.cluster != UNMEASURED_CLUSTER else "–",
            cluster, r.metric, pair, r.paper, r.ours, _p(r.p_holm), r.practical, r.mark,
            r.agrees)) + " |")
    lines += ["", "Claims:", ""]
    for cid, claim in dict(zip(table.claim_id, table.claim, strict=True)).items():
        if not cid.startswith("table-iv-"):
            lines.append(f"- `{cid}`: {claim}")
    if any(table.claim_id.str.startswith("table-iv-")):
        lines.append("- `table-iv-<condition>-<flow>-<switching>`: the cell of Table IV (V.B), "
                     "percent of traffic beyond the payload; agrees within 3 points (our "
                     "tolerance, not the paper's)")
    return "\n".join(lines) + "\n"


def render(folders: Sequence[Path], reruns: dict[Path, Path] | None = None) -> str:
    tables = collect(folders, reruns)
    sources = ", ".join(f"`{f}`" for f in folders)
    rerun_text = "".join(f" `--rerun {a} {b}`" for a, b in (reruns or {}).items())
    parts = [f"Generated by `python -m pathdiv.analysis.report.claim_table` from the "
             f"reference.json of {sources}; do not edit by hand."
             + (f" Reruns with a second seed:{rerun_text} (a verdict that differs "
                "between the two seeds says `unstable`)." if reruns else ""), ""]
    for study, table in tables.items():
        parts.append(markdown(study, table))
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+", help="results folders")
    parser.add_argument("--rerun", nargs=2, type=Path, action="append", default=[],
                        metavar=("FOLDER", "OTHER"),
                        help="OTHER is FOLDER's config run with another seed (repeatable)")
    parser.add_argument("--write", type=Path, help="the Markdown file to fill")
    args = parser.parse_args(argv)
    block = render(args.folders, {a: b for a, b in args.rerun} or None)
    write_or_print(block, args.write, "claim table", BEGIN, END)


if __name__ == "__main__":
    main()
