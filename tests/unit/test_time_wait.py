"""A reset on the virtual clock waits out the last run's TIME_WAIT sockets."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pathdiv.experiments.fabric.netstate import parse_tcp
from pathdiv.experiments.network import reuse
from pathdiv.experiments.network.reuse import NetworkReuse


def test_the_wait_ends_when_no_time_wait_socket_is_left_or_at_its_limit(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(reuse.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(reuse.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    # the last timer expires in 40 s: one sleep to just past it, then a short one
    reads = iter([(5, 40.0), (1, 0.1), (0, 0.0), (7, 1.0)])
    net = SimpleNamespace(time_wait=lambda: next(reads))
    assert NetworkReuse.wait_time_wait(net, 65.0) == 0 and clock[0] == pytest.approx(40.5 + 0.6)
    stuck = SimpleNamespace(time_wait=lambda: (4, 30.0))  # never drains: give up at the limit
    clock[0] = 0.0
    assert NetworkReuse.wait_time_wait(stuck, 3.0) == 4 and clock[0] == 3.0


def test_the_count_and_expiry_are_read_from_the_time_wait_rows_timer_column():
    rows = [
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt",
        "   0: 0A000002:1F90 0A000102:C350 06 00000000:00000000 03:00000BB8 00000000 0 0 0",
        "   1: 0A000002:1F91 0A000102:C351 06 00000000:00000000 03:0000012C 00000000 0 0 0",
        "   2: 0A000002:1F92 0A000102:C352 01 00000000:00000000 02:00FFFFFF 00000000 0 0 1",
    ]
    # two TIME_WAIT rows, the last expiring at 0xBB8 = 3000 ticks; the ESTABLISHED row not
    table = parse_tcp(rows)
    assert (table.time_wait, table.time_wait_expiry_s) == (2, 30.0)
    assert table.live == ["ESTABLISHED 0A000002:1F92 0A000102:C352"]
    assert parse_tcp(rows[:1]) == ([], 0, 0.0)
