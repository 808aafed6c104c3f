"""The compact page of one reproduction: docs/reproduction/<name>/summary.md.

`scripts/reproduce.sh` copies a finished results folder's compact files (stats.json,
reference.json, run.txt, report, plots) into docs/reproduction/<name>/ and then runs
`python -m pathdiv.analysis.report.reproduction DIR`, which writes summary.md from those
files alone: how the run was made (run.txt), per cluster the MANOVA and the
between-subjects effects, the study's Table IV beside ours and every direction the
study reports with our p-value. docs/reproduction.md links the pages and discusses them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pandas as pd

from pathdiv.analysis.report.blocks import Block, Heading, Paragraph, Table, render_markdown
from pathdiv.analysis.report.content import fmt_p


def manova_frame(cluster: dict[str, Any]) -> pd.DataFrame:
    rows = [r for r in cluster["manova"] if r["statistic"] == "pillai"]
    return pd.DataFrame([{"effect": r["effect"], "Pillai's V": r["value"], "F": r["f"],
                          "df": f"{r['num_df']:g}, {r['den_df']:g}", "p": fmt_p(r["p"]),
                          "largest effect (% of mean)": r.get("effect_pct")}
                         for r in rows])


def anova_frame(cluster: dict[str, Any]) -> pd.DataFrame:
    rows = [r for r in cluster["anova"] if r["effect"] not in ("Intercept", "Residual")]
    return pd.DataFrame([{"metric": r["dv"], "effect": r["effect"], "F": r["f"],
                          "p": fmt_p(r["p"]), "partial η²": r["partial_eta_sq"],
                          "effect (% of mean)": r.get("effect_pct")}
                         for r in rows])


def claim_frame(table: pd.DataFrame) -> pd.DataFrame:
    """The columns of reference.json's claims a reader needs, one row per comparison."""
    return pd.DataFrame({
        "section": table.section, "claim": table.claim_id, "cluster": table.cluster.str.replace(
            "condition=", "").str.replace("flow_type=", ""),
        "metric": table.metric,
        "a vs b": table.a + (" vs " + table.b).where(table.b != "", ""),
        "paper": table.paper, "ours (95 % CI)": table.ours,
        "p": table.p.map(lambda p: "" if p is None or pd.isna(p) else fmt_p(p)),
        "p adj.": table.p_adj.map(lambda p: "" if p is None or pd.isna(p) else fmt_p(p)),
        "verdict": table.verdict, "why": table.why})


def summary_blocks(folder: Path) -> list[Block]:
    stats = json.loads((folder / "stats.json").read_text())
    run_txt = folder / "run.txt"
    blocks: list[Block] = [Heading(f"Reproduction: {folder.name}", 1)]
    if run_txt.is_file():
        blocks.append(Table(pd.DataFrame(
            [line.split(": ", 1) for line in run_txt.read_text().splitlines() if ": " in line],
            columns=["", "value"]), "How this was run (run.txt)"))
    blocks.append(Paragraph(
        f"{stats['n_observations']} observations; full report: report.html / report.md; "
        "every number: stats.json; the comparison with the study: reference.json."))
    blocks.append(Heading("Per cluster: MANOVA and between-subjects effects", 2))
    for cluster in stats["clusters"]:
        blocks.append(Heading(f"{cluster['label']} (n = {cluster['n']}, {cluster['status']})",
                              3))
        blocks += [Paragraph(m, "note") for m in cluster["messages"]]
        if cluster["manova"]:
            blocks.append(Table(manova_frame(cluster), "MANOVA (Pillai's trace)"))
        if cluster["anova"]:
            blocks.append(Table(anova_frame(cluster), "Tests of between-subjects effects "
                                "(type III)"))
    reference = folder / "reference.json"
    if reference.is_file():
        for name, comparison in json.loads(reference.read_text()).items():
            table = pd.DataFrame(comparison.get("claims", []))
            if table.empty:
                continue
            tally = comparison.get("tally", {})
            blocks += [Heading(f"Every claim of {name}, with ours", 2),
                       Paragraph(", ".join(f"{n} {m}" for m, n in tally.items()) + "."),
                       Table(claim_frame(table))]
    return blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="docs/reproduction/<name>")
    args = parser.parse_args()
    text = render_markdown(summary_blocks(args.folder), "plots")
    (args.folder / "summary.md").write_text(text)
    print(f"wrote {args.folder / 'summary.md'}")


if __name__ == "__main__":
    main()
