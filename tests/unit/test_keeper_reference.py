"""The reference snapshot a kept network is reset against is taken only when a later run
of the same boot could reuse the network: at k=16 it costs 10 min of guest CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from pathdiv.experiments.config.load import load
from pathdiv.experiments.execute import keeper as keeper_mod
from pathdiv.experiments.execute.keeper import NetworkKeeper
from tests.conftest import REPO


class FakeNetwork:
    def __init__(self, cfg, plane, workdir):
        self.topo = cfg.topology()
        self.stopped = False

    def __enter__(self):
        return self

    def stop(self):
        self.stopped = True


class Plane:
    name = "nftables"


@pytest.fixture
def references(monkeypatch):
    taken: list[object] = []

    class FakeReuse:
        def __init__(self, net):
            self.net = net

        def take_reference(self):
            taken.append(self.net)
            return []

        def reset_for(self, cfg, workdir):
            return {"reset_s": 0.0}

    monkeypatch.setattr(keeper_mod, "Network", FakeNetwork)
    monkeypatch.setattr(keeper_mod, "NetworkReuse", FakeReuse)
    return taken


def reusing():
    return load(REPO / "configs/class-probe.yaml").with_overrides([("network.reuse", True)])


def test_the_last_run_of_a_boot_takes_no_reference_and_leaves_nothing_kept(references):
    keeper = NetworkKeeper()
    keeper.runs_after = 0
    net, info = keeper.acquire(reusing(), Plane, Path("/nonexistent"))
    assert references == []
    assert "not taken" in info["reference"]
    keeper.release(True)
    assert net.stopped and keeper.net is None  # nothing left to reuse it


def test_a_run_with_runs_after_it_keeps_its_network_for_the_next(references):
    keeper = NetworkKeeper()
    keeper.runs_after = 1
    net, _ = keeper.acquire(reusing(), Plane, Path("/nonexistent"))
    assert references == [net]
    keeper.release(True)
    keeper.runs_after = 0
    again, info = keeper.acquire(reusing(), Plane, Path("/nonexistent"))
    assert again is net and info["reused"]
    # unknown (a caller that does not say): as before, the reference is taken
    fresh = NetworkKeeper()
    other, _ = fresh.acquire(reusing(), Plane, Path("/nonexistent"))
    assert references == [net, other]
