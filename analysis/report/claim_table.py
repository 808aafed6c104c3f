"""The claim tables of docs/reproduction.md, generated from the reports' reference.json.

    python -m pathdiv.analysis.report.claim_table FOLDER [FOLDER ...] \
        [--rerun FOLDER OTHER ...] [--tally docs/reproduction.md] \
        [--write docs/reproduction/claims.md] [--rows docs/reproduction/claims.md]

reads every folder's reference.json (written by `pathdiv analyze`) and, per study:

- the **tally** of the counted comparisons (pathdiv.analysis.stats.agreement: each
  comparison once per folder, rows not comparable or not measured apart) by the test
  that judged them and their verdict, utilisation apart; then by what the second seed
  made of them: a verdict held in both seeds, unstable (two verdicts), or one seed only
  (the folder has no rerun, or the rerun lacks a side) (`--tally PAGE`: the tallies
  alone, between `<!-- claim-tally:begin -->` and `<!-- claim-tally:end -->`);
- the tally and one line per claim with the same counts (`--write`: between `<!-- claims:begin -->`
  and `<!-- claims:end -->` of the page);
- with `--rows PAGE`, every comparison: the paper's figure, ours with its 95 % CI, raw
  and family-adjusted p, the smallest effect it could detect, the verdict, why, and what
  the second seed said (between `<!-- claim-rows:begin -->` and `<!-- claim-rows:end
  -->`).

`--rerun FOLDER OTHER` names FOLDER's config run with another seed
(pathdiv.analysis.stats.stability pairs the rows). With no page named, the summary is
printed. A reference.json written before the verdicts by claim kind is refused with the
command that rewrites it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pathdiv.analysis.report.generated import write_or_print
from pathdiv.analysis.stats import stability
from pathdiv.analysis.stats import verdicts as v
from pathdiv.analysis.stats.agreement import COUNTED_VERDICTS, UTILISATION

BEGIN = "<!-- claims:begin -->"
END = "<!-- claims:end -->"
TALLY_BEGIN = "<!-- claim-tally:begin -->"
TALLY_END = "<!-- claim-tally:end -->"
ROWS_BEGIN = "<!-- claim-rows:begin -->"
ROWS_END = "<!-- claim-rows:end -->"
UNMEASURED_CLUSTER = "all observations"
ONE_SEED = "one seed"
SEED_RESULTS = ("agree", "negligible", "inconclusive", "disagree", stability.UNSTABLE,
                ONE_SEED)
TEST_ORDER = (v.DIRECTION, v.EQUIVALENCE, v.NON_INFERIORITY, v.NON_SUPERIORITY, v.FIGURE)


def _p(value: object) -> str:
    if value is None or pd.isna(value):  # type: ignore[call-overload]
        return ""
    p = float(value)  # type: ignore[arg-type]
    return "< .001" if p < 0.001 else f"{p:.3f}"


def _cell(text: object) -> str:
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return ""
    return str(text).replace("|", "\\|")


def _claims(folder: Path) -> dict[str, pd.DataFrame]:
    data = json.loads((folder / "reference.json").read_text())
    out = {}
    for study, comparison in data.items():
        rows = pd.DataFrame(comparison.get("claims", []))
        if not rows.empty and "verdict" not in rows.columns:
            raise ValueError(f"{folder}/reference.json predates the verdicts by claim kind; "
                             f"rewrite it with `pathdiv analyze {folder} --stats-only` "
                             "(add --design CONFIG where the folder was analysed so)")
        out[study] = rows
    return out


def _seeds(rows: pd.DataFrame, rerun: pd.DataFrame | None) -> pd.DataFrame:
    """`rows` with `seeds`: what the rerun made of each row's verdict."""
    rows = rows.copy()
    if rerun is None or rerun.empty:
        rows["seeds"] = ONE_SEED
        rows["verdict_2"] = ""
        return rows
    both = stability.compare_verdicts(rows, rerun)
    paired = both[[*stability.KEY, "pair", "verdict_2"]]
    merged = stability.keyed(rows)[stability.KEY].merge(paired, on=stability.KEY,
                                                        how="left")
    pair = merged["pair"].fillna(stability.ONCE).to_numpy()
    rows["verdict_2"] = merged["verdict_2"].fillna(v.NOT_MEASURED).to_numpy()
    rows["seeds"] = [
        verdict if p == stability.HELD else ONE_SEED if p == stability.ONCE else p
        for p, verdict in zip(pair, rows["verdict"], strict=True)]
    return rows


def collect(folders: Sequence[Path],
            reruns: dict[Path, Path] | None = None) -> dict[str, pd.DataFrame]:
    """Per study, every claim row of every folder (with the folder's name and what the
    folder's rerun made of it: `seeds`)."""
    frames: dict[str, list[pd.DataFrame]] = {}
    for folder in folders:
        rerun = _claims(reruns[folder]) if reruns and folder in reruns else {}
        for study, rows in _claims(folder).items():
            if rows.empty:
                continue
            rows = _seeds(rows, rerun.get(study))
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
        unmeasured = table.cluster == UNMEASURED_CLUSTER
        table = pd.concat([table[~unmeasured], table[unmeasured].drop_duplicates(
            subset=["claim_id", "metric", "a", "b"])])
        table = table.assign(_order=table.claim_id.map(order)).sort_values(
            ["_order", "results", "cluster", "metric", "a", "b"], kind="stable")
        out[study] = table.drop(columns="_order").reset_index(drop=True)
    return out


def _counts(rows: pd.DataFrame, column: str, keys: Sequence[str]) -> list[int]:
    return [int((rows[column] == k).sum()) for k in keys]


def tally_lines(study: str, table: pd.DataFrame) -> list[str]:
    """The study's tally by test and verdict, then by what the second seed said."""
    counted = table[table["counted"].astype(bool)]
    apart = int((table.verdict == v.NOT_COMPARABLE).sum())
    unmeasured = int((table.verdict == v.NOT_MEASURED).sum())
    lines = [f"**{study}**: {len(counted)} comparisons counted (each once per results "
             f"folder), {apart} not comparable (apart, never counted), {unmeasured} not "
             f"measured, {int((table.counted_under.astype(str) != '').sum())} read again "
             "by a later claim (counted under the first).", "",
             "| test | metric | " + " | ".join(COUNTED_VERDICTS) + " | held in both seeds: "
             + " / ".join(COUNTED_VERDICTS) + " | unstable | one seed |",
             "| --- | --- | " + " | ".join("---" for _ in COUNTED_VERDICTS)
             + " | --- | --- | --- |"]
    tests = [t for t in TEST_ORDER if t in set(counted.test)]
    for test in [*tests, "all"]:
        rows = counted if test == "all" else counted[counted.test == test]
        for which, part in (("utilisation", rows[rows.metric == UTILISATION]),
                            ("others", rows[rows.metric != UTILISATION])):
            if part.empty and (test != "all" or which == "utilisation"):
                continue
            first = _counts(part, "verdict", COUNTED_VERDICTS)
            held = _counts(part, "seeds", SEED_RESULTS)
            name = f"**{test}**" if test == "all" else test
            lines.append(f"| {name} | {which} | " + " | ".join(map(str, first)) + " | "
                         + " / ".join(map(str, held[:4])) + f" | {held[4]} | {held[5]} |")
    return lines


def markdown(study: str, table: pd.DataFrame) -> str:
    """The tally, then one line per claim."""
    lines = tally_lines(study, table)
    lines += ["", "| § | claim | test | family (per folder) | counted | agree / negligible / "
              "inconclusive / disagree | held in both seeds (same order) | unstable | one "
              "seed | not comparable |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for cid, rows in table.groupby("claim_id", sort=False):
        counted = rows[rows["counted"].astype(bool)]
        first = _counts(counted, "verdict", COUNTED_VERDICTS)
        held = _counts(counted, "seeds", SEED_RESULTS)
        families = sorted({int(x) for x in rows.family_size if np.isfinite(x) and x > 0})
        apart = int((rows.verdict == v.NOT_COMPARABLE).sum())
        family = ("1 (own CI)" if rows.iloc[0].test == v.FIGURE else
                  "–" if not families or apart == len(rows) else
                  f"{min(families)}-{max(families)} tests, Holm" if len(families) > 1
                  else f"{families[0]} test{'s' if families[0] > 1 else ''}, Holm")
        if cid.startswith("table-iv-"):
            continue
        lines.append("| " + " | ".join(_cell(x) for x in (
            rows.iloc[0].section, cid, rows.iloc[0].test, family, len(counted),
            " / ".join(map(str, first)), " / ".join(map(str, held[:4])), held[4], held[5],
            apart)) + " |")
    cells = table[table.claim_id.str.startswith("table-iv-") & table.counted.astype(bool)]
    if not cells.empty:
        first = _counts(cells, "verdict", COUNTED_VERDICTS)
        held = _counts(cells, "seeds", SEED_RESULTS)
        lines.append(f"| V.B, Table IV | table-iv-* (24 cells) | figure | 1 (own CI) | "
                     f"{len(cells)} | {' / '.join(map(str, first))} | "
                     f"{' / '.join(map(str, held[:4]))} | {held[4]} | {held[5]} | 0 |")
    lines += ["", "Claims:", ""]
    for cid, claim in dict(zip(table.claim_id, table.claim, strict=True)).items():
        if not cid.startswith("table-iv-"):
            lines.append(f"- `{cid}`: {claim}")
    if any(table.claim_id.str.startswith("table-iv-")):
        lines.append("- `table-iv-<condition>-<flow>-<switching>`: the cell of Table IV "
                     "(V.B), percent of traffic beyond the payload; agrees when our 95 % "
                     "CI lies within 3 points of it (our tolerance, not the paper's)")
    caveats = dict(zip(table.claim_id, table.get("caveat", pd.Series(dtype=str)),
                       strict=False))
    for cid, caveat in caveats.items():
        if isinstance(caveat, str) and caveat:
            lines.append(f"- Caveat, `{cid}`: {caveat}")
    return "\n".join(lines) + "\n"


def _pct(x: object, signed: bool = True) -> str:
    if x is None or pd.isna(x):  # type: ignore[call-overload]
        return ""
    return f"{float(x):+.3g}" if signed else f"{float(x):.3g}"  # type: ignore[arg-type]


def rows_markdown(study: str, table: pd.DataFrame) -> str:
    """Every comparison of one study as a Markdown table."""
    lines = [f"**{study}**: every comparison ({len(table)} rows).", "",
             "| § | claim | results | cluster | metric | a vs b | paper | ours (95 % CI) | "
             "p | p adj. | detectable % | verdict | why | second seed |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
             "| --- |"]
    for r in table.itertuples(index=False):
        cluster = str(r.cluster).replace("condition=", "").replace("flow_type=", "")
        unmeasured = r.cluster == UNMEASURED_CLUSTER
        pair = f"{r.a} vs {r.b}" if r.b else str(r.a)
        verdict = r.verdict if r.counted or r.verdict not in COUNTED_VERDICTS else (
            f"{r.verdict} (counted under {r.counted_under})")
        p = _p(r.p_margin) if r.test in (v.EQUIVALENCE, v.NON_INFERIORITY,
                                         v.NON_SUPERIORITY) else _p(r.p)
        p_adj = _p(r.p_margin_adj) if r.test in (v.EQUIVALENCE, v.NON_INFERIORITY,
                                                 v.NON_SUPERIORITY) else _p(r.p_adj)
        second = ("" if r.seeds == ONE_SEED or r.verdict in (v.NOT_MEASURED,
                                                             v.NOT_COMPARABLE)
                  else f"{r.verdict_2} ({'held' if r.seeds == r.verdict else r.seeds})")
        lines.append("| " + " | ".join(_cell(x) for x in (
            r.section, r.claim_id, "–" if unmeasured else r.results,
            "–" if unmeasured else cluster, r.metric, pair, r.paper, r.ours, p, p_adj,
            _pct(r.detectable_pct, False), verdict, r.why, second)) + " |")
    return "\n".join(lines) + "\n"


def _source_line(folders: Sequence[Path], reruns: dict[Path, Path] | None) -> str:
    sources = " ".join(str(f) for f in folders)
    rerun_text = "".join(f" --rerun {a} {b}" for a, b in (reruns or {}).items())
    return (f"Generated by `python -m pathdiv.analysis.report.claim_table {sources}"
            f"{rerun_text}`; do not edit by hand.")


def render(folders: Sequence[Path], reruns: dict[Path, Path] | None = None) -> str:
    tables = collect(folders, reruns)
    parts = [_source_line(folders, reruns), ""]
    for study, table in tables.items():
        parts.append(markdown(study, table))
    return "\n".join(parts)


def render_tally(folders: Sequence[Path], reruns: dict[Path, Path] | None = None) -> str:
    """Each study's tally alone: the summary a page about every study opens with."""
    tables = collect(folders, reruns)
    parts = [_source_line(folders, reruns), ""]
    for study, table in tables.items():
        parts.append("\n".join(tally_lines(study, table)) + "\n")
    return "\n".join(parts)


def render_rows(folders: Sequence[Path], reruns: dict[Path, Path] | None = None) -> str:
    tables = collect(folders, reruns)
    parts = [_source_line(folders, reruns), ""]
    for study, table in tables.items():
        parts.append(rows_markdown(study, table))
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+", help="results folders")
    parser.add_argument("--rerun", nargs=2, type=Path, action="append", default=[],
                        metavar=("FOLDER", "OTHER"),
                        help="OTHER is FOLDER's config run with another seed (repeatable)")
    parser.add_argument("--tally", type=Path, help="the Markdown page for the tallies alone")
    parser.add_argument("--write", type=Path,
                        help="the Markdown page for the tallies and one line per claim")
    parser.add_argument("--rows", type=Path, help="the Markdown page for every comparison")
    args = parser.parse_args(argv)
    reruns = {a: b for a, b in args.rerun} or None
    if args.tally:
        write_or_print(render_tally(args.folders, reruns), args.tally, "claim tally",
                       TALLY_BEGIN, TALLY_END)
    if args.write or not (args.tally or args.rows):
        write_or_print(render(args.folders, reruns), args.write, "claim table", BEGIN, END)
    if args.rows:
        write_or_print(render_rows(args.folders, reruns), args.rows, "claim rows",
                       ROWS_BEGIN, ROWS_END)


if __name__ == "__main__":
    main()
