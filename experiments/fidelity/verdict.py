"""The fidelity verdict of one run (pure): `ok`, `degraded` or `invalid`, with reasons.

Inputs are what `experiments.fidelity.monitor` sampled over the traffic phase:

- per core, the share of time it was busy, in softirq, and stolen by the hypervisor
  (only steal is judged: the workload's own process starts keep a core busy and CPU
  pressure high in healthy runs too; busy, softirq and pressure are recorded);
- per shaped egress, what it sent of the bytes it surely had to send (its queue at one
  sample, up to what its rate sends by the next: `qdiscs.EgressTrack`) and how long
  those take at its rate, against that rate; its drops and overlimits;
- per host, TCP retransmission timeouts (RTOs); the qdisc drops of the whole network
  explain up to as many RTOs, the rest are counted as unexplained;
- recorded, not judged: per host the retransmitted segments, per software switch the
  CPU its processes used, per switch the packets it lost outside the emulated queues
  and the captures' CPU (figures `retrans_segs`, `switch_cpu_s`, `switch_cpu_cores`,
  `switch_lost_packets`, `capture_cpu_s`).

A backlogged HTB egress must send at its configured rate: when it sends less, the
kernel did not get the CPU to drain it, so every rate and FCT of the run is the host's,
not the emulated network's. Stolen CPU says the same from the other side. On the
virtual clock (User-Mode Linux with time-travel) time stops while the host CPU is
away, so none of this can happen: such runs are `ok` by construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

OK = "ok"
DEGRADED = "degraded"
INVALID = "invalid"
VERDICTS = (OK, DEGRADED, INVALID)
CLOCKS = ("real", "virtual")
VIRTUAL_REASON = "virtual clock: host CPU cannot affect link rates"


@dataclass(frozen=True)
class CoreShare:
    """One core over the traffic phase: fractions (0..1) of its time."""

    core: str
    busy: float
    softirq: float
    steal: float


@dataclass(frozen=True)
class LinkShare:
    """One shaped egress (node:interface) over the traffic phase."""

    link: str
    rate_bps: float | None
    backlogged_bytes: int
    backlogged_s: float
    drops: int = 0
    overlimits: int = 0

    @property
    def ratio(self) -> float | None:
        """Bytes sent while surely backlogged over what the configured rate allows."""
        if not self.rate_bps or self.backlogged_s <= 0:
            return None
        return self.backlogged_bytes * 8 / self.backlogged_s / self.rate_bps


@dataclass(frozen=True)
class Samples:
    """Everything the verdict looks at; `duration_s` is the traffic phase."""

    duration_s: float
    cores: list[CoreShare] = field(default_factory=list)
    links: list[LinkShare] = field(default_factory=list)
    rtos: dict[str, int] = field(default_factory=dict)
    backlog_drops: int = 0  # /proc/net/softnet_stat: packets the kernel's input queue lost
    cpu_wait: float | None = None  # PSI: share of the time some task waited for a CPU
    # per host, subflow windows mptcp-d closed (MPTcpExt MptcpDClosed); None where the
    # kernel has no such counter
    windows_closed: dict[str, int] | None = None
    # per host, CPU seconds of its processes over the traffic phase (fabric/cpuacct.py);
    # None where not accounted
    host_cpu_s: dict[str, float] | None = None
    retrans: dict[str, int] = field(default_factory=dict)  # per host: Tcp RetransSegs
    # per switch with processes (a software switch): their CPU seconds over the phase
    switch_cpu_s: dict[str, float] = field(default_factory=dict)
    # per switch: packets received less those its egress qdiscs sent, dropped or held
    switch_lost: dict[str, int] = field(default_factory=dict)
    capture_cpu_s: float | None = None  # the link captures' (tcpdump) CPU seconds
    # per host, the reordering counters that moved (REORDER_COUNTERS' names), and
    # which of them the kernel counts at all (a figure it lacks is None, not 0)
    reordering: dict[str, dict[str, int]] = field(default_factory=dict)
    reorder_counters: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Thresholds:
    """The config's `fidelity` section (see pathdiv.experiments.config.schema for meanings)."""

    steal_degraded_pct: float = 3.0
    steal_invalid_pct: float = 10.0
    link_rate_degraded: float = 0.9
    link_rate_invalid: float = 0.75
    min_backlogged_s: float = 1.0
    rto_degraded: int = 3
    rto_invalid: int = 20

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> Thresholds:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in section.items() if k in names})


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reasons: list[str]
    figures: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def summary(self) -> str:
        return f"{self.verdict} ({'; '.join(self.reasons)})" if self.reasons else self.verdict


def _worse(a: str, b: str) -> str:
    return a if VERDICTS.index(a) >= VERDICTS.index(b) else b


def _level(value: float, degraded: float, invalid: float, higher_is_worse: bool) -> str:
    if higher_is_worse:
        return INVALID if value >= invalid else DEGRADED if value >= degraded else OK
    return INVALID if value < invalid else DEGRADED if value < degraded else OK


# TcpExt counters of the reordering TCP saw, and Juggler's (patch 0016): the figure's name
# in fidelity.json and the report -> the counter
REORDER_COUNTERS = {
    "ofo_queued": "TCPOFOQueue",  # segments a receiver queued out of order
    "sack_reorder": "TCPSACKReorder",  # reordering a sender detected from SACKs
    "dsack_recv": "TCPDSACKRecv",  # DSACKs a sender got: spurious retransmissions
    "juggler_out_of_order": "JugglerOutOfOrder",  # segments Juggler held beyond a hole
    "juggler_late": "JugglerLate",  # segments that came after Juggler gave their place up
    "juggler_ooo_timeouts": "JugglerOooTimeout",  # holes Juggler gave up
    "juggler_evicted": "JugglerEvicted",  # flows evicted from its table
    "juggler_released": "JugglerReleased",  # segments it held and handed up
    "juggler_held_us": "JugglerHeldUs",  # the time those were held, summed
}


def figures_of(samples: Samples, th: Thresholds) -> dict[str, Any]:
    """The key figures (rounded) the manifest and the report show."""
    cores = samples.cores
    steal = sum(c.steal for c in cores) / len(cores) if cores else None
    judged = [lk for lk in samples.links
              if lk.ratio is not None and lk.backlogged_s >= th.min_backlogged_s]
    worst = min(judged, key=lambda lk: lk.ratio or 0.0) if judged else None
    rtos = sum(samples.rtos.values())
    drops = sum(lk.drops for lk in samples.links)
    return {
        "duration_s": round(samples.duration_s, 3),
        "steal_pct": None if steal is None else round(100 * steal, 2),
        "busiest_core": None if not cores else max(cores, key=lambda c: c.busy).core,
        "busy_max_pct": None if not cores else round(100 * max(c.busy for c in cores), 2),
        # the whole machine's CPU over the traffic phase, in core-seconds: every process
        # (hosts, switches, captures, pathdiv) and the kernel's softirq work; the run's
        # own when it holds the machine (flock -x /tmp/pathdiv-cpu.lock)
        "cpu_busy_core_s": None if not cores
        else round(sum(c.busy for c in cores) * samples.duration_s, 3),
        "cpu_softirq_core_s": None if not cores
        else round(sum(c.softirq for c in cores) * samples.duration_s, 3),
        "softirq_max_pct": None if not cores else round(100 * max(c.softirq for c in cores), 2),
        "links_judged": len(judged),
        "worst_link": None if worst is None else worst.link,
        "worst_link_ratio": None if worst is None or worst.ratio is None
        else round(worst.ratio, 4),
        "qdisc_drops": drops,
        "rtos": rtos,
        "rtos_unexplained": max(0, rtos - drops),
        "backlog_drops": samples.backlog_drops,
        "cpu_wait_pct": None if samples.cpu_wait is None else round(100 * samples.cpu_wait, 2),
        "windows_closed": None if samples.windows_closed is None
        else sum(samples.windows_closed.values()),
        # every host's processes (and the softirq work run in them), the run's own
        "hosts_cpu_s": None if samples.host_cpu_s is None
        else round(sum(samples.host_cpu_s.values()), 4),
        "retrans_segs": sum(samples.retrans.values()),
        "switch_cpu_s": round(sum(samples.switch_cpu_s.values()), 3)
        if samples.switch_cpu_s else None,
        "switch_cpu_cores": round(sum(samples.switch_cpu_s.values()) / samples.duration_s, 3)
        if samples.switch_cpu_s and samples.duration_s > 0 else None,
        "switch_lost_packets": sum(samples.switch_lost.values())
        if samples.switch_lost else None,
        "capture_cpu_s": samples.capture_cpu_s,
        # the reordering the hosts' TCP saw, summed over hosts (None: not counted here)
        **{name: sum(c.get(name, 0) for c in samples.reordering.values())
           if name in samples.reorder_counters else None
           for name in REORDER_COUNTERS},
    }


def planned_disturbance(config: Mapping[str, Any]) -> str | None:
    """Why a run's link rates and timeouts say nothing about the host, if they do not:
    the config itself slows, drops or fails links (events, loss_pct), so a slow queue or
    a burst of timeouts is the experiment, not starvation. None for an ideal network."""
    topo = config.get("topology", {})
    params = [*(topo.get("links") or {}).values(), *(topo.get("link_overrides") or {}).values()]
    events = config.get("events") or []
    causes = []
    if events:
        causes.append(f"{len(events)} link event(s)")
    if any((p or {}).get("loss_pct") for p in params):
        causes.append("loss_pct")
    return " and ".join(causes) or None


def judge(samples: Samples, th: Thresholds, clock: str = "real",
          planned: str | None = None) -> Verdict:
    """The verdict with one reason per check that is not ok (worst decides). With a
    `planned` disturbance (see `planned_disturbance`) only steal and the kernel's input
    backlog are judged; the link-rate and timeout figures are still recorded."""
    if clock not in CLOCKS:
        raise ValueError(f"clock {clock!r}: expected one of {', '.join(CLOCKS)}")
    fig = figures_of(samples, th)
    if clock == "virtual":
        return Verdict(OK, [VIRTUAL_REASON], fig)
    verdict, reasons = OK, []

    def note(level: str, reason: str) -> None:
        nonlocal verdict
        if level != OK:
            verdict = _worse(verdict, level)
            reasons.append(reason)

    if fig["steal_pct"] is not None:
        note(_level(fig["steal_pct"], th.steal_degraded_pct, th.steal_invalid_pct, True),
             f"steal {fig['steal_pct']:.1f} % during traffic")
    if planned:
        reasons.append(f"link rates and timeouts not judged: the config disturbs the "
                       f"network on purpose ({planned})")
    if fig["worst_link_ratio"] is not None and not planned:
        note(_level(fig["worst_link_ratio"], th.link_rate_degraded, th.link_rate_invalid,
                    False),
             f"bottleneck link {fig['worst_link']} at {fig['worst_link_ratio']:.2f} of its "
             "rate while backlogged")
    unexplained = fig["rtos_unexplained"]
    if unexplained and not planned:
        worst_host = max(samples.rtos, key=lambda h: samples.rtos[h])
        note(_level(unexplained, th.rto_degraded, th.rto_invalid, True),
             f"{unexplained} TCP timeout(s) beyond the {fig['qdisc_drops']} queue drop(s) "
             f"(most on {worst_host}: {samples.rtos[worst_host]})")
    if fig["backlog_drops"]:
        note(DEGRADED, f"{fig['backlog_drops']} packet(s) lost in the kernel's input "
                       "backlog (not in an emulated queue)")
    return Verdict(verdict, reasons, fig)


def judge_captures(verdict: str, reasons: list[str], dropped: int,
                   full: list[str]) -> tuple[str, list[str]]:
    """The verdict once the link captures have stopped: a capture that lost packets
    (tcpdump's 'dropped by kernel') or stopped at its packet cap holds fewer packets than
    its link carried, so what the analysis reads from captures (FCT from the server's
    FIN, goodput, utilisation) may miss or misjudge transfers: `degraded`, on either
    clock (the loss is the measurement's, not the emulation's)."""
    reasons = list(reasons)
    if dropped > 0:
        verdict = _worse(verdict, DEGRADED)
        reasons.append(f"the link captures lost {dropped} packet(s) (tcpdump: dropped by "
                       "kernel): metrics read from them may miss transfers")
    if full:
        verdict = _worse(verdict, DEGRADED)
        reasons.append(f"{len(full)} link capture(s) stopped at their packet cap "
                       f"({', '.join(full[:3])}): see capture.budget_mb")
    return verdict, reasons

