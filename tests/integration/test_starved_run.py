"""The fidelity monitor on a real host-kernel run: a data plane starved on purpose is
judged invalid and repeated, both attempts kept; the same run left alone is ok.

The planted disturbance makes every switch egress drain at 40 % of its configured rate
during the first attempt's traffic (its HTB class lowered behind the config's back):
what a starved data plane looks like from outside, and the symptom CPU steal causes.
If the undisturbed attempt is not ok, the host itself starved it (other jobs, steal):
the test runs it twice more and skips, naming what the monitor measured, rather than
fail. A CPU hog is not used: on this kernel, forwarding and HTB dequeue run in softirq on
interrupt exit, which no task priority or cgroup limit holds back, so a hog at nice -20
or SCHED_FIFO slowed the transfer processes but left backlogged links at 0.97-0.99 of
their rate in three of four tries (docs/fidelity.md has the figures).
"""

from __future__ import annotations

import json

import pytest

from pathdiv.experiments.config.load import load
from pathdiv.experiments.fidelity import runhooks
from pathdiv.experiments.plan.runs import expand, quick_config
from pathdiv.experiments.runner import prepare_folder, run_plan
from tests.conftest import REPO
from tests.support.hog import slow_links

pytestmark = pytest.mark.root
SLOW = 0.4


def _plan(tmp_path):
    cfg = quick_config(load(REPO / "configs/class-quick.yaml",
                            ["fidelity.max_repeats=1", "capture.enabled=false",
                             "workload.requests=1", "dataplane=nftables"]))
    runs = expand(cfg, repetitions=1, flow_types=["short"], only={"switching": "ecmp-tcp"})
    assert len(runs) == 1
    return cfg, runs, prepare_folder(cfg, tmp_path / "results")


def test_a_starved_data_plane_is_invalid_repeated_and_kept(root_fabric, tmp_path, monkeypatch):
    cfg, runs, folder = _plan(tmp_path)
    original = runhooks.start
    attempts: list[int] = []

    def start_disturbed(net, section, manifest, *rest):
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            slow_links(net, SLOW)
        return original(net, section, manifest, *rest)

    monkeypatch.setattr(runhooks, "start", start_disturbed)
    outcome = run_plan(cfg, runs, folder, quiet=True)
    assert outcome.count("complete") == 1
    run_dir = folder / "runs" / runs[0].run_id
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert attempts == [1, 2]
    first, second = manifest["attempts"]
    assert (first["attempt"], first["folder"], first["verdict"]) == (1, "attempt-1", "invalid")
    assert any(r.startswith("bottleneck link ") and r.endswith("of its rate while backlogged")
               for r in first["reasons"]), first
    kept = json.loads((run_dir / "attempt-1" / "manifest.json").read_text())
    assert kept["fidelity"]["verdict"] == "invalid" and kept["status"] == "complete"
    record = json.loads((run_dir / "attempt-1" / "fidelity.json").read_text())
    assert record["figures"]["worst_link_ratio"] < cfg.data["fidelity"]["link_rate_invalid"]
    assert (run_dir / "attempt-1" / "transfers.csv").is_file()
    assert (second["attempt"], second["folder"]) == (2, ".")
    assert second["verdict"] == manifest["fidelity"]["verdict"]
    assert (run_dir / "fidelity.json").is_file() and (run_dir / "transfers.csv").is_file()
    assert manifest["clock"] == "real" and record["monitor"]["samples"] > 0
    if manifest["fidelity"]["verdict"] != "ok":  # the host, not the plant: try again
        _undisturbed_is_ok(tmp_path, manifest["fidelity"])


def _undisturbed_is_ok(tmp_path, second) -> None:
    """The same run without the disturbance is ok; a busy or stolen-from host gets two
    more tries, then the test skips with what the monitor measured, never fails."""
    seen = [second]
    for n in range(2):
        cfg, runs, folder = _plan(tmp_path / f"undisturbed-{n}")
        run_plan(cfg, runs, folder, quiet=True)
        manifest = json.loads((folder / "runs" / runs[0].run_id / "manifest.json").read_text())
        if manifest["fidelity"]["verdict"] == "ok":
            return
        seen.append(manifest["fidelity"])
    pytest.skip("this host starved even undisturbed runs: " + " | ".join(
        f"steal {f['figures']['steal_pct']} %, CPU pressure {f['figures']['cpu_wait_pct']} %: "
        f"{'; '.join(f['reasons'])}" for f in seen))
