"""Seed 003's reference against its four figures' committed results: every claim is
measured on exactly the figure it speaks about (one reference spans four configs, and a
claim scoped too loosely reads another figure's runs as its own), and the figures' script
prints the comparisons the README quotes."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from pathdiv.analysis.stats.claims import in_study, load_reference, scoped, side_rows
from tests.conftest import REPO, load_script

RESULTS = REPO / "docs" / "reproduction" / "seed003"
FIGURES = ("fig8", "fig9", "fig10", "fig11")


def measured(claim, data: pd.DataFrame) -> bool:
    """Whether some comparison of the claim has observations on both sides."""
    rows = scoped(claim, in_study(load_reference("seed003"), data))
    for a, b in claim.compare:
        for metric in claim.metrics:
            if metric not in rows.columns:
                continue
            va = side_rows(rows, a)[metric].dropna()
            vb = side_rows(rows, b or {})[metric].dropna()
            if len(va) and len(vb):
                return True
    return False


@pytest.fixture(scope="module")
def results() -> dict[str, pd.DataFrame]:
    return {fig: pd.read_csv(RESULTS / fig / "metrics.csv") for fig in FIGURES}


def test_every_claim_is_measured_on_its_own_figure_only(results) -> None:
    for claim in load_reference("seed003").claims:
        own = claim.id.split("-")[0].rstrip("ab")  # fig9b-... speaks about fig9
        where = {fig for fig, data in results.items() if measured(claim, data)}
        assert where == {own}, (claim.id, where)


def test_the_figures_script_prints_the_comparisons_the_readme_quotes(results) -> None:
    figs = load_script("scripts/seed003_figs.py")
    compare, fig10, fig11 = figs.compare, figs.fig10, figs.fig11
    m = results["fig10"]
    arp, rr = (m[m["scheduler"] == s] for s in ("arp", "roundrobin"))
    text = compare(arp["goodput_after_mbps"], rr["goodput_after_mbps"])
    pct = 100 * (arp["goodput_after_mbps"].mean() / rr["goodput_after_mbps"].mean() - 1)
    assert text.startswith(f"{pct:+.1f} %, p = ") and math.isfinite(pct)
    table = fig10(m, None, 4.0)
    assert "| arp vs roundrobin | " in table and "| redundant |" in table
    m = results["fig11"]
    assert "| rtt-250 |" in fig11(m, None)
    assert compare(pd.Series([1.0, 2.0]), pd.Series([], dtype=float)) == "–"


def test_fig10s_stated_goodputs_are_kept_as_data() -> None:
    import yaml

    data = yaml.safe_load((REPO / "analysis" / "references" / "seed003.yaml").read_text())
    fig10 = data["tables"]["fig10_goodput"]
    assert (fig10["before_break_mbps"], fig10["after_break_mbps"]) == (40, 15)
    assert fig10["schedulers"] == ["round-robin", "arp"]
    # the claims' loader reads the reference as before (the table is data beside them)
    assert load_reference("seed003").claims


def test_the_paper_settings_table_gives_intervals_and_verdicts() -> None:
    figs = load_script("scripts/seed003_figs.py")
    a = pd.Series([30.0, 31.0, 29.0, 30.0])
    same = figs.effect_ci(a, pd.Series([30.5, 29.5, 30.0, 30.0]))
    assert same[1] < 0 < same[2] and figs.verdict("same", same).startswith("agrees")
    low = figs.effect_ci(pd.Series([10.0, 11.0, 9.0]), a)
    assert low[0] == pytest.approx(-66.7, abs=0.1) and low[2] < 0
    assert figs.verdict("same", low).startswith("disagrees")
    assert figs.verdict("better", low).startswith("disagrees")
    assert figs.verdict("better", figs.effect_ci(a, pd.Series([10.0, 11.0, 9.0]))
                        ).startswith("agrees")
    noisy = figs.effect_ci(pd.Series([5.0, 40.0, 20.0]), a)
    assert figs.verdict("same", noisy).startswith("inconclusive")
    m, lo, hi, n = figs.mean_ci(a)
    assert (m, n) == (30.0, 4) and lo < 30 < hi
