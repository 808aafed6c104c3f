"""docs/reproduction.md's claim table is generated from the reports' reference.json, not
typed: the generator merges folders and keeps one row for a claim nobody measured, and the
committed page holds exactly what it generates from the committed folders."""

import json
import re
from pathlib import Path

import pytest

from pathdiv.analysis.report.analyze import write_report
from pathdiv.analysis.report.claim_table import BEGIN, END, collect, render
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
    assert set(utilisation.agrees) == {"yes"}
    assert len(table[table.kind == "excess"]) == 24  # every cell of Table IV
    # no host level but vanilla: the Juggler claims are one not-measured row per pair
    juggler = table[table.claim_id == "ve-goodput-noisy-short"]
    assert len(juggler) == 1 and juggler.iloc[0]["mark"] == "not measured"
    text = render(folders)
    assert "| V.D | spray-raises-utilisation |" in text
    assert "`ve-throughput-noisy-short`: Noisy short flows" in text


def test_replace_block_fills_between_the_markers():
    page = f"intro\n{BEGIN}\nold\n{END}\nafter\n"
    assert replace_block(page, "new\n", BEGIN, END) == f"intro\n{BEGIN}\nnew\n{END}\nafter\n"
    with pytest.raises(ValueError, match="markers"):
        replace_block("no markers", "x", BEGIN, END)


def test_docs_reproduction_md_holds_the_generated_table(monkeypatch):
    monkeypatch.chdir(REPO)
    page = (REPO / "docs" / "reproduction.md").read_text()
    block = page.split(BEGIN, 1)[1].split(END, 1)[0]
    # the block's first line names the folders it was generated from
    folders = [Path(p) for p in re.findall(r"`(docs/reproduction/[^`]+)`",
                                           block.strip().splitlines()[0])]
    assert Path("docs/reproduction/noisy") in folders
    assert Path("docs/reproduction/silent") in folders
    reruns = {Path(a): Path(b) for a, b in re.findall(r"`--rerun (\S+) (\S+)`",
                                                      block.strip().splitlines()[0])}
    expected = render(folders, reruns or None)
    assert block.strip() == expected.strip(), (
        "docs/reproduction.md's claim table is stale: run python -m "
        "pathdiv.analysis.report.claim_table " + " ".join(map(str, folders))
        + "".join(f" --rerun {a} {b}" for a, b in reruns.items())
        + " --write docs/reproduction.md")


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
    assert set(noisy.agrees) == {"unstable"} and len(noisy) == 3
    assert set(silent.agrees) == {"yes"}  # no rerun: as before
    text = render(folders, {folders[0]: rerun})
    assert f"`--rerun {folders[0]} {rerun}`" in text.splitlines()[0]
    assert "unstable between seeds" in text.splitlines()[2]
