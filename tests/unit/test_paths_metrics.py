"""metrics.csv from parallel-paths runs (paths.json), and reference claims scoped to a
factor the experiment lacks."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from pathdiv.analysis.metrics.paths_run import paths_row, series_rows
from pathdiv.analysis.metrics.table import compute_metrics
from pathdiv.analysis.stats.claims import Claim, scoped

RESULT = {"complete": True, "bytes": 2_000_000, "fct_s": 4.0, "subflows_seen": 2,
          "bytes_per_path": {"path1": 1_500_000, "path2": 500_000}, "copied_share": 0.02,
          "ofo_mean_pkts": 3.5, "topology": [{}, {}],
          "goodput_series": [[0.5, 10.0], [1.0, 12.0]], "ofo_series": [[0.0, 0], [0.5, 3]],
          "subflow_mbps": {"path1": [[0.5, 6.0]], "path2": [[0.5, 4.0]]}}


def test_a_paths_result_becomes_goodput_queue_copies_and_path_shares():
    row = paths_row(RESULT)
    assert row["goodput_mbps"] == 4.0 and row["fct_s"] == 4.0 and row["ok"]
    assert row["ofo_mean_pkts"] == 3.5 and row["copied_pct"] == 2.0
    assert row["path1_share"] == 0.75 and row["path2_share"] == 0.25
    assert paths_row({**RESULT, "complete": False})["error"] == "incomplete fetch"
    assert math.isnan(row["goodput_before_mbps"]) and math.isnan(row["goodput_after_mbps"])


def test_goodput_before_and_after_the_first_event():
    # bins of 0.5 s, 32 Mbit (4 MB) in 3 s; the first of two events at 1 s: before it
    # 20 Mbit in 1 s, after it 12 Mbit in 2 s
    result = {**RESULT, "bytes": 4_000_000, "fct_s": 3.0,
              "events": [{"at_s": 2.5, "link": "ra2-rb2"}, {"at_s": 1.0, "link": "ra2-rb2"}],
              "goodput_series": [[0.5, 20.0], [1.0, 20.0], [1.5, 4.0], [2.0, 8.0],
                                 [2.5, 8.0], [3.0, 4.0]]}
    row = paths_row(result)
    assert row["goodput_before_mbps"] == 20.0
    assert row["goodput_after_mbps"] == 6.0
    # an event after the fetch ended: all of it before, nothing after
    late = paths_row({**result, "events": [{"at_s": 9.0, "link": "ra2-rb2"}]})
    assert late["goodput_before_mbps"] == 32.0 / 3.0
    assert math.isnan(late["goodput_after_mbps"])


def test_compute_metrics_reads_paths_runs(tmp_path: Path):
    for k, sched in enumerate(("arp", "roundrobin")):
        run = tmp_path / "runs" / f"long_{sched}_rep1"
        run.mkdir(parents=True)
        (run / "paths.json").write_text(json.dumps({**RESULT, "fct_s": 2.0 + k}))
        (run / "manifest.json").write_text(json.dumps({
            "run_id": run.name, "repetition": 1, "seed": 1, "flow_type": "long",
            "factors": {"scheduler": sched}, "status": "complete",
            "config": {"topology": {"kind": "paths"}, "workload": {"pattern": "silent"}}}))
    table = pd.read_csv(compute_metrics(tmp_path))
    assert list(table["scheduler"]) == ["arp", "roundrobin"]
    assert list(table["goodput_mbps"]) == [8.0, 2_000_000 * 8 / 3.0 / 1e6]
    assert math.isnan(table["utilization"][0])  # the fat tree's measures do not apply
    series = pd.read_csv(tmp_path / "paths_series.csv")
    one = series[series["run_id"] == "long_arp_rep1"]
    assert list(one["series"]) == ["goodput_mbps"] * 2 + ["subflow_mbps"] * 2 + ["ofo_pkts"] * 2
    assert list(one[one["series"] == "subflow_mbps"]["path"]) == ["path1", "path2"]


def test_a_claim_within_a_missing_factor_keeps_no_observation():
    claim = Claim("c", "VI.A", "better", "x", ({},), {"rtt2": ("rtt-250",)},
                  (({"scheduler": "arp"}, {"scheduler": "minrtt"}),), ("ofo_mean_pkts",))
    data = pd.DataFrame({"scheduler": ["arp", "minrtt"], "ofo_mean_pkts": [1.0, 2.0]})
    assert scoped(claim, data).empty
    data["rtt2"] = ["rtt-250", "rtt-50"]
    assert list(scoped(claim, data)["scheduler"]) == ["arp"]


def test_the_subflow_state_trace_becomes_series_by_path():
    result = {**RESULT, "subflow_state": {
        "fields": ["t_s", "rtt_ms", "unacked_pkts", "notsent_bytes", "pacing_mbps"],
        "path2": [[0.5, 121.5, 37, 43440, 12.4], [1.0, 130.0, 40, 0, 11.0]]}}
    rows = [r for r in series_rows("r1", result) if r["series"].startswith("subflow_")
            and r["series"] != "subflow_mbps"]
    assert {(r["series"], r["t_s"], r["value"]) for r in rows if r["t_s"] == 0.5} == {
        ("subflow_rtt_ms", 0.5, 121.5), ("subflow_unacked_pkts", 0.5, 37),
        ("subflow_notsent_bytes", 0.5, 43440), ("subflow_pacing_mbps", 0.5, 12.4)}
    assert {r["path"] for r in rows} == {"path2"} and len(rows) == 8
