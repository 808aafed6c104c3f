"""The plane-against-plane table (analysis/report/planes.py) on planted metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pathdiv.analysis.report import planes
from pathdiv.analysis.stats.spec import AnalysisSpec

SPEC = AnalysisSpec(clusters=("flow_type",), ivs=("switching",), dvs=("fct_s", "goodput_mbps"))


def metrics(pairs: int, seed: int = 1, runs_prefix: str = "r") -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for switching in ("ecmp", "spray"):
        for i in range(pairs):
            rows.append({"flow_type": "query", "switching": switching,
                         "run_id": f"{runs_prefix}{switching}{i // 4}", "group_id": i % 4,
                         "fct_s": rng.uniform(0.03, 0.05), "goodput_mbps": rng.uniform(15, 19)})
    return pd.DataFrame(rows)


def verdicts(table: pd.DataFrame, config: str, dv: str) -> str:
    row = table[(table.configuration == config) & (table.dv == dv)]
    assert len(row) == 1
    return str(row.verdict.iloc[0])


def test_the_same_runs_on_both_planes_are_the_same_everywhere() -> None:
    first = metrics(8)
    table = planes.compare(first, first.copy(), SPEC)
    assert set(table.verdict) == {planes.SAME} and table.paired.all()
    assert (table.diff_pct == 0).all()


def test_a_plane_slower_in_one_cell_differs_there_and_nowhere_else() -> None:
    first = metrics(8)
    second = first.copy()
    slow = second.switching == "spray"
    second.loc[slow, "fct_s"] *= 1.10
    table = planes.compare(first, second, SPEC)
    assert verdicts(table, "spray", "fct_s") == planes.DIFFER
    assert verdicts(table, "ecmp", "fct_s") == planes.SAME
    assert verdicts(table, "spray", "goodput_mbps") == planes.SAME
    row = table[(table.configuration == "spray") & (table.dv == "fct_s")].iloc[0]
    assert row.diff_pct == pytest.approx(10.0)
    pooled = table[(table.cluster == "all") & (table.dv == "fct_s")].iloc[0]
    assert pooled.n == 16 and pooled.verdict == planes.DIFFER


def test_a_difference_below_the_smallest_effect_of_interest_is_negligible() -> None:
    first = metrics(8)
    second = first.copy()
    second["fct_s"] *= 1.002
    table = planes.compare(first, second, SPEC)
    assert verdicts(table, "spray", "fct_s") == planes.SAME_NEGLIGIBLE


def test_four_pairs_cannot_tell_whatever_the_difference() -> None:
    first = metrics(4)
    second = first.copy()
    second["fct_s"] *= 2
    table = planes.compare(first, second, SPEC)
    assert verdicts(table, "spray", "fct_s") == planes.TOO_FEW
    assert planes.smallest_wilcoxon_p(4) == 0.125 and planes.smallest_wilcoxon_p(6) < 0.05


def test_fewer_repetitions_on_one_plane_pair_only_the_twins() -> None:
    first = metrics(8)
    second = first[first.run_id.isin(["recmp0", "rspray0"])].copy()
    table = planes.compare(first, second, SPEC)
    assert table.paired.all() and set(table[table.cluster != "all"].n) == {4}


def test_other_runs_are_compared_unpaired() -> None:
    first = metrics(8, seed=1)
    second = metrics(8, seed=2, runs_prefix="s")
    table = planes.compare(first, second, SPEC)
    assert not table.paired.any() and set(table.n) == {"8/8"}
    assert set(table.cluster) == {"flow_type=query"}  # no pooled row without pairs
