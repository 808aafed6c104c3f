"""The events timeline: config errors, ordering, and what each event does (pure)."""

from __future__ import annotations

import threading

import pytest

from pathdiv.experiments.config.load import ConfigError, validate
from pathdiv.experiments.traffic.events import EventApplier, event_commands, timeline


def problems(raw) -> list[str]:
    with pytest.raises(ConfigError) as info:
        validate(raw)
    return info.value.problems


def test_event_errors_name_the_event_and_what_is_allowed():
    msgs = problems({"events": [
        {"link": "a1-c1", "action": "down"},
        {"at_s": 1, "link": "a1-c7", "action": "down"},
        {"at_s": 2, "link": "a1-c1"},
        {"at_s": 2, "link": "a1-c1", "action": "down", "set": {"bw_mbps": 5}},
        {"at_s": 3, "link": "a1>c1", "action": "up"},
        {"at_s": 4, "link": "a1-c1", "action": "reboot"},
        {"at_s": -1, "link": "a1-c1", "set": {"bw_mbps": 5, "colour": 1}},
    ]})
    assert "events[0].at_s: missing; expected seconds after the workload starts, e.g. " \
           "at_s: 5" in msgs
    assert any(m.startswith("events[1].link: 'a1-c7' is not a link") for m in msgs)
    assert "events[2]: needs exactly one of action (down or up) or set (e.g. set: " \
           "{bw_mbps: 5})" in msgs
    assert any(m.startswith("events[3]: needs exactly one") for m in msgs)
    assert "events[4].link: 'a1>c1': a link goes up as a whole; name it with '-' (a1-c1)" \
        in msgs
    assert "events[5].action: 'reboot' is not allowed; choose one of down, up" in msgs
    assert ("events[6].at_s: -1 is not allowed; expected a number >= 0 and <= 3600 (s)"
            in msgs)
    assert any(m.startswith("events[6].set.colour: unknown key; valid keys here are bw_mbps")
               for m in msgs)
    assert problems({"events": {"at_s": 1}}) == ["events: expected a list, got {'at_s': 1}"]


def test_timeline_orders_by_time_and_keeps_file_order_for_ties():
    cfg = validate({"events": [
        {"at_s": 15, "link": "a1-c1", "action": "up"},
        {"at_s": 5, "link": "a1-c1", "action": "down"},
        {"at_s": 8, "link": "e1-a1", "set": {"bw_mbps": 5}},
        {"at_s": 5, "link": "e2-a1", "set": {"loss_pct": 1}},
    ]})
    events = timeline(cfg.data["events"])
    assert [(e.at_s, e.index) for e in events] == [(5, 1), (5, 3), (8, 2), (15, 0)]
    assert events[2].changes == {"bw_mbps": 5} and events[2].action is None


def test_a_set_event_changes_the_conditions_it_is_applied_to():
    cfg = validate({"events": [{"at_s": 1, "link": "e1>a1", "set": {"bw_mbps": 5}}]})
    (event,) = timeline(cfg.data["events"])
    conds = cfg.link_conditions()
    commands, after = event_commands(cfg.topology(), event, conds)
    assert after[("e1", "a1")].bw_mbps == 5 and after[("a1", "e1")].bw_mbps == 20
    assert conds[("e1", "a1")].bw_mbps == 20  # the old mapping is left alone
    assert list(commands) == ["e1"]


class FakeNet:
    def __init__(self, cfg) -> None:
        self.topo = cfg.topology()
        self.link_conditions = cfg.link_conditions()
        self.ran: list[tuple[str, list[str]]] = []
        self.lock = threading.Lock()

    def cmd(self, node: str, argv: list[str]) -> str:
        with self.lock:
            self.ran.append((node, argv))
        return ""


def test_applier_applies_in_order_and_records_what_it_did_not_reach():
    cfg = validate({"events": [{"at_s": 0, "link": "a1-c1", "action": "down"},
                               {"at_s": 0, "link": "a1-c1", "action": "up"},
                               {"at_s": 3600, "link": "e1-a1", "set": {"bw_mbps": 5}}]})
    net = FakeNet(cfg)
    applier = EventApplier(net, timeline(cfg.data["events"]))
    applier.start()
    while len(applier.records) < 2:  # the two immediate events
        applier.join(0.05)
    records = applier.stop()  # the far one is not waited for
    assert [(r["index"], r["applied"]) for r in records] == [(0, True), (1, True), (2, False)]
    assert records[2]["error"] == "the workload ended before this time"
    assert [argv[1].endswith("counter drop") for _, argv in net.ran] == [True] * 2 + [False] * 2
