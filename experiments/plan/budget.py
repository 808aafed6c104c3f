"""How much a run's captures must hold so no observation is lost (pure).

Every link's capture file is capped by a packet count (`tcpdump -c`), so a run cannot
fill the disk. A cap that is too small silently truncates the capture and the transfers
after it have no metrics. This module sizes the caps from the plan alone:

- a transfer of S payload bytes is ceil(S / MSS) full-size segments; it sends at most
  DATA_PACKETS_PER_SEGMENT times as many data packets (retransmissions; MPTCP also
  sends smaller segments and reinjects on other subflows), each answered by at most
  one ACK (spraying reorders, and a receiver ACKs every out-of-order segment at once),
  plus the handshake, request and teardown packets of each subflow it may open (up to
  twice the configured subflows were seen): `transfer_packets`;
- every packet of a transfer crosses the host pair's hop count of links (both
  directions' packets are captured), so the run writes at most
  sum(transfer packets x hops) x (snaplen + 16) bytes (16: the pcap record header):
  `RunNeed.total_bytes`, what `capture.budget_mb` must cover;
- a link's own file must hold every packet of every transfer that *may* cross it (any
  of the pair's equal-cost paths: ECMP and spraying choose at run time), so the
  per-file caps follow the need of each link (`RunNeed.link_packets`): a client's access
  link in a partition-aggregate round gets the fan-in it carries, a core link only its
  share. The caps add up to more than the budget, but the packets written cannot: each
  packet crosses one path only.

The packet model's constants were measured on captured runs (docs/reproduction.md,
"Capture budget").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from pathdiv.experiments.config.checks import MAX_BUDGET_MB
from pathdiv.experiments.config.load import Config
from pathdiv.experiments.config.workloads import open_loop
from pathdiv.experiments.plan.arrivals import poisson_flows
from pathdiv.experiments.plan.designations import rounds
from pathdiv.experiments.plan.runs import Run
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.model import Link, Tier
from pathdiv.topologies.paths import CLIENT, ParallelPaths

MTU = 1500
IP_TCP_HEADERS = 20 + 20 + 12  # IPv4, TCP, timestamp option
MPTCP_DSS = 20                 # the DSS option every MPTCP data segment carries
RECORD_HEADER = 16             # pcap per-packet record header
FILE_HEADER = 24               # pcap file header
# Data packets per full-size segment, at most. Measured (benchmarks/capture_need.py on
# host-kernel noisy runs, docs/reproduction.md): up to 1.30 for TCP (query flows, 29%
# retransmitted) and 1.82 for MPTCP with 4 subflows (short flows: 640 data packets for
# 351 full segments); the constants leave room above both.
DATA_PACKETS_PER_SEGMENT = {"tcp": 1.5, "mptcp": 2.5}
ACKS_PER_DATA_PACKET = 1.0     # pure ACKs per data packet, at most
PACKETS_PER_SUBFLOW = 16       # SYN/SYN-ACK/ACK, request, FINs and their ACKs, slack
SUBFLOWS_OPENED = 2            # subflows opened per configured subflow, at most
MIN_FILE_PACKETS = 1000        # a file never gets less (pings, stray ACKs)
MB = 1_000_000
DISK_MARGIN_MB = 100           # a run's other files beside its captures (manifest, logs)


def mss(transport: str) -> int:
    """Payload bytes per full segment on a 1500-byte MTU."""
    return MTU - IP_TCP_HEADERS - (MPTCP_DSS if transport == "mptcp" else 0)


def transfer_packets(size_bytes: int, transport: str, subflows: int) -> int:
    """Packets of one transfer (both directions) that one link on its path may see."""
    segments = math.ceil(size_bytes / mss(transport))
    data = math.ceil(segments * DATA_PACKETS_PER_SEGMENT.get(transport, 2.5))
    opened = subflows * (SUBFLOWS_OPENED if transport == "mptcp" else 1)
    return data + math.ceil(data * ACKS_PER_DATA_PACKET) + PACKETS_PER_SUBFLOW * opened


def packet_bytes(snaplen: int) -> int:
    """Bytes one captured packet takes in a pcap file at most."""
    return snaplen + RECORD_HEADER


@dataclass(frozen=True)
class RunNeed:
    """What one run's captures must hold."""

    link_packets: dict[str, int]  # capture interface -> packets that may cross its link
    total_packets: int            # packets x hops, summed over transfers: what is written
    snaplen: int

    @property
    def total_bytes(self) -> int:
        files = len(self.link_packets) * FILE_HEADER
        return self.total_packets * packet_bytes(self.snaplen) + files

    @property
    def total_mb(self) -> float:
        return self.total_bytes / MB

    def caps(self, budget_mb: float) -> dict[str, int]:
        """Per-file packet caps: each link's need, scaled up by the slack of the budget."""
        slack = max(1.0, budget_mb * MB / self.total_bytes) if self.total_bytes else 1.0
        return {intf: max(MIN_FILE_PACKETS, math.ceil(n * slack))
                for intf, n in self.link_packets.items()}


def captured_links(topo: FatTree, which: str) -> list[Link]:
    """The links `capture.links: which` captures (all, or the hosts' access links)."""
    return [lk for lk in topo.links if which == "all" or lk.tier is Tier.HOST]


# run_need of (config object, flow type, seed): `check` asks for the plan's largest, its
# total and the budget's shortfall, three times per run; the config is kept beside its
# answer, so its id cannot be reused while the entry lives
_NEEDS: dict[tuple[int, str, int], tuple[Config, RunNeed]] = {}
NEEDS_KEPT = 4096


def run_need(cfg: Config, flow_type: str, seed: int) -> RunNeed:
    """The capture need of one run of `cfg` (its flow type, its designation seed)."""
    key = (id(cfg), flow_type, seed)
    if key not in _NEEDS:
        if len(_NEEDS) >= NEEDS_KEPT:
            _NEEDS.clear()
        _NEEDS[key] = (cfg, _run_need(cfg, flow_type, seed))
    return _NEEDS[key][1]


def _run_need(cfg: Config, flow_type: str, seed: int) -> RunNeed:
    topo = cfg.topology()
    if isinstance(topo, ParallelPaths):
        # one fetch by h1, captured on each of its interfaces (a subflow per path)
        packets = transfer_packets(cfg.flow_sizes()[flow_type], cfg.transport, topo.count)
        client_intfs = [f"{CLIENT}-eth{i - 1}" for i in topo.path_numbers]
        return RunNeed({intf: packets for intf in client_intfs}, packets,
                       int(cfg.data["capture"]["snaplen"]))
    # a link may carry a transfer iff its subtree holds exactly one of the transfer's two
    # hosts (FatTree.subtree): so each (pair, size) adds its packets to the two subtrees it
    # leaves at each tier it climbs, and each captured link reads its subtree's sum. The
    # cost grows with the transfers plus the links, not with transfers x paths.
    captured = captured_links(topo, cfg.captured_links)
    tiers = {link.tier for link in captured}
    leaving: dict[Tier, Counter[tuple[int, ...]]] = {t: Counter() for t in tiers}
    total = 0
    for (client, server, size), count in Counter(transfers(cfg, flow_type, seed)).items():
        packets = transfer_packets(size, cfg.transport, cfg.subflows) * count
        for tier in topo.tiers_crossed(client, server):
            if tier in tiers:  # up through one link of the tier, down through another
                leaving[tier][topo.subtree(client, tier)] += packets
                leaving[tier][topo.subtree(server, tier)] += packets
                total += 2 * packets
    links = {link.b.intf: leaving[link.tier][topo.subtree(link.a.node, link.tier)]
             for link in captured}
    return RunNeed(links, total, int(cfg.data["capture"]["snaplen"]))


def transfers(cfg: Config, flow_type: str, seed: int) -> list[tuple[str, str, int]]:
    """(client, server, payload bytes) of every measured transfer of a run: the rounds of
    a closed-loop pattern, or the arrivals of an open-loop one (drawn from the same seed as
    the run draws them, so the need is the run's, not an average)."""
    w = cfg.data["workload"]
    hosts = cfg.topology().hosts
    if open_loop(w["pattern"]):
        return [(f.client, f.server, f.size_bytes) for f in poisson_flows(cfg, hosts, seed)]
    size = cfg.flow_sizes()[flow_type]
    return [(request.client, server, size)
            for rnd in rounds(str(w["pattern"]), hosts, seed, int(w["iterations"]),
                              int(w["requests"]))
            for request in rnd for server in request.servers]


def budget_of(cfg: Config, need: RunNeed) -> float:
    """capture.budget_mb resolved: `auto` is the run's need."""
    value = cfg.data["capture"]["budget_mb"]
    return need.total_mb if value == "auto" else float(value)


def plan_need_mb(runs: Iterable[Run]) -> tuple[float, str]:
    """The largest capture need of any run in MB, and that run's id."""
    worst, which = 0.0, ""
    for run in runs:
        if not run.config.data["capture"]["enabled"]:
            continue
        mb = run_need(run.config, run.flow_type, run.workload_seed).total_mb
        if mb > worst:
            worst, which = mb, run.run_id
    return worst, which


def plan_total_mb(runs: Iterable[Run]) -> float:
    """What the captures of all `runs` may write together, at most (MB)."""
    return sum(run_need(run.config, run.flow_type, run.workload_seed).total_mb
               for run in runs if run.config.data["capture"]["enabled"])


def disk_shortfall(budget_mb: float, free_mb: float, where: str) -> str | None:
    """Why a run whose captures may write `budget_mb` must not start with `free_mb` free
    under `where` (None when they fit, with DISK_MARGIN_MB to spare)."""
    if free_mb >= budget_mb + DISK_MARGIN_MB:
        return None
    return (f"disk: {free_mb:.0f} MB free under {where}, and this run's captures may write "
            f"up to {budget_mb:.0f} MB (capture.budget_mb), plus {DISK_MARGIN_MB} MB for its "
            "other files: free some space, lower capture.snaplen or set capture.enabled: "
            "false. Nothing of this run was started; `pathdiv run CONFIG --out DIR` goes on "
            "from it")


def _access_hint(run: Run) -> str:
    """'set capture.links: access (N MB), ' when capturing the hosts' links alone would fit
    MAX_BUDGET_MB where every link does not (a bigger fat tree's core carries the most)."""
    if run.config.data["capture"]["links"] == "access":
        return ""
    cfg = run.config.with_overrides([("capture.links", "access")])
    mb = run_need(cfg, run.flow_type, run.workload_seed).total_mb
    if mb > MAX_BUDGET_MB:
        return ""
    return f"set capture.links: access (the hosts' links alone: {math.ceil(mb)} MB), "


def budget_problems(runs: Iterable[Run]) -> list[str]:
    """The runs whose fixed capture.budget_mb cannot hold their captures, in one line
    naming the key, its value and the size needed (empty when every run fits)."""
    short: list[tuple[float, str, int, object]] = []
    for run in runs:
        capture = run.config.data["capture"]
        if not capture["enabled"]:
            continue
        need = run_need(run.config, run.flow_type, run.workload_seed)
        if need.total_mb > MAX_BUDGET_MB:
            return [f"capture.budget_mb: the captures of run {run.run_id} would need "
                    f"{math.ceil(need.total_mb)} MB; at most {MAX_BUDGET_MB} MB per run fit "
                    "a machine's disk: make the flows smaller or fewer (workload.flow_types, "
                    "iterations, requests), lower capture.snaplen, "
                    f"{_access_hint(run)}or set capture.enabled: false"]
        if capture["budget_mb"] == "auto":
            continue
        if float(capture["budget_mb"]) < need.total_mb:
            short.append((need.total_mb, run.run_id, need.snaplen, capture["budget_mb"]))
    if not short:
        return []
    mb, run_id, snaplen, value = max(short)
    return [f"capture.budget_mb: {value} is too small: the captures of {len(short)} run(s) "
            f"would be cut off and their observations lost (the largest, {run_id}, needs "
            f"{math.ceil(mb)} MB at snaplen {snaplen}); set capture.budget_mb to at least "
            f"{math.ceil(mb)}, or to auto"]
