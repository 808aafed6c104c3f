"""Expected duration of a run, from its configuration alone (pure).

A run is a network build, a sequence of rounds and a teardown. Within a round the
requests start together, and a client's host link carries every byte its servers send
it, so a round lasts about (payload x servers of its busiest client) / link rate; the
link rate is the slowest configured tier (unshaped links count as UNSHAPED_MBPS) times
the fraction of it a transfer reaches. A round never lasts longer than
workload.timeout_s (its transfers time out). Every round adds a fixed cost (starting
the transfer processes) and every run one more (build, reachability check, capture
drain, teardown).

The constants are the figures of docs/benchmarks.md on a 2-core machine, per
hosts.kernel. On the lab kernel's virtual clock the wall time follows the packets and
processes, not the link rate: its constants fit the reference configs at 20 Mbit/s
(`benchmarks/run_timing.py --kernel lab`: ~70 s per run for the build and process
starts; noisy rounds cost about 4x their simulated time, silent ones 1.7x). They
balance shards against each other; they are not a promise of wall-clock time.

The data plane changes the cost where the switches' work shows in wall time: on the lab
kernel's virtual clock every packet bmv2 forwards costs host CPU while the guest's clock
stands still, so a run there takes PLANE_FACTORS[(kernel, plane)] times the kernel
plane's (docs/p4.md, `benchmarks/bmv2_lab.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pathdiv.experiments.config.load import Config
from pathdiv.experiments.plan.designations import rounds
from pathdiv.experiments.plan.runs import Run

UNSHAPED_MBPS = 1000.0


@dataclass(frozen=True)
class Costs:
    run_overhead_s: float    # build + ping + capture drain + teardown, once per run
    round_overhead_s: float  # starting a round's transfer processes
    rate_fraction: float     # goodput / configured link rate of one transfer


COSTS = {
    "host": Costs(run_overhead_s=15.0, round_overhead_s=1.0, rate_fraction=0.95),
    "lab": Costs(run_overhead_s=70.0, round_overhead_s=2.0, rate_fraction=0.4),
}


# (hosts.kernel, data plane) -> wall time over the same run on the kernel data plane;
# measured on the probe (docs/p4.md): bmv2 in the lab kernel took 15x the kernel plane
# before switches ran with `--log-level off`, 11.2x after (median of 2 pairs, 9.7-12.8x).
PLANE_FACTORS = {("lab", "bmv2"): 11.0}


def plane_factor(kernel: str, plane: str | None) -> float:
    """How much longer a run on `plane` takes than on the kernel plane (1 when unknown)."""
    return PLANE_FACTORS.get((kernel, plane or "kernel"), 1.0)


def bottleneck_mbps(cfg: Config) -> float:
    """The slowest configured link tier in Mbit/s (unshaped tiers count as UNSHAPED_MBPS)."""
    rates = [p.bw_mbps if p.bw_mbps is not None else UNSHAPED_MBPS
             for p in cfg.link_params().values()]
    return min(rates) if rates else UNSHAPED_MBPS


def expected_traffic_s(cfg: Config, flow_type: str, seed: int) -> float:
    """Seconds of traffic of one run: its rounds' busiest-client bytes over the link rate."""
    w = cfg.data["workload"]
    size = cfg.flow_sizes()[flow_type]
    costs = COSTS.get(cfg.host_kernel, COSTS["host"])
    bps = bottleneck_mbps(cfg) * 1e6 * costs.rate_fraction
    timeout = float(w["timeout_s"])
    if w["pattern"] == "poisson":  # the arrival window, then the last flows' drain
        return float(w["duration_s"]) + min(timeout, 2 * costs.round_overhead_s)
    total = 0.0
    for rnd in rounds(str(w["pattern"]), cfg.topology().hosts, seed, int(w["iterations"]),
                      int(w["requests"])):
        busiest = max((len(r.servers) for r in rnd), default=0)
        total += min(busiest * size * 8 / bps, timeout) + costs.round_overhead_s
    return total


def expected_run_s(run: Run, plane: str | None = None) -> float:
    """Expected seconds of `run` from build to teardown (rounded to milliseconds), on the
    data plane named `plane` (the one `dataplane:` resolves to; None: the kernel plane)."""
    cfg = run.config
    costs = COSTS.get(cfg.host_kernel, COSTS["host"])
    traffic = expected_traffic_s(cfg, run.flow_type, run.workload_seed)
    return round((costs.run_overhead_s + traffic) * plane_factor(cfg.host_kernel, plane), 3)


def format_duration(seconds: float) -> str:
    """'45 s', '12 min', '2 h 05 min'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60:02d} min"


class PlanClock:
    """An honest ETA for a plan: the expected time of the runs left (payloads over link
    rates plus the per-run and per-round costs, `expected_run_s`), scaled by how long the
    runs finished so far really took against their own expectation. Counting runs would
    say "2 minutes" for ten long runs behind twenty short ones."""

    def __init__(self, runs: list[Run]) -> None:
        self.expected = {run.run_id: expected_run_s(run) for run in runs}
        self.left = set(self.expected)
        self.spent_s = 0.0     # wall time of the complete runs measured so far
        self.planned_s = 0.0   # what they were expected to take

    def finished(self, run_id: str, wall_s: float | None) -> None:
        """`run_id` ended; `wall_s` is its measured time (None: not a complete run)."""
        if run_id not in self.left:
            return
        self.left.discard(run_id)
        if wall_s is not None and wall_s > 0:
            self.spent_s += wall_s
            self.planned_s += self.expected[run_id]

    def scale(self) -> float:
        return self.spent_s / self.planned_s if self.planned_s else 1.0

    def remaining_s(self) -> float:
        return sum(self.expected[r] for r in self.left) * self.scale()

    def text(self) -> str:
        if not self.left:
            return "done"
        basis = "" if self.planned_s else " (estimated)"
        return f"~{format_duration(self.remaining_s())} left{basis}"
