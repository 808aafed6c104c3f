"""Three shards of configs/class-quick.yaml, one after another into one folder, against one
unsharded run of the same plan: the same complete runs, the same metrics.csv rows.

The plan is class-quick's --quick plan (3 switching levels x query/short, one iteration)
with one request per iteration, so the two executions take a few minutes together.
Timing metrics differ between any two executions; the rows' keys (run, factors, flow
type, transfer group, transfers, payload) do not.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.root, pytest.mark.slow]
PATHDIV = [sys.executable, "-m", "pathdiv.experiments.cli"]
CONFIG = REPO / "configs" / "class-quick.yaml"
PLAN = ["--quick", "--set", "workload.requests=1", "--set", "dataplane=nftables"]
KEYS = ("run_id", "switching", "repetition", "seed", "condition", "group_id", "flow_type",
        "transfers", "payload_bytes")


def pathdiv(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PATHDIV, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def complete_runs(out: Path) -> set[str]:
    return {m.parent.name for m in (out / "runs").glob("*/manifest.json")
            if json.loads(m.read_text())["status"] == "complete"}


def metric_keys(out: Path) -> list[tuple[str, ...]]:
    with (out / "metrics.csv").open() as fh:
        return sorted(tuple(row[k] for k in KEYS) for row in csv.DictReader(fh))


def test_three_shards_give_the_runs_and_rows_of_one_unsharded_run(root_fabric, tmp_path):
    sharded, whole = tmp_path / "sharded", tmp_path / "whole"
    for i in range(3):
        done = pathdiv("run", str(CONFIG), *PLAN, "--shard", f"{i}/3", "--out", str(sharded),
                       "--quiet")
        assert done.returncode == 0, done.stderr
        assert f"shard {i}/3 finished; a shard does not analyse" in done.stdout
        assert f"`pathdiv analyze {sharded}`" in done.stdout
        assert not (sharded / "metrics.csv").exists()
    status = pathdiv("status", str(sharded), "--json")
    assert status.returncode == 0, status.stderr
    state = json.loads(status.stdout)
    assert state["counts"] == {"complete": 6, "failed": 0, "skipped": 0, "running": 0,
                               "pending": 0}
    assert [sum(c.values()) for c in state["by_shard"].values()] == [2, 2, 2]
    for i in range(3):
        progress = json.loads((sharded / "progress" / f"shard-{i}-of-3.json").read_text())
        assert (progress["state"], progress["complete"]) == ("done", 2)
    # no run left marked running; each shard's plan lock stays, emptied (removing it
    # could let two processes lock two different files)
    left = sorted(p.name for p in (sharded / "running").iterdir())
    assert left == [f"plan-shard-{i}-of-3.lock" for i in range(3)]
    assert all((sharded / "running" / name).stat().st_size == 0 for name in left)
    analysed = pathdiv("analyze", str(sharded))
    assert analysed.returncode == 0, analysed.stderr
    assert f"report: {sharded / 'report.html'}" in analysed.stdout

    alone = pathdiv("run", str(CONFIG), *PLAN, "--out", str(whole), "--quiet")
    assert alone.returncode == 0, alone.stderr
    assert "report: " in alone.stdout

    assert complete_runs(sharded) == complete_runs(whole)
    assert len(complete_runs(whole)) == 6
    assert metric_keys(sharded) == metric_keys(whole)
    assert len(metric_keys(whole)) == 6 * 2  # two transfer groups per run (one per half)
    plan = json.loads((sharded / "plan.json").read_text())
    assert {e["status"] for e in plan["runs"]} == {"complete"}
    assert sorted(e["shard"] for e in plan["runs"]) == [0, 0, 1, 1, 2, 2]

    again = pathdiv("run", str(CONFIG), *PLAN, "--shard", "1/3", "--out", str(sharded),
                    "--quiet")  # a rerun resumes: nothing left to do
    assert again.returncode == 0, again.stderr
    assert "2 run(s): 2 complete" in again.stdout
