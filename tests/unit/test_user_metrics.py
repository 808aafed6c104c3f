"""A metric registered from user code (`api.register_metric`): a column of metrics.csv
(per transfer, folded into its group; or per group), of transfer_metrics.csv, of
`results.open(...).observations`, a name `analysis.dvs` accepts, and a response the
statistics test. Synthetic captures (tests/support/pcap_synth.py), no root."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from pathdiv.analysis import results
from pathdiv.analysis.metrics.table import compute_metrics
from pathdiv.experiments import api
from pathdiv.topologies.fattree import FatTree
from tests.support.pcap_synth import CaptureBuilder, add_transfer, spec_between, write_run

MSS = 1000


@pytest.fixture
def metrics():
    """Two metrics registered for one test: one per transfer, one per group."""
    api.register_metric("fct_per_kb", "FCT per kilobyte (s/KB)",
                        lambda row: row["fct_s"] / (row["size_bytes"] / 1000))
    api.register_metric("biggest_kb", "largest transfer of the group (KB)",
                        lambda g: g["size_bytes"].max() / 1000, per="group")
    yield
    api.unregister_metric("fct_per_kb")
    api.unregister_metric("biggest_kb")


def synthetic_study(folder: Path) -> None:
    """Six runs, one factor at two levels, three repetitions; the spraying level's
    transfers are twice as large, so their FCT per KB differs from ECMP's."""
    topo = FatTree(4)
    for level, size in (("ecmp-tcp", 4000), ("ps-tcp", 8000)):
        for rep in range(3):
            b = CaptureBuilder(topo, hop_delay_s=50e-6)
            specs = [spec_between(topo, i + 1, "h1", server, size_bytes=size + i * MSS,
                                  t0=1000.0, group_id=0, mss=MSS, gap_s=1e-3 * (rep + 1),
                                  client_port=40000 + i)
                     for i, server in enumerate(("h5", "h9"))]
            rows = [add_transfer(b, s) for s in specs]
            write_run(folder / "runs" / f"{level}-{rep}", topo, b, rows, transport="tcp",
                      subflows=1, pattern="silent", factors={"switching": level},
                      run_id=f"{level}-{rep}", repetition=rep)


def test_registered_metrics_are_columns_of_every_table(tmp_path, metrics):
    synthetic_study(tmp_path)
    compute_metrics(tmp_path)
    per_transfer = pd.read_csv(tmp_path / "transfer_metrics.csv")
    want = per_transfer["fct_s"] / (per_transfer["size_bytes"] / 1000)
    assert per_transfer["fct_per_kb"].tolist() == pytest.approx(want.tolist())
    rows = pd.read_csv(tmp_path / "metrics.csv")
    assert len(rows) == 6
    for _, row in rows.iterrows():
        mine = per_transfer[per_transfer["run_id"] == row["run_id"]]
        assert row["fct_per_kb"] == pytest.approx(mine["fct_per_kb"].mean())  # fold: mean
        assert row["biggest_kb"] == mine["size_bytes"].max() / 1000
    observed = results.open(tmp_path).observations
    assert observed["biggest_kb"].tolist() == rows["biggest_kb"].tolist()


def test_a_registered_metric_is_a_response_of_the_statistics(tmp_path, metrics):
    synthetic_study(tmp_path)
    cfg = api.load_config({"factors": {"switching": {
        "ecmp-tcp": {"switching.mode": "ecmp"}, "ps-tcp": {"switching.mode": "spray"}}},
        "analysis": {"clusters": [], "dvs": ["fct_s", "fct_per_kb"]}})
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg.data))
    compute_metrics(tmp_path)
    stats = results.open(tmp_path).analyze()
    table = stats.anova()
    assert "fct_per_kb" in set(table["dv"]), table


def test_analysis_dvs_accepts_a_registered_metric_only(metrics):
    api.load_config({"analysis": {"dvs": ["fct_s", "biggest_kb"]}})
    api.unregister_metric("biggest_kb")
    with pytest.raises(api.ConfigError, match="biggest_kb"):
        api.load_config({"analysis": {"dvs": ["fct_s", "biggest_kb"]}})


def test_a_taken_name_or_a_bad_definition_is_refused(metrics):
    with pytest.raises(ValueError, match="computes already"):
        api.register_metric("goodput_mbps", "again", lambda row: 1.0)
    with pytest.raises(ValueError, match="is registered"):
        api.register_metric("fct_per_kb", "again", lambda row: 1.0)
    with pytest.raises(ValueError, match="per='flow'"):
        api.register_metric("x1", "x", lambda row: 1.0, per="flow")
    with pytest.raises(ValueError, match="fold='median'"):
        api.register_metric("x2", "x", lambda row: 1.0, fold="median")
    with pytest.raises(ValueError, match="column name"):
        api.register_metric("has space", "x", lambda row: 1.0)
