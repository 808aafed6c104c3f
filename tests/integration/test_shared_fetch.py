"""A round's fetches in shared processes (traffic/rounds.py: what a k=16 permutation's
1,024 requests do on the virtual clock) move the same transfers as a process per
request: here a k=4 permutation on this machine's kernel, with the threshold lowered so
that its 16 requests share 4 processes, each socket made in its client's namespace."""

from __future__ import annotations

import time

import pytest

from pathdiv.experiments.config.load import load
from pathdiv.experiments.network.network import Network
from pathdiv.experiments.plan.designations import rounds
from pathdiv.experiments.traffic import rounds as rounds_mod
from pathdiv.experiments.traffic.rounds import Traffic, at_instant, run_workload
from tests.conftest import REPO, dataplane_class

pytestmark = pytest.mark.root
SIZE = 500_000


def test_shared_fetches_complete_every_transfer_from_its_clients_address(
        root_fabric, tmp_path, monkeypatch):
    cfg = load(REPO / "configs/permutation.yaml").with_overrides(
        [("hosts.kernel", "host"), ("hosts.transport", "tcp"), ("hosts.cc", "reno")])
    monkeypatch.setattr(rounds_mod, "SHARED_ABOVE", 4)
    monkeypatch.setattr(rounds_mod, "PER_SHARED", 5)
    started: list[list[str]] = []
    with Network(cfg, dataplane_class("kernel"), tmp_path / "lab") as net:
        real = net.transfer_here

        def here(args, **kw):
            started.append(list(args))
            return real(args, **kw)

        monkeypatch.setattr(net, "transfer_here", here)
        spawn = net.transfer

        def one_process(host, args, **kw):  # servers may have processes; fetches not
            if args[0] == "fetch":
                pytest.fail("a fetch process")
            return spawn(host, args, **kw)

        monkeypatch.setattr(net, "transfer", one_process)
        plan = rounds("permutation", net.topo.hosts, seed=3, iterations=1, requests=1)
        start = time.monotonic_ns() + 3_000_000_000  # the round's instant, as on the
        traffic = at_instant(Traffic("long", SIZE, "tcp", 8080, 60.0), start)  # virtual clock
        rows = run_workload(net, plan, traffic, tmp_path / "logs")
    fetches = [a for a in started if a[0] == "fetch"]
    assert len(fetches) == 4  # 16 requests, 5 a process
    assert len(rows) == 16 and all(r.ok for r in rows), [r.error for r in rows if not r.ok]
    for row in rows:  # the server logged each request from the client's own address
        assert row.client_port > 0 and row.end_s > row.start_s
        assert row.server_cpu_ms == row.server_cpu_ms, f"{row.server} saw no {row.client}"
