"""hosts.join_before_data (seed 004's counterfactual: every subflow joins before data):
the request's `Subflows` header and the server's bounded wait for the joins."""

from __future__ import annotations

import pytest

from pathdiv.experiments.config.load import validate
from pathdiv.experiments.traffic import transfer


def test_the_request_names_the_subflows_to_wait_for():
    head = b"GET /2000000 HTTP/1.0\r\nHost: 10.0.0.2\r\nSubflows: 4\r\n\r\n"
    assert transfer.parse_request(head) == 2_000_000
    assert transfer.requested_subflows(head) == 4
    assert transfer.requested_subflows(b"GET /10 HTTP/1.0\r\nsubflows:  8 \r\n\r\n") == 8
    # no header, or one that is not a count: no wait (curl's requests stay as they were)
    assert transfer.requested_subflows(b"GET /10 HTTP/1.0\r\nHost: x\r\n\r\n") == 0
    assert transfer.requested_subflows(b"GET /10 HTTP/1.0\r\nSubflows: all\r\n\r\n") == 0


@pytest.fixture
def looks(monkeypatch):
    def install(counts: list[int]) -> list[float]:
        seen = iter(counts)
        slept: list[float] = []
        monkeypatch.setattr(transfer, "mptcp_subflows", lambda _sock: next(seen))
        monkeypatch.setattr(transfer.time, "sleep", slept.append)
        return slept
    return install


def test_the_server_waits_until_the_subflows_joined(looks):
    slept = looks([1, 1, 2, 3, 4, 4])
    assert transfer.wait_for_joins(object(), 4) == 4  # type: ignore[arg-type]
    assert len(slept) == 4 and all(s > 0 for s in slept)  # it sleeps between looks


def test_the_wait_is_bounded(looks):
    slept = looks([1] * 10_000)
    assert transfer.wait_for_joins(object(), 4, wait_s=0.0) == 1  # type: ignore[arg-type]
    assert slept == []


def test_the_key_is_a_bool_off_by_default():
    raw = {"name": "t", "hosts": {"transport": "mptcp", "subflows": 4}}
    assert validate(raw).data["hosts"]["join_before_data"] is False
    raw["hosts"]["join_before_data"] = True
    assert validate(raw).data["hosts"]["join_before_data"] is True
