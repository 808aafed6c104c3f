"""A scaled-down noisy plan whose busiest capture the old equal-share cap would have cut:
with caps sized from the plan, no capture fills and every observation has its metrics."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from pathdiv.analysis.metrics.table import compute_metrics
from pathdiv.experiments.config.load import load
from pathdiv.experiments.plan.budget import packet_bytes, run_need
from pathdiv.experiments.plan.runs import expand
from tests.conftest import count_packets

pytestmark = pytest.mark.root
PATHDIV = [sys.executable, "-m", "pathdiv.experiments.cli"]


def test_no_capture_fills_where_the_old_equal_share_would_have(root_fabric, tmp_path):
    data = {
        "name": "budget", "seed": 3, "repetitions": 1, "dataplane": "nftables",
        "hosts": {"transport": "mptcp", "kernel": "host"},
        "switching": {"mode": "spray"},
        "workload": {"pattern": "noisy", "flow_types": {"long": "2MB"}, "iterations": 1,
                     "timeout_s": 60},
        "capture": {"snaplen": 96, "budget_mb": 1},
    }
    config = tmp_path / "budget.yaml"
    config.write_text(yaml.safe_dump(data))
    # too small a fixed budget is refused before anything starts, naming the size needed
    done = subprocess.run([*PATHDIV, "check", str(config)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 2
    assert "capture.budget_mb: 1 is too small" in done.stderr
    (run,) = expand(load(config))
    need = run_need(run.config, run.flow_type, run.workload_seed)
    budget = math.ceil(need.total_mb)  # the smallest budget check accepts
    out = tmp_path / "out"
    done = subprocess.run([*PATHDIV, "run", str(config), "--out", str(out), "--quiet",
                           "--no-analyze",
                           "--set", f"capture.budget_mb={budget}"],
                          capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (manifest_path,) = (out / "runs").glob("*/manifest.json")
    manifest = json.loads(manifest_path.read_text())
    assert manifest["status"] == "complete"
    assert manifest["capture"]["stop"]["files_full"] == []
    # the old rule (an equal share of the budget per file) could not hold the busiest link
    captured = {p.stem: count_packets(p) for p in (manifest_path.parent / "captures").glob(
        "*.pcap")}
    old_cap = max(1000, budget * 1_000_000 // 48 // packet_bytes(96))
    assert max(captured.values()) > old_cap
    metrics = pd.read_csv(compute_metrics(out))
    assert len(metrics) == 2 and metrics["ok"].all()
    assert metrics[["fct_s", "goodput_mbps", "utilization", "excess_pct"]].notna().all().all()
