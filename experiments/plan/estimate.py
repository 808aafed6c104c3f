"""Expected wall time of runs and plans, and the ETA while a plan runs (pure).

A run's wall time on this machine is modelled as a fixed part and a traffic part:

    fixed   = fixed_s x (NODE_SHARE x nodes / 36 + (1 - NODE_SHARE) x links / 48)
              + per_round_s x rounds  [+ per_switch_s x switches, on a plane's build]
    traffic = per_mb_s x payload MB + per_link_mb_s x link-MB
              + per_sim_s x simulated traffic seconds
              [+ per_switch_mb_s x switch-MB, on the virtual clock]

`fixed_s` is the per-run cost at k=4 (36 nodes, 48 links: build, reachability check,
capture start and drain, teardown), `per_round_s` starting a round's transfer
processes. Most of the fixed cost grows with the nodes (node shells, their set-up
scripts) and a share with the links (veths, their shaping, a capture each, the
reachability check's echoes, which grow with the links since it stopped pinging every
host pair): docs/benchmarks.md, "Bigger fat trees", measures it at k = 4, 8 and 16.
The traffic part depends on the clock. On the real clock (this
machine's kernel, or the lab kernel with lab.clock: real) traffic takes its simulated
time: the rounds' busiest-client bytes over the slowest link rate times the fraction a
transfer reaches (`Work.sim_s`, `Rate.rate_fraction`). On the lab kernel's virtual clock
CPU work takes no guest time and the wall time follows the packets, whatever the link
rate: every packet is forwarded, shaped and captured on each link of its path, so the
traffic costs per MB carried over one link (`Work.link_mb`: each transfer's payload times
the links on its path, switches + 1). Per MB of payload alone, as until 2026-11-28, a
permutation (every host at once, most pairs across the core: 5.5 links a transfer) or the
long flows of the study001 plans cost 3-6 times what the estimate said.

A parallel-paths run (seed 003's testbed) is one measured fetch beside the paths'
background downloads, whatever the workload pattern says (`paths_work`).

The rates are the nftables plane's. Another data plane adds what its registry entry says
it pays (`config/planes.py`, `PlaneCost`): per switch of a run that builds its network
(every run, on a plane whose networks are not reused), and per MB of payload through one
switch (`Work.switch_mb`: each transfer's payload times the switches on its path), which
on the virtual clock is wall time. A single factor per plane cannot do this: on the lab
kernel bmv2 costs 11x the nftables plane on the probe (mostly build) and 64x on a long
run (mostly packets).

`DEFAULT_RATES` are documented figures of the 2-core reference VM (docs/benchmarks.md,
"Run time estimates"). `calibrate` fits, per kernel x clock x data plane, two scales
(one for the fixed part, one for the traffic part) to the wall times of runs recorded on
this machine (`pathdiv.experiments.plan.history`), so the estimate follows the machine
and the code as they are now; `calibrate_configs` fits the same per config where it has
enough recent runs, since the model leaves out what sets configs apart. Where nothing is
recorded the defaults stand, and every estimate says which source it used.

One calibration sets the pace of a run on every plane of its kernel and clock
(`Estimator.pace`): the config's own on the nftables plane, else the config's own on the
run's plane, else the kernel and clock's on the nftables plane, else on the run's plane.
A run on another plane than the calibration's costs that estimate times its per-run
ratio by the model (the planes' registry costs, measured side by side: what `dataplane:
auto` judges and `check` states). Each plane calibrated on its own records would set
one plane's runs recorded on a busy machine against another's on an idle one (`check`
once put noisy at 23 min on p4-ebpf and 36 min on nftables while stating p4-ebpf costs
1.1x nftables per run).

`PlanClock` turns the estimate into an ETA: the runs left in each lane (runs executed
one after another: one lab kernel, or this machine's kernel), lanes of a phase at once
(`pathdiv.experiments.plan.lanes`), scaled by how the finished runs compared with their
estimate, weighed against the prior so the first run (which carries the boot) does not
swing it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pathdiv.experiments.config.load import Config
from pathdiv.experiments.config.planes import BASELINE, PlaneCost, UnknownPlane, lookup
from pathdiv.experiments.config.workloads import PATTERNS, open_loop
from pathdiv.experiments.plan.lanes import boots
from pathdiv.experiments.plan.runs import Run
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.paths import ParallelPaths

UNSHAPED_MBPS = 1000.0
REFERENCE_NODES = 36  # k=4: 20 switches + 16 hosts, what fixed_s is measured at
REFERENCE_LINKS = 48  # k=4's links
NODE_SHARE = 0.95

Key = tuple[str, str, str]  # (hosts.kernel, clock, data plane)
# switches a transfer crosses in a fat tree: hosts under one edge, one pod, two pods
SWITCHES_ON_PATH = (1, 3, 5)


@dataclass(frozen=True)
class Rate:
    """Wall-time costs of one kernel x clock on the nftables plane."""

    fixed_s: float       # per run at k=4, scaled by nodes / REFERENCE_NODES
    per_round_s: float   # per round of transfers
    per_mb_s: float      # per MB of payload
    per_sim_s: float     # per simulated second of traffic (the real clock: 1 / fraction)
    rate_fraction: float = 1.0  # goodput / configured link rate of one transfer
    build_s: float = 0.0  # more, at k=4, for a run that builds its network (not reused)
    per_link_mb_s: float = 0.0  # per MB over one link (the virtual clock: packets cost CPU)


# Lab kernel, virtual clock: fitted to the 590 runs of 20 plans recorded on this 2-core
# machine with the code of 2026-11-28/29 (noisy, silent, study001, table4, permutation
# at k=4 and k=8; docs/benchmarks.md, "Estimate against measured wall time": the factor
# from every plan's sum of wall_s, the smallest worst factor over the plans). A run that
# reuses its network costs 7.8 s x size besides its traffic, one with a boot of its own
# (transfers above lab.own_boot_above_kb) BOOT_S + 17.2 s x size more (its own build and
# reachability check), and 0.0143 s per MB over one link. Those plans ran while other
# sessions shared the 2 cores (load 2-8): plans of the same work differ up to 2.1x from
# one another with the load, which is why no model of the config alone gets every plan
# within 1.5x. (Before: 3.4 s, 4.1 s and 0.02 s per MB of payload, from an idle machine
# and query and noisy runs whose transfers cross few links; 26 s and 0.1 s per MB before
# the cuts of 2026-11-26.) The real-clock figures are benchmarks/run_timing.py's.
DEFAULT_RATES: dict[tuple[str, str], Rate] = {
    ("host", "real"): Rate(fixed_s=10.5, per_round_s=1.0, per_mb_s=0.0,
                           per_sim_s=1.0, rate_fraction=0.95, build_s=4.5),
    ("lab", "real"): Rate(fixed_s=54.0, per_round_s=2.0, per_mb_s=0.0,
                          per_sim_s=1.0, rate_fraction=0.4, build_s=16.0),
    ("lab", "virtual"): Rate(fixed_s=7.8, per_round_s=0.0, per_mb_s=0.0, per_sim_s=0.0,
                             build_s=17.2, per_link_mb_s=0.0143),
}
# the background downloads of a parallel-paths run start this long before the measured
# one (experiments/traffic/paths_run.py, BACKGROUND_WARMUP_S: the traffic layer sits
# after the plan, so the figure is stated here and a test holds the two equal)
BACKGROUND_LEAD_S = 2.0
BOOT_S = 3.0  # one boot of the lab kernel to its runner (docs/benchmarks.md: 2.8-3.0 s)

def plane_of(name: str | None) -> str:
    """The registry name of a plane (an older name resolved; None: the nftables plane)."""
    try:
        return lookup(name or BASELINE).name
    except UnknownPlane:
        return name or BASELINE


def clock_of(cfg: Config) -> str:
    """The clock a run's traffic runs on: lab.clock in the lab kernel, else real."""
    return str(cfg.data["lab"]["clock"]) if cfg.host_kernel == "lab" else "real"


def key_of(run: Run, plane: str | None = None) -> Key:
    return (run.config.host_kernel, clock_of(run.config), plane_of(plane))


def rate_of(key: Key) -> Rate:
    return DEFAULT_RATES.get((key[0], key[1]), DEFAULT_RATES[("host", "real")])


def bottleneck_mbps(cfg: Config) -> float:
    """The slowest configured link tier in Mbit/s (unshaped tiers count as UNSHAPED_MBPS)."""
    rates = [p.bw_mbps if p.bw_mbps is not None else UNSHAPED_MBPS
             for p in cfg.link_params().values()]
    return min(rates) if rates else UNSHAPED_MBPS


@dataclass(frozen=True)
class Work:
    """What a run asks of the machine, from its configuration alone."""

    nodes: int          # switches + hosts
    rounds: int         # rounds of transfers
    payload_mb: float   # every transfer's payload, in MB (10^6 bytes)
    sim_s: float        # simulated seconds of traffic at the link rate (fraction 1)
    hosts: int = 16
    switches: int = 0   # switches of the data plane (none between parallel paths' routers)
    switch_mb: float = 0.0  # each transfer's payload MB times the switches on its path

    @property
    def links(self) -> int:
        """A fat tree's links: 3 per host (host-edge, edge-aggregation, aggregation-core)."""
        return 3 * self.hosts

    @property
    def link_mb(self) -> float:
        """Each transfer's payload MB times the links on its path (its switches + 1)."""
        return self.payload_mb + self.switch_mb

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "hosts": self.hosts, "rounds": self.rounds,
                "payload_mb": round(self.payload_mb, 3), "sim_s": round(self.sim_s, 3),
                "switches": self.switches, "switch_mb": round(self.switch_mb, 3)}


def run_work(cfg: Config, flow_type: str, seed: int) -> Work:
    """The nodes, rounds, payload and simulated traffic time of one run."""
    w = cfg.data["workload"]
    topo = cfg.topology()
    if isinstance(topo, ParallelPaths):
        return paths_work(topo, cfg.flow_sizes()[flow_type], float(w["timeout_s"]),
                          float(w.get("measure_s") or 0))
    nodes = len(topo.switches) + len(topo.hosts)
    switches = len(topo.switches) if isinstance(topo, FatTree) else 0
    size = cfg.flow_sizes()[flow_type]
    bps = bottleneck_mbps(cfg) * 1e6
    timeout = float(w["timeout_s"])
    if open_loop(w["pattern"]):  # the arrival window at the offered load, then a drain
        seconds = float(w["duration_s"])
        mb = float(w.get("load", 0.5)) * bps * seconds * len(topo.hosts) / 8 / 1e6
        hops = mean_switches(topo) if isinstance(topo, FatTree) else 0.0
        return Work(nodes, 1, mb, seconds + min(timeout, 2.0), len(topo.hosts), switches,
                    mb * hops)
    # in closed form from the pattern's registry entry: every round of a pattern has the
    # same busiest fan-in, so nothing is drawn (a plan's designations may be millions)
    pattern, n = PATTERNS[str(w["pattern"])], len(topo.hosts)
    repeats = int(w["iterations"]) * int(w["requests"])
    count = repeats * pattern.rounds(n)
    sim = count * min(pattern.busiest(n) * size * 8 / bps, timeout)
    transfers = repeats * pattern.transfers(n)
    mb = transfers * size / 1e6
    # the switches a transfer crosses, as for a host pair drawn at random: a pattern's
    # pairs are drawn from the seed, so its mean is that of all pairs
    hops = mean_switches(topo) if isinstance(topo, FatTree) else 0.0
    return Work(nodes, count, mb, sim, n, switches, mb * hops)


def paths_work(topo: ParallelPaths, size: int, timeout_s: float, measure_s: float) -> Work:
    """One measured connection over parallel paths, with their background downloads.

    The run is one transfer, not the workload pattern's rounds among the background
    hosts. Its traffic lasts the background's head start and then `measure_s` (the fetch
    is cut there), else until the measured flow has its bytes: at most its fair share of
    each bottleneck beside that path's background flows, and never past the timeout.
    While it lasts the background (or the MPTCP connection itself) keeps every
    bottleneck full, so the packets that cost wall time on the virtual clock are the
    paths' rates over that time, each crossing two routers (three links)."""
    rates = [(spec.params.bw_mbps or UNSHAPED_MBPS) * 1e6 for spec in topo.specs]
    share = sum(r / (1 + spec.background_flows) for r, spec in zip(rates, topo.specs, strict=True))
    fetch = measure_s if measure_s > 0 else min(timeout_s, size * 8 / share)
    lead = BACKGROUND_LEAD_S if topo.background_pairs() else 0.0
    seconds = lead + fetch
    carried_mb = sum(rates) * seconds / 8 / 1e6
    routers = 2
    return Work(len(topo.nodes), 1, carried_mb, seconds, len(topo.hosts), 0,
                carried_mb * routers)


def mean_switches(topo: FatTree) -> float:
    """Switches on the shortest path of a host pair drawn at random from a fat tree, in
    closed form: of the other hosts, k/2 - 1 share the edge switch (1 switch),
    k^2/4 - k/2 the pod (3 switches: edge, aggregation, edge), the rest cross a core (5)."""
    k = topo.k
    others = k ** 3 // 4 - 1
    if others <= 0:
        return 0.0
    same_edge = k // 2 - 1
    same_pod = k * k // 4 - k // 2
    rest = others - same_edge - same_pod
    return (SWITCHES_ON_PATH[0] * same_edge + SWITCHES_ON_PATH[1] * same_pod
            + SWITCHES_ON_PATH[2] * rest) / others


def reuses(cfg: Config, plane: str | None = None) -> bool:
    """Whether runs of `cfg` after the first of a lane use the network the run before
    built (network.reuse on a plane whose entry says its networks can be reused:
    experiments/execute/keeper.py). A plan whose factors change the topology builds more
    often than this assumes."""
    return bool(cfg.data.get("network", {}).get("reuse", False)) and \
        _reusable(plane_of(plane))


def _reusable(plane: str) -> bool:
    try:
        return lookup(plane).reusable
    except UnknownPlane:
        return False


def parts(work: Work, key: Key, builds: bool = True) -> tuple[float, float]:
    """(fixed, traffic) seconds of a run of `work` by the default rates of `key`;
    `builds`: the run builds its network (else it reuses the one before, reset)."""
    rate = rate_of(key)
    size = (NODE_SHARE * work.nodes / REFERENCE_NODES
            + (1 - NODE_SHARE) * work.links / REFERENCE_LINKS)
    fixed = (rate.fixed_s + (rate.build_s if builds else 0.0)) * size \
        + rate.per_round_s * work.rounds
    traffic = (rate.per_mb_s * work.payload_mb + rate.per_link_mb_s * work.link_mb
               + rate.per_sim_s * work.sim_s / rate.rate_fraction)
    extra = plane_cost(key)
    if builds:
        fixed += extra.per_switch_s * work.switches
    if key[1] == "virtual":
        traffic += extra.per_switch_mb_s * work.switch_mb
    return fixed, traffic


def plane_cost(key: Key) -> PlaneCost:
    """What the key's plane pays beyond the nftables plane on its kernel (none if unknown)."""
    try:
        return lookup(key[2]).cost(key[0])
    except UnknownPlane:
        return PlaneCost()


@dataclass(frozen=True)
class Fit:
    """Scales of the default fixed and traffic parts that match recorded runs of a key."""

    fixed_scale: float
    traffic_scale: float
    runs: int

    def apply(self, fixed: float, traffic: float) -> float:
        return self.fixed_scale * fixed + self.traffic_scale * traffic


SCALE_BOUNDS = (0.05, 20.0)  # a fit outside them is a broken record, not a machine


def _bounded(x: float) -> float:
    return min(max(x, SCALE_BOUNDS[0]), SCALE_BOUNDS[1])


def fit_scales(samples: Sequence[tuple[float, float, float]]) -> Fit:
    """Least squares of wall ~ a x fixed + b x traffic over (fixed, traffic, wall)
    samples, a and b >= 0. When the traffic parts do not vary apart from the fixed parts
    (every run alike, or traffic negligible), one scale for both."""
    n = len(samples)
    sff = sum(f * f for f, _, _ in samples)
    stt = sum(t * t for _, t, _ in samples)
    sft = sum(f * t for f, t, _ in samples)
    sfw = sum(f * w for f, _, w in samples)
    stw = sum(t * w for _, t, w in samples)
    det = sff * stt - sft * sft
    total = sum(f + t for f, t, _ in samples)
    one = sum(w for _, _, w in samples) / total if total > 0 else 1.0
    if n < 3 or sff <= 0 or stt <= 0 or det <= 1e-6 * sff * stt:
        return Fit(_bounded(one), _bounded(one), n)
    a = (sfw * stt - stw * sft) / det
    b = (stw * sff - sfw * sft) / det
    if a <= 0 or b <= 0:  # one part explains nothing: scale the whole instead
        return Fit(_bounded(one), _bounded(one), n)
    return Fit(_bounded(a), _bounded(b), n)


def record_key(rec: dict[str, Any]) -> Key | None:
    try:
        return (str(rec["kernel"]), str(rec["clock"]), plane_of(rec.get("plane")))
    except KeyError:
        return None


def record_work(rec: dict[str, Any]) -> Work | None:
    try:
        hosts = int(rec.get("hosts") or int(rec.get("k", 4)) ** 3 // 4)
        k = int(rec.get("k", 4))
        # older records: a k-ary fat tree's switches, and its mean path (noisy and silent
        # plans cross about 4 switches per transfer)
        switches = int(rec.get("switches", 5 * k * k // 4))
        payload = float(rec["payload_mb"])
        return Work(int(rec["nodes"]), int(rec["rounds"]), payload, float(rec["sim_s"]), hosts,
                    switches, float(rec.get("switch_mb", payload * OLD_RECORD_SWITCHES)))
    except (KeyError, TypeError, ValueError):
        return None


OLD_RECORD_SWITCHES = 4.0
RECENT_RUNS = 60  # per key: the machine and the code change, so only the newest count
# A config's own fit: from its runs among the newest CONFIG_WINDOW of its key, when there
# are at least MIN_CONFIG_RUNS. The model leaves out what sets one config apart from
# another (its topology kind, its captures, its transfer tools), and the newest 60 runs
# of a key may all be another config's: on this machine's history (benchmarks/eta_replay.py)
# the noisy plan after 32 runs of study001-control-silent-qs was estimated at 2.7x its time.
CONFIG_WINDOW = 200
MIN_CONFIG_RUNS = 10


def calibrate(records: Iterable[dict[str, Any]], recent: int = RECENT_RUNS) -> dict[Key, Fit]:
    """A Fit per kernel x clock x plane from recorded runs (oldest first): the newest
    `recent` complete runs of each key with a positive wall time."""
    by_key: dict[Key, list[tuple[float, float, float]]] = {}
    for rec in records:
        key, work = record_key(rec), record_work(rec)
        wall = rec.get("wall_s")
        if key is None or work is None or not isinstance(wall, (int, float)) \
                or not math.isfinite(wall) or wall <= 0:
            continue
        fixed, traffic = parts(work, key, bool(rec.get("built", True)))
        by_key.setdefault(key, []).append((fixed, traffic, float(wall)))
    return {key: fit_scales(samples[-recent:]) for key, samples in by_key.items()}


ConfigKey = tuple[Key, str]  # (kernel x clock x plane, config name)


def calibrate_configs(records: Iterable[dict[str, Any]], window: int = CONFIG_WINDOW,
                      min_runs: int = MIN_CONFIG_RUNS) -> dict[ConfigKey, Fit]:
    """A Fit per key and config name, from the config's runs among the newest `window`
    of its key (oldest first), where it has at least `min_runs`."""
    by_key: dict[Key, list[dict[str, Any]]] = {}
    for rec in records:
        key = record_key(rec)
        if key is not None:
            by_key.setdefault(key, []).append(rec)
    out: dict[ConfigKey, Fit] = {}
    for key, recs in by_key.items():
        by_config: dict[str, list[dict[str, Any]]] = {}
        for rec in recs[-window:]:
            if rec.get("config"):
                by_config.setdefault(str(rec["config"]), []).append(rec)
        for name, mine in by_config.items():
            fit = calibrate(mine).get(key)
            if fit is not None and fit.runs >= min_runs:
                out[(key, name)] = fit
    return out


@dataclass
class Estimator:
    """Expected wall seconds of runs: defaults, scaled per key where history exists."""

    fits: dict[Key, Fit] = field(default_factory=dict)
    history: str = ""  # where the records came from (a path), '' for none
    config_fits: dict[ConfigKey, Fit] = field(default_factory=dict)

    @classmethod
    def from_records(cls, records: Sequence[dict[str, Any]], history: str = "") -> Estimator:
        """Calibrated on `records` (oldest first): per key, and per key and config."""
        return cls(calibrate(records), history, calibrate_configs(records))

    def pace(self, key: Key, config: str | None = None) -> tuple[Key, Fit, bool] | None:
        """The one calibration estimates on `key` (of the config named `config`) use, the
        same for every plane of the key's kernel and clock: (the key it was fitted on,
        the fit, whether it is the config's own); the config's own on the nftables plane,
        else on the plane where it has most runs, else the kernel and clock's on the
        nftables plane, else on the plane with most runs; None when nothing is recorded
        (module docstring)."""
        base = (key[0], key[1], BASELINE)
        name = config or ""

        def best(fits: dict[Key, Fit]) -> tuple[Key, Fit] | None:
            alike = {k: f for k, f in fits.items() if k[:2] == key[:2]}
            if base in alike:
                return base, alike[base]
            return min(alike.items(), key=lambda kf: (-kf[1].runs, kf[0]), default=None)

        mine = best({k: f for (k, n), f in self.config_fits.items() if n == name})
        if mine is not None:
            return mine[0], mine[1], True
        found = best(self.fits)
        return (found[0], found[1], False) if found is not None else None

    def run_s(self, run: Run, plane: str | None = None) -> float:
        """A run's expected wall seconds; with network reuse, as one that reuses the
        network (a boot's first run builds it: `boot_of`)."""
        work = run_work(run.config, run.flow_type, run.workload_seed)
        key = key_of(run, plane)
        found = self.pace(key, run.config.name)
        builds_on = not reuses(run.config, found[0][2]) if found else True
        return round(self._expected(work, key, not reuses(run.config, plane),
                                    run.config.name, builds_on), 3)

    def record_s(self, rec: dict[str, Any]) -> float | None:
        """The expected wall seconds of a recorded run (history line), as `run_s` would
        have said; None for a broken record."""
        key, work = record_key(rec), record_work(rec)
        if key is None or work is None:
            return None
        built = bool(rec.get("built", True))
        return self._expected(work, key, built, str(rec.get("config") or ""), built)

    def _expected(self, work: Work, key: Key, builds: bool, config: str,
                  builds_on: bool) -> float:
        """`work` on `key`: the pace's fit on the model of the plane it was fitted on,
        times the model's ratio of `key` to that plane (`builds_on`: whether the run
        would build its network there)."""
        found = self.pace(key, config)
        if found is None:
            return sum(parts(work, key, builds))
        on, fit, _ = found
        paced = fit.apply(*parts(work, on, builds_on))
        if on == key:
            return paced
        model = sum(parts(work, on, builds_on))
        return paced * sum(parts(work, key, builds)) / model if model > 0 else paced

    def source(self, keys: Iterable[Key], config: str | None = None) -> str:
        """Which calibration estimates of `keys` (of the config named `config`) use, and
        how the planes it was not fitted on follow it, in words."""
        used = sorted(set(keys))
        paces = {k: p for k in used if (p := self.pace(k, config)) is not None}
        texts = []
        for on in sorted({p[0] for p in paces.values()}):
            mates = [k for k in used if k in paces and paces[k][0] == on]
            _, fit, mine = paces[mates[0]]
            text = f"{fit.runs} run(s){f' of {config}' if mine else ''}"
            if mates != [on]:
                text += f" on the {on[2]} plane"
            text += " recorded on this machine"
            others = [k[2] for k in mates if k != on]
            if others:
                text += (f"; {', '.join(others)} from it by each run's cost ratio to the "
                         f"{on[2]} plane (the planes' costs, as auto judges them)")
            texts.append(text)
        rest = [k for k in used if k not in paces]
        if not texts:
            names = ", ".join("/".join(k) for k in used)
            return (f"default costs (docs/benchmarks.md): no {names} run recorded on this "
                    "machine yet")
        if rest:
            texts.append(f"default costs for {', '.join('/'.join(k) for k in rest)}")
        return "; ".join(texts)

    def short_source(self, keys: Iterable[Key], config: str | None = None) -> str:
        found = {(p[0], p[2]): p[1] for k in set(keys)
                 if (p := self.pace(k, config)) is not None}
        n = sum(f.runs for f in found.values())
        return f"from {n} recorded runs" if n else "from default costs"


DEFAULT_ESTIMATOR = Estimator()


def expected_run_s(run: Run, plane: str | None = None) -> float:
    """Expected seconds of `run` by the default costs alone (the same on every machine,
    so shards split a plan alike everywhere), on the data plane named `plane` (None:
    the nftables plane)."""
    return DEFAULT_ESTIMATOR.run_s(run, plane)


def format_duration(seconds: float) -> str:
    """'45 s', '12 min', '2 h 05 min'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60:02d} min"


# ---- a plan's wall time ----------------------------------------------------------------
Phases = list[list[list[Run]]]  # phases one after another; lanes of a phase at once


def phases_s(phases: Phases, cost: Callable[[Run], float], boot_s: Callable[[Run], float]
             ) -> float:
    """Wall seconds of `phases`: per phase its slowest lane (its boots included)."""
    total = 0.0
    for lanes in phases:
        total += max((sum(cost(r) for r in lane) + sum(boot_s(b[0]) for b in boots(lane))
                      for lane in lanes), default=0.0)
    return total


def boot_of(run: Run, plane: str | None = None) -> float:
    """What a boot starting with `run` on `plane` pays once: the lab kernel's boot, and
    with network reuse the first build (by the default rates: a run's own estimate leaves
    it out; on a plane whose networks are not reused every run's estimate has it)."""
    boot = BOOT_S if run.config.host_kernel == "lab" else 0.0
    if not reuses(run.config, plane):
        return boot
    work = run_work(run.config, run.flow_type, run.workload_seed)
    key = key_of(run, plane)
    return boot + parts(work, key, True)[0] - parts(work, key, False)[0]


# ---- the ETA ---------------------------------------------------------------------------
PRIOR_RUNS = 3.0  # how many runs' worth of expectation the observed pace is weighed against


class PlanClock:
    """An honest ETA for a plan from its first second: the expected time of the runs
    left (`Estimator.run_s`), lane by lane, phases one after another, each phase as long
    as its slowest lane, less the time the run now in a lane has already spent; scaled by
    how long the finished runs took against their expectation, weighed against
    PRIOR_RUNS runs' worth of the estimate. Counting runs would say "2 minutes" for ten
    long runs behind twenty short ones."""

    def __init__(self, phases: Phases, expected: dict[str, float], source: str = "",
                 boot: Callable[[Run], float] = lambda run: 0.0) -> None:
        self.expected = expected
        self.source = source
        self.lanes: list[list[list[str]]] = [[[r.run_id for r in lane] for lane in ph]
                                             for ph in phases]
        self.boot = {b[0].run_id: boot(b[0]) for ph in phases for lane in ph
                     for b in boots(lane)}
        self.left = {r for ph in self.lanes for lane in ph for r in lane}
        self.since: dict[str, float] = {}  # run id -> when it started (monotonic seconds)
        self.spent_s = 0.0     # wall time of the complete runs measured so far
        self.planned_s = 0.0   # what they were expected to take
        runs = [self.expected[r] for r in self.left]
        self.prior_s = PRIOR_RUNS * (sum(runs) / len(runs)) if runs else 0.0

    def started(self, run_id: str, now: float) -> None:
        self.since[run_id] = now

    def finished(self, run_id: str, wall_s: float | None) -> None:
        """`run_id` ended; `wall_s` is its measured time (None: not a complete run)."""
        if run_id not in self.left:
            return
        self.left.discard(run_id)
        self.since.pop(run_id, None)
        if wall_s is not None and wall_s > 0:
            self.spent_s += wall_s
            self.planned_s += self.expected[run_id] + self.boot.get(run_id, 0.0)

    def scale(self) -> float:
        if not self.planned_s:
            return 1.0
        return (self.spent_s + self.prior_s) / (self.planned_s + self.prior_s)

    def remaining_s(self, now: float | None = None) -> float:
        scale = self.scale()
        total = 0.0
        for lanes in self.lanes:
            slowest = 0.0
            for lane in lanes:
                left = [r for r in lane if r in self.left]
                if not left:
                    continue
                rest = sum(self.expected[r] + self.boot.get(r, 0.0) for r in left) * scale
                current = left[0]
                if now is not None and current in self.since:
                    own = (self.expected[current] + self.boot.get(current, 0.0)) * scale
                    rest -= min(max(now - self.since[current], 0.0), own)
                slowest = max(slowest, rest)
            total += slowest
        return total

    def overdue_s(self, now: float | None = None) -> float:
        """How long the run under way that is furthest past its expected time (scaled as
        `remaining_s` scales it) has run beyond it; 0 when none is. `remaining_s` counts
        such a run as ending now, so without this the ETA of a run that takes far longer
        than its estimate (a k=16 build) would read "~0 s left" for as long as it runs."""
        if now is None:
            return 0.0
        scale = self.scale()
        worst = 0.0
        for lanes in self.lanes:
            for lane in lanes:
                left = [r for r in lane if r in self.left]
                if left and left[0] in self.since:
                    own = (self.expected[left[0]] + self.boot.get(left[0], 0.0)) * scale
                    worst = max(worst, now - self.since[left[0]] - own)
        return worst

    def text(self, now: float | None = None) -> str:
        if not self.left:
            return "done"
        basis = f", x{self.scale():.2f} so far" if self.planned_s else ""
        src = f" ({self.source}{basis})" if self.source else ""
        late = self.overdue_s(now)
        past = f"; a run under way is {format_duration(late)} past its estimate" \
            if late >= 1.0 else ""
        return f"~{format_duration(self.remaining_s(now))} left{past}{src}"
