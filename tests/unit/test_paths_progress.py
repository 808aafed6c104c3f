"""A parallel-paths run says when its traffic starts: the lab kernel's progress showed
"building the network" for the whole of a 60-s fetch, and a run past its estimate read
as a build that would not end."""

from __future__ import annotations

import contextlib
from pathlib import Path

from pathdiv.experiments.config.load import load
from pathdiv.experiments.traffic import paths_run
from tests.conftest import REPO


def test_the_round_starts_when_the_network_is_up_and_before_the_traffic(monkeypatch, tmp_path):
    calls: list[str] = []

    class FakeRun:
        def __init__(self, cfg, flow_type, out):
            pass

        def congestion_controls(self):
            return ()

        def __getattr__(self, name):
            def step(*args):
                calls.append(name)
                return {} if name in ("fetch", "measurements") else None
            return step

    monkeypatch.setattr(paths_run, "PathsRun", FakeRun)
    monkeypatch.setattr(paths_run, "paths_network",
                        lambda topo: contextlib.nullcontext())
    monkeypatch.setattr(paths_run, "allow_cc", lambda *names: None)
    monkeypatch.setattr(paths_run, "restore_allowed_cc", lambda previous: None)
    monkeypatch.setattr(paths_run, "server_counters", lambda: {})
    cfg = load(REPO / "configs/seed003-fig8-paper.yaml")
    paths_run.run_paths(cfg, "long", Path(tmp_path),
                        lambda n, total: calls.append(f"round {n}/{total}"))
    assert calls.index("round 1/1") > calls.index("set_hosts")
    assert calls.index("round 1/1") < calls.index("start_background") < calls.index("fetch")
