"""Practical significance: beside every p-value the effect as a percentage of the mean,
and a screen that tells a significant but negligible effect from one that matters."""

import numpy as np
import pandas as pd
import pytest

from pathdiv.analysis.stats.effects import (
    NEGLIGIBLE,
    NOT_SIGNIFICANT,
    REAL,
    interaction_pct,
    main_effect_pct,
    screen,
    screen_anova,
    verdict,
)
from pathdiv.analysis.stats.spec import AnalysisSpec
from pathdiv.analysis.stats.study import analyze_metrics


def _planted(seed: int = 0) -> pd.DataFrame:
    """A virtual-clock-like cluster: tiny noise, so a 0.2 % FCT difference between host
    levels is highly significant; switching moves goodput by 10 %."""
    rng = np.random.default_rng(seed)
    rows = []
    for sw, goodput in (("ecmp-mptcp", 18.0), ("ps-mptcp", 19.8)):
        for host, fct in (("vanilla", 10.0), ("rb", 9.98)):
            for _ in range(30):
                rows.append({"condition": "silent", "flow_type": "long", "switching": sw,
                             "host": host, "fct_s": fct + 0.001 * rng.standard_normal(),
                             "goodput_mbps": goodput + 0.05 * rng.standard_normal(),
                             "throughput_mbps": 20 + rng.standard_normal(),
                             "utilization": 0.5 + 0.01 * rng.standard_normal()})
    return pd.DataFrame(rows)


def test_effect_sizes_are_percentages_of_the_mean():
    data = _planted()
    assert main_effect_pct(data, "switching", "goodput_mbps") == pytest.approx(
        1.8 / 18.9 * 100, rel=0.01)
    assert main_effect_pct(data, "host", "fct_s") == pytest.approx(0.2, rel=0.05)
    assert interaction_pct(data, ["switching", "host"], "fct_s") < 0.01


def test_the_screen_separates_negligible_from_real_effects():
    results = analyze_metrics(_planted(), AnalysisSpec(min_effect_pct=1.0))
    (cluster,) = results.clusters
    host_fct = cluster.anova[(cluster.anova.effect == "host") & (cluster.anova.dv == "fct_s")]
    assert float(host_fct.p.iloc[0]) < 1e-20  # "significant" ...
    assert float(host_fct.effect_pct.iloc[0]) == pytest.approx(0.2, rel=0.05)  # ... but tiny
    split = screen_anova(cluster.anova, 0.05, 1.0)
    assert any(s.startswith("host on fct_s") for s in split[NEGLIGIBLE])
    assert any(s.startswith("switching on goodput_mbps") for s in split[REAL])
    assert not any(s.startswith("host on fct_s") for s in split[REAL])
    # the MANOVA rows carry their largest metric effect; a lower bar moves host to REAL
    mv = screen(cluster.manova, 0.05, 1.0)
    assert any(s.startswith("switching") for s in mv[REAL])
    assert any(s.startswith("host") for s in screen(cluster.manova, 0.05, 0.1)[REAL])
    summary = results.summary()
    assert "significant but negligible (< 1 %)" in summary
    # the post-hoc table has the effect beside each p-value
    pair = cluster.posthoc[(cluster.posthoc.grouping == "host")
                           & (cluster.posthoc.dv == "fct_s")].iloc[0]
    assert abs(pair.effect_pct) == pytest.approx(0.2, rel=0.05)


def test_verdicts():
    assert verdict(0.2, 50.0, 0.05, 1.0) == NOT_SIGNIFICANT
    assert verdict(0.01, 0.5, 0.05, 1.0) == NEGLIGIBLE
    assert verdict(0.01, -1.5, 0.05, 1.0) == REAL
    assert verdict(0.01, float("nan"), 0.05, 1.0) == NEGLIGIBLE


def test_min_effect_pct_is_validated():
    with pytest.raises(ValueError, match="min_effect_pct"):
        AnalysisSpec(min_effect_pct=-1)
