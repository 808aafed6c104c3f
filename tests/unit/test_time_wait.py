"""A reset on the virtual clock waits out the last run's TIME_WAIT sockets."""

from __future__ import annotations

from types import SimpleNamespace

from pathdiv.experiments.fabric import network
from pathdiv.experiments.fabric.network import Network


def test_the_wait_ends_when_no_time_wait_socket_is_left_or_at_its_limit(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(network.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(network.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    counts = iter([5, 3, 0, 7])
    net = SimpleNamespace(time_wait=lambda: next(counts))
    assert Network.wait_time_wait(net, 65.0) == 0 and clock[0] == 2.0
    stuck = SimpleNamespace(time_wait=lambda: 4)  # never drains: give up at the limit
    clock[0] = 0.0
    assert Network.wait_time_wait(stuck, 3.0) == 4 and clock[0] == 3.0
