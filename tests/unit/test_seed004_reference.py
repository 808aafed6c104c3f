"""Seed 004's reference: its figures agree with the paper's tables they are derived from,
and every claim names a factor level one of the seed004 configs runs."""

from __future__ import annotations

import yaml

from pathdiv.analysis.stats.claims import REFERENCE_DIR, load_reference
from pathdiv.experiments.config.load import load
from tests.conftest import REPO

CONFIGS = ("sweep", "ese", "short", "energy")


def test_table_iv_ratios_are_the_tables_rtts() -> None:
    raw = yaml.safe_load((REFERENCE_DIR / "seed004.yaml").read_text())
    rtt = {int(n): d for n, _, d in raw["tables"]["table_iv"]["values"]}
    ref = load_reference("seed004")
    ratios = [c for c in ref.of_kind("figure") if c.id.startswith("table-iv-d")]
    assert len(ratios) == 6
    for claim in ratios:
        (a, b), = claim.compare
        n_a, n_b = int(a["subflow_count"][2:]), int(b["subflow_count"][2:])
        assert round(100 * (rtt[n_a] / rtt[n_b] - 1), 1) == claim.paper_pct, claim.id


def test_every_claim_side_is_a_level_of_a_seed004_config() -> None:
    levels: dict[str, set[str]] = {}
    for name in CONFIGS:
        cfg = load(REPO / "configs" / f"seed004-{name}.yaml")
        for factor, lv in cfg.data["factors"].items():
            levels.setdefault(factor, set()).update(lv)
    for claim in load_reference("seed004").claims:
        for pair in claim.compare:
            for side in filter(None, pair):
                for factor, level in side.items():
                    assert level in levels.get(factor, set()), (claim.id, factor, level)


def test_ese_outcomes_count_one_open_window_per_path_as_success() -> None:
    import importlib.util

    import pandas as pd

    spec = importlib.util.spec_from_file_location("seed004_tables",
                                                  REPO / "scripts" / "seed004_tables.py")
    assert spec and spec.loader
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    m = pd.DataFrame({
        "ok": True,
        "subflow_count": ["sf4", "sf4", "sf4", "sf8", "sf2", "sf2"],
        "placement": ["one-path", "one-path", "disjoint", "disjoint", "disjoint", "disjoint"],
        "paths": [4.0, 4.0, 4.0, 4.0, 2.0, 1.0],
        "open_subflows": [1.0, 3.0, 4.0, 2.0, 2.0, 1.0],
    })
    assert tables.ese_outcomes(m)["outcome"].tolist() == [
        "success", "extra left open", "success", "closed too many", "success", "success"]
