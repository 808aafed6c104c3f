"""scripts/paper_settings.py: the paper-settings tables' comparisons, judged by the
verdict rules from groups read out of a runs.csv or paths.json files."""

from __future__ import annotations

import json

from tests.conftest import load_script

paper = load_script("scripts/paper_settings.py")


def test_groups_come_from_a_csv_by_prefix_and_from_paths_json(tmp_path):
    runs = tmp_path / "runs.csv"
    runs.write_text("run,goodput_mbps\nC1,24\nC2,26\nT1,30\nB1,10\n")
    assert paper.values(f"{runs}:goodput_mbps:run=C") == [24.0, 26.0]
    for name, value in (("a", 1.5), ("b", 2.5)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "paths.json").write_text(json.dumps({"goodput_mbps": value}))
    assert paper.values(f"{tmp_path}/*/paths.json:goodput_mbps") == [1.5, 2.5]


def test_a_wide_interval_is_no_equivalence_and_a_clear_gap_is_a_direction():
    # Fig. 8's traced runs: about 10 % apart, n = 4 and 2, not shown equal within 1 %
    same = paper.compare([24.4, 29.3, 24.9, 26.6], [27.1, 31.2], "equivalence", 1.0)
    assert same["verdict"] == "inconclusive" and same["ci_pct"][0] < -10 < same["ci_pct"][1]
    better = paper.compare([30.0, 31.0, 30.5], [20.0, 21.0, 20.5], "direction", 1.0)
    assert better["verdict"] == "agree" and round(better["effect_pct"]) == 49
    worse = paper.compare([20.0, 21.0, 20.5], [30.0, 31.0, 30.5], "direction", 1.0)
    assert worse["verdict"] == "disagree"
