"""docs/reproduction.md's claim table (and the Juggler folders' page) is generated from the
reports' reference.json, not typed: the generator merges folders and keeps one row for a
claim nobody measured, and the committed page holds exactly what it generates from the
committed folders."""

import json
import re
from pathlib import Path

import pytest

from pathdiv.analysis.report.analyze import write_report
from pathdiv.analysis.report.claim_table import (
    BEGIN,
    END,
    ROWS_BEGIN,
    ROWS_END,
    TALLY_BEGIN,
    TALLY_END,
    collect,
    render,
    render_rows,
    render_tally,
)
from pathdiv.analysis.report.generated import replace_block
from tests.conftest import REPO
from tests.support.study_data import synthetic_metrics


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    out = []
    for condition in ("noisy", "silent"):
        folder = tmp_path_factory.mktemp(condition)
        synthetic_metrics(5, repetitions=4, conditions=[condition], hosts=("vanilla",),
                          effects={"switching": {"ps-mptcp": {"utilization": 5.0}}}
                          ).to_csv(folder / "metrics.csv", index=False)
        (folder / "config.yaml").write_text(json.dumps(
            {"analysis": {"ivs": ["switching"], "reference": "seed001"}}))
        write_report(folder, stats_only=True)
        out.append(folder)
    return out


def test_the_table_merges_the_folders_and_every_claim_has_a_row(folders):
    (table,) = collect(folders).values()
    utilisation = table[table.claim_id == "spray-raises-utilisation"]
    assert sorted(utilisation.cluster.str.split(" / ").str[0]) == \
        ["condition=noisy"] * 3 + ["condition=silent"] * 3
    assert set(utilisation.verdict) == {"agree"} and set(utilisation.seeds) == {"one seed"}
    assert len(table[table.kind == "excess"]) == 24  # every cell of Table IV
    # the Juggler claims: no juggler level in these folders, one row per pair
    juggler = table[table.claim_id == "ve-goodput-noisy-short"]
    assert len(juggler) == 1 and juggler.iloc[0]["verdict"] == "not measured"
    text = render(folders)
    assert "| V.D | spray-raises-utilisation | direction | 3 tests, Holm | 6 |" in text
    assert "`ve-throughput-noisy-short`: Noisy short flows" in text
    # the tally: utilisation apart, every counted comparison one seed only
    assert re.search(r"\| direction \| utilisation \| 6 \| 0 \| 0 \| 0 \| 0 / 0 / 0 / 0 "
                     r"\| 0 \| 6 \|", text)


def test_replace_block_fills_between_the_markers():
    page = f"intro\n{BEGIN}\nold\n{END}\nafter\n"
    assert replace_block(page, "new\n", BEGIN, END) == f"intro\n{BEGIN}\nnew\n{END}\nafter\n"
    with pytest.raises(ValueError, match="markers"):
        replace_block("no markers", "x", BEGIN, END)


def _command(block):
    """The folders and reruns a generated block's first line names."""
    found = re.search(r"`python -m pathdiv\.analysis\.report\.claim_table ([^`]+)`",
                      block.strip().splitlines()[0])
    assert found, "the block names the command that made it"
    words = found.group(1).split()
    folders = [Path(w) for w in words[:words.index("--rerun")]] if "--rerun" in words \
        else [Path(w) for w in words]
    reruns = {}
    for i, word in enumerate(words):
        if word == "--rerun":
            reruns[Path(words[i + 1])] = Path(words[i + 2])
    return folders, reruns


def test_docs_reproduction_md_holds_the_generated_tables(monkeypatch):
    """The page holds each study's tally, claims.md the same folders' counts per claim and
    every comparison: each block what its command gives from the committed folders."""
    monkeypatch.chdir(REPO)
    page = (REPO / "docs" / "reproduction.md").read_text()
    block = page.split(TALLY_BEGIN, 1)[1].split(TALLY_END, 1)[0]
    folders, reruns = _command(block)
    assert Path("docs/reproduction/noisy") in folders
    assert Path("docs/reproduction/silent") in folders
    command = "python -m pathdiv.analysis.report.reproduction_pages"
    assert block.strip() == render_tally(folders, reruns or None).strip(), (
        f"docs/reproduction.md's claim tally is stale: run {command}")
    assert "| **all** | others |" in block and "| § | claim |" not in block
    rows = (REPO / "docs" / "reproduction" / "claims.md").read_text()
    for begin, end, made in ((BEGIN, END, render), (ROWS_BEGIN, ROWS_END, render_rows)):
        block = rows.split(begin, 1)[1].split(end, 1)[0]
        assert _command(block) == (folders, reruns)
        assert block.strip() == made(folders, reruns or None).strip(), (
            f"docs/reproduction/claims.md is stale: run {command}")


def test_a_verdict_that_flips_in_the_rerun_says_unstable(folders, tmp_path):
    rerun = tmp_path / "noisy-rerun"
    rerun.mkdir()
    # the same design with another seed, where spraying's utilisation gain is gone
    synthetic_metrics(6, repetitions=4, conditions=["noisy"], hosts=("vanilla",)
                      ).to_csv(rerun / "metrics.csv", index=False)
    (rerun / "config.yaml").write_text(json.dumps(
        {"analysis": {"ivs": ["switching"], "reference": "seed001"}}))
    write_report(rerun, stats_only=True)
    (table,) = collect(folders, {folders[0]: rerun}).values()
    utilisation = table[table.claim_id == "spray-raises-utilisation"]
    noisy = utilisation[utilisation.cluster.str.startswith("condition=noisy")]
    silent = utilisation[utilisation.cluster.str.startswith("condition=silent")]
    assert set(noisy.seeds) == {"unstable"} and len(noisy) == 3
    assert set(noisy.verdict_2) == {"inconclusive"}
    assert set(silent.seeds) == {"one seed"}  # no rerun
    text = render(folders, {folders[0]: rerun})
    assert f" --rerun {folders[0]} {rerun}`" in text.splitlines()[0]
    assert re.search(r"\| direction \| utilisation \| 6 \| 0 \| 0 \| 0 \| 0 / 0 / 0 / 0 "
                     r"\| 3 \| 3 \|", text)
    rows = render_rows(folders, {folders[0]: rerun})
    assert "| inconclusive (unstable) |" in rows


def test_an_old_reference_json_is_refused_with_the_command_that_rewrites_it(tmp_path):
    (tmp_path / "reference.json").write_text(json.dumps(
        {"seed001": {"claims": [{"claim_id": "x", "agrees": "yes"}]}}))
    with pytest.raises(ValueError, match="predates the verdicts by claim kind; rewrite it "
                                         "with `pathdiv analyze"):
        collect([tmp_path])


def test_the_juggler_claim_page_holds_the_generated_tables(monkeypatch):
    monkeypatch.chdir(REPO)
    page = (REPO / "docs" / "reproduction" / "juggler-claims.md").read_text()
    block = page.split(BEGIN, 1)[1].split(END, 1)[0]
    folders, reruns = _command(block)
    assert Path("docs/reproduction/study001-silent-juggler-qs") in folders
    assert reruns[Path("docs/reproduction/study001-noisy-juggler-qs")] == Path(
        "docs/reproduction/study001-noisy-juggler-qs-seed201")
    command = ("python -m pathdiv.analysis.report.claim_table " + " ".join(map(str, folders))
               + "".join(f" --rerun {a} {b}" for a, b in reruns.items())
               + " --write docs/reproduction/juggler-claims.md"
               + " --rows docs/reproduction/juggler-claims.md")
    assert block.strip() == render(folders, reruns).strip(), (
        f"docs/reproduction/juggler-claims.md is stale: run {command}")
    rows = page.split(ROWS_BEGIN, 1)[1].split(ROWS_END, 1)[0]
    assert _command(rows) == (folders, reruns)
    assert rows.strip() == render_rows(folders, reruns).strip(), (
        f"docs/reproduction/juggler-claims.md is stale: run {command}")
    # the Juggler claims are judged there, none stands in
    table = collect(folders, reruns)["seed001"]
    juggler = table[table.claim_id == "juggler-slower-silent"]
    assert len(juggler) and (juggler.verdict != "not comparable").all()
