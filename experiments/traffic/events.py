"""Link events during a run: a timeline (pure) and the thread that applies it.

`timeline(cfg_events)` orders the config's `events` by time (ties keep the order in the
file). `EventApplier` is started when the workload starts; it sleeps until each event
(an `threading.Event` wait, so stopping it is immediate), runs the event's commands in
the nodes it touches (`pathdiv.experiments.fabric.conditions`) and records each event
with the time it was actually applied, for the manifest and the report's time plots.
Events still ahead when the workload ends are recorded as not applied.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pathdiv.experiments.fabric.conditions import change_commands, link_state_commands
from pathdiv.experiments.running import RunningNetwork
from pathdiv.topologies.conditions import Conditions, changed, parse_link
from pathdiv.topologies.fattree import FatTree

log = logging.getLogger("pathdiv")

COMMAND_TIMEOUT_S = 15.0  # joining the thread waits at most 4 times this


@dataclass(frozen=True)
class LinkEvent:
    """One change of one link `at_s` seconds after the workload started."""

    index: int  # position in the config's list
    at_s: float
    link: str
    action: str | None = None  # down | up
    changes: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        what = self.action or ", ".join(f"{k}={v:g}" for k, v in self.changes.items())
        return f"{self.link} {what}"


def timeline(events: Iterable[Mapping[str, Any]]) -> list[LinkEvent]:
    """The config's events in the order they happen (stable for equal times)."""
    out = []
    for i, e in enumerate(events):
        changes = {k: v for k, v in (e.get("set") or {}).items() if v is not None}
        out.append(LinkEvent(i, float(e["at_s"]), str(e["link"]), e.get("action"), changes))
    return sorted(out, key=lambda ev: (ev.at_s, ev.index))


def event_commands(topo: FatTree, event: LinkEvent, conds: Conditions,
                   ecn_threshold_pkts: int | None = None,
                   ) -> tuple[dict[str, list[list[str]]], Conditions]:
    """node -> commands for `event`, and the conditions after it (pure); switches'
    egress leaves keep marking ECN from `ecn_threshold_pkts` (nftables plane)."""
    link, dirs = parse_link(topo, event.link)
    if event.action is not None:
        return link_state_commands(link, event.action == "up"), conds
    after = dict(conds)
    commands: dict[str, list[list[str]]] = {}
    for d in dirs:
        after[d] = changed(conds[d], event.changes)
        for node, cmds in change_commands(topo, d, conds[d], after[d],
                                          ecn_threshold_pkts).items():
            commands.setdefault(node, []).extend(cmds)
    return commands, after


class ShapedNetwork(RunningNetwork, Protocol):
    """A running network whose link conditions events change (`network.Network`)."""

    link_conditions: Conditions  # its `qdisc_ecn_pkts`, where it has one, shapes them too


class EventApplier(threading.Thread):
    """Applies a timeline on a running network, relative to `start()` time."""

    def __init__(self, net: ShapedNetwork, events: list[LinkEvent]) -> None:
        super().__init__(name="pathdiv-events", daemon=True)
        self.net = net
        self.events = events
        self.records: list[dict[str, Any]] = []
        self._halt = threading.Event()
        self.t0_wall = 0.0
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.monotonic()
        self.t0_wall = time.time()
        super().start()

    def run(self) -> None:
        for event in self.events:
            if self._halt.wait(max(0.0, event.at_s - (time.monotonic() - self._t0))):
                break
            self.records.append(self._apply(event))
        applied = {r["index"] for r in self.records}
        for event in self.events:
            if event.index not in applied:
                self.records.append({**self._base(event), "applied": False,
                                     "error": "the workload ended before this time"})

    def stop(self) -> list[dict[str, Any]]:
        """Stop waiting, join, return the records in timeline order."""
        self._halt.set()
        if self.is_alive():
            self.join(timeout=COMMAND_TIMEOUT_S * 4)
        order = {e.index: n for n, e in enumerate(self.events)}
        return sorted(self.records, key=lambda r: order.get(r["index"], 0))

    @staticmethod
    def _base(event: LinkEvent) -> dict[str, Any]:
        return {"index": event.index, "at_s": event.at_s, "link": event.link,
                "action": event.action, "set": dict(event.changes)}

    def _apply(self, event: LinkEvent) -> dict[str, Any]:
        record = self._base(event)
        record["applied_s"] = round(time.monotonic() - self._t0, 4)
        record["wall_s"] = time.time()
        try:
            commands, self.net.link_conditions = event_commands(
                self.net.topo, event, self.net.link_conditions,
                getattr(self.net, "qdisc_ecn_pkts", None))
            for node, cmds in commands.items():
                for argv in cmds:
                    _run(self.net, node, argv)
            record.update(applied=True, error="")
            log.info("event at %.2f s: %s", record["applied_s"], event.describe())
        except Exception as exc:  # recorded; the run goes on
            record.update(applied=False, error=f"{type(exc).__name__}: {exc}")
            log.warning("event %s failed: %s", event.describe(), record["error"])
        record["done_s"] = round(time.monotonic() - self._t0, 4)
        return record


def _run(net: RunningNetwork, node: str, argv: list[str]) -> None:
    """Through the node's own shell: nothing else uses it while the workload runs
    (transfers are separate processes), and it starts no new process to enter the
    namespace, so the event lands on time even when the CPUs are busy."""
    net.cmd(node, argv)
