"""The configuration schema as data: every key with its type, unit, default and doc.

`pathdiv.experiments.config.load` validates files and `--set` overrides against this tree, and the
README's key table is generated from it (`pathdiv keys`), so the three cannot drift.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from pathdiv.experiments.config.planes import AUTO, plane_help
from pathdiv.experiments.config.planes import choices as plane_choices
from pathdiv.experiments.config.switching import MODES, SPRAYS, mode_help, mode_params
from pathdiv.experiments.config.workloads import PATTERNS, pattern_help
from pathdiv.kernels.abilities import KNOWN_CCS, LAB_SCHEDULERS
from pathdiv.topologies.paths import MAX_BACKGROUND_FLOWS, MAX_PATHS

Check = Callable[[Any], str | None]  # returns "what is allowed" when the value is bad


@dataclass(frozen=True)
class Leaf:
    """One configuration value."""

    kind: type | tuple[type, ...]
    default: Any
    doc: str
    choices: tuple[Any, ...] | None = None
    check: Check | None = None
    nullable: bool = False


@dataclass(frozen=True)
class Section:
    """A mapping with a fixed set of keys."""

    fields: dict[str, Leaf | Section | MapOf | ListOf]
    doc: str = ""


@dataclass(frozen=True)
class ListOf:
    """A list whose items all have the same shape (the events of a run)."""

    item: Section
    doc: str
    max_items: int = 1000


@dataclass(frozen=True)
class MapOf:
    """A mapping whose keys the user chooses (names of flow types, factors, levels)."""

    value: Leaf | Section | MapOf
    doc: str
    default: dict[str, Any] = field(default_factory=dict)
    key_pattern: str = r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$"
    min_items: int = 0  # an explicit {} with fewer entries is refused
    max_items: int = 1000


SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|KiB|MiB|GiB)?\s*$")
SIZE_UNITS = {None: 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9}
SIZE_UNITS |= {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def parse_size(value: Any) -> int:
    """'10KB' -> 10000, '25MB' -> 25000000, '1MiB' -> 1048576; ints are bytes."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(value)
        return value
    m = SIZE_RE.match(str(value))
    if not m:
        raise ValueError(value)
    size = int(float(m.group(1)) * SIZE_UNITS[m.group(2)])
    if size <= 0:
        raise ValueError(value)
    return size


MAX_SIZE_BYTES = 10**9  # one transfer, one request: 1 GB


def _size_check(value: Any) -> str | None:
    try:
        size = parse_size(value)
    except (ValueError, OverflowError):
        return "a positive size such as 10KB, 500KB, 25MB or 1MiB (KB = 1000 bytes)"
    if size > MAX_SIZE_BYTES:
        return "a size of at most 1GB"
    return None


_size_check.allowed = "1B..1GB"  # type: ignore[attr-defined]


class Between:
    """A check for a number within [low, high] (`pathdiv keys` shows `allowed`).

    The upper bounds are what one 2-core machine with 24 GB can honour in one run: more
    would not fail fast but fill the disk or memory, or run for days."""

    def __init__(self, low: float, high: float, unit: str = "", integer: bool = False,
                 low_open: bool = False) -> None:
        self.low, self.high, self.low_open = low, high, low_open
        kind = "an integer" if integer else "a number"
        lo, hi = (f"{int(x)}" if float(x).is_integer() else f"{x:g}" for x in (low, high))
        low_text = f"> {lo}" if low_open else f">= {lo}"
        self.allowed = (f"{lo}..{hi}{' ' + unit if unit else ''}" if not low_open
                        else f"> {lo} and <= {hi}{' ' + unit if unit else ''}")
        self.want = f"{kind} {low_text} and <= {hi}{' (' + unit + ')' if unit else ''}"

    def __call__(self, value: Any) -> str | None:
        above = value > self.low if self.low_open else value >= self.low
        return None if above and value <= self.high else self.want


SIZE_DISTRIBUTIONS = ("websearch", "datamining")


def _sizes(value: Any) -> str | None:
    if value in SIZE_DISTRIBUTIONS or str(value).endswith((".txt", ".cdf", ".csv")):
        return None
    return "websearch, datamining or a CDF file path ending in .txt, .cdf or .csv"


NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def plain_name_problem(value: Any) -> str | None:
    """`name` becomes a folder (results/<name>-<time>/) and a Slurm job name."""
    if NAME_RE.match(value) and ".." not in value:
        return None
    return ("a plain name of 1-64 letters, digits, '_', '-', '.', starting with a letter "
            "or digit, without '..' (it becomes a folder and a Slurm job name)")


plain_name_problem.allowed = "[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"  # type: ignore[attr-defined]


def _names(value: Any) -> str | None:
    ok = all(isinstance(v, str) and 0 < len(v) <= 64 for v in value) and len(value) <= 20
    return None if ok else "a list of at most 20 names (strings)"


def _reference(value: Any) -> str | None:
    names = sorted(p.name.removesuffix(".yaml")
                   for p in resources.files("pathdiv.analysis.references").iterdir()
                   if p.name.endswith(".yaml"))
    values = value if isinstance(value, list) else [value]
    ok = values and all(v in names for v in values)
    return None if ok else f"one of {', '.join(names)}, or a list of them"


MAX_BUDGET_MB = 50_000  # captures of one run: 50 GB


def _budget(value: Any) -> str | None:
    if value == "auto" or (isinstance(value, int) and 1 <= value <= MAX_BUDGET_MB):
        return None
    return f"an integer number of MB from 1 to {MAX_BUDGET_MB}, or auto (sized from the plan)"


_budget.allowed = f"1..{MAX_BUDGET_MB} MB or auto"  # type: ignore[attr-defined]

MAX_K = 8  # k=8: 80 switches, 128 hosts; k=10 (125 switches, 250 hosts) outgrows 2 cores


def _even_k(value: Any) -> str | None:
    ok = 2 <= value <= MAX_K and value % 2 == 0
    return None if ok else f"an even integer 2..{MAX_K}"


_even_k.allowed = f"2, 4, ... {MAX_K}"  # type: ignore[attr-defined]


def _reorder_hold(value: Any) -> str | None:
    return None if 1 <= value <= 1_000_000 else "an integer from 1 to 1000000 (µs)"


_reorder_hold.allowed = "1..1000000 µs"  # type: ignore[attr-defined]


ECN_THRESHOLD_MAX = 1000  # packets; deeper than any queue a k=4 lab link is given


def _ecn_threshold(value: Any) -> str | None:
    return (None if value is None or 1 <= value <= ECN_THRESHOLD_MAX
            else f"null (no marking) or an integer from 1 to {ECN_THRESHOLD_MAX} (packets)")


def _watts(value: Any) -> str | None:
    ok = isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value <= 1000
    return None if ok else "a number of watts from 0 to 1000"


_watts.allowed = "0..1000 W"  # type: ignore[attr-defined]


def _mptcp_d_alpha(value: Any) -> str | None:
    return None if 1 < value <= 10 else "a number above 1 and at most 10"


def _mptcp_d_beta(value: Any) -> str | None:
    return None if 0 < value <= 1 else "a number above 0 and at most 1"


def _subflows(value: Any) -> str | None:
    return None if 1 <= value <= 8 else "an integer 1..8"


_subflows.allowed = "1..8"  # type: ignore[attr-defined]


def _probability(value: Any) -> str | None:
    return None if 0 < value < 1 else "a number between 0 and 1"


def _port(value: Any) -> str | None:
    return None if 1 <= value <= 65535 else "a TCP port 1..65535"


_port.allowed = "1..65535"  # type: ignore[attr-defined]

# Upper bounds (see Between); each shows in `pathdiv keys`.
MAX_REPETITIONS = 1000
MAX_RUNS = 1000  # runs of one plan (repetitions x factor levels x flow types): days of emulation
MAX_ITERATIONS = 1000
MAX_REQUESTS = 100
MAX_SECONDS = 3600.0  # one timeout, one arrival window, the time of one event
MAX_QUEUE_PKTS = 100_000
MAX_LAB_MEMORY_MB = 16_384  # of 24 GB, leaving the host and the captures room
MAX_SNAPLEN = 65_535
MAX_BW_MBPS = 100_000.0
MAX_DELAY_MS = 10_000.0
MAX_RPC_RATE = 10_000.0
MAX_CONNECTIONS = 64
MAX_REPEATS = 10
MAX_RTOS = 1_000_000
MAX_SEED = 2**32 - 1
MAX_FLOW_TYPES = 20
MAX_EVENTS = 1000
MAX_FACTORS = 4
MAX_LEVELS = 50
MAX_NAME_CHARS = 40  # a flow type, factor or level name: part of every run id

_repetitions = Between(1, MAX_REPETITIONS, integer=True)
_iterations = Between(1, MAX_ITERATIONS, integer=True)
_requests = Between(1, MAX_REQUESTS, integer=True)
_connections = Between(1, MAX_CONNECTIONS, integer=True)
_rtos = Between(1, MAX_RTOS, integer=True)
_max_repeats = Between(0, MAX_REPEATS, integer=True)
_seconds = Between(0, MAX_SECONDS, "s", low_open=True)
_at_s = Between(0, MAX_SECONDS, "s")
_queue = Between(1, MAX_QUEUE_PKTS, "packets", integer=True)
_lab_memory = Between(256, MAX_LAB_MEMORY_MB, "MB", integer=True)
_own_boot_kb = Between(0, MAX_SIZE_BYTES // 1000, "KB", integer=True)
_snaplen = Between(64, MAX_SNAPLEN, "bytes", integer=True)
_sample_interval = Between(0.05, 60, "s")
_min_backlogged = Between(0, 600, "s", low_open=True)
_bw = Between(0, MAX_BW_MBPS, "Mbit/s", low_open=True)
_delay = Between(0, MAX_DELAY_MS, "ms")
_rpc_rate = Between(0, MAX_RPC_RATE, "requests/s")
_seed = Between(0, MAX_SEED, integer=True)
def _percent(value: Any) -> str | None:
    return None if 0 <= value <= 100 else "a percentage 0..100"


_percent.allowed = "0..100 %"  # type: ignore[attr-defined]


def _fraction(value: Any) -> str | None:
    return None if 0 < value <= 1 else "a fraction of the link rate, > 0 and <= 1"


_fraction.allowed = "> 0 and <= 1"  # type: ignore[attr-defined]
def _load_fraction(value: Any) -> str | None:
    return None if 0 < value <= 1 else "a fraction of the link rate, 0 < load <= 1"


_load_fraction.allowed = "> 0 and <= 1"  # type: ignore[attr-defined]


def _loss(value: Any) -> str | None:
    return None if 0 <= value < 100 else "a percentage 0 <= loss_pct < 100"


_loss.allowed = ">= 0 and < 100 %"  # type: ignore[attr-defined]


# Link condition keys: (type, doc, check). The tiers give them defaults; link overrides
# and `set` events change them per link or per direction (fabric/conditions.py).
CONDITION_KEYS: dict[str, tuple[type | tuple[type, ...], str, Check]] = {
    "bw_mbps": ((int, float), "link rate in Mbit/s (null: unshaped)", _bw),
    "delay_ms": ((int, float), "one-way delay in ms added at each egress (needs netem: "
                 "hosts.kernel: lab)", _delay),
    "jitter_ms": ((int, float), "delay variation in ms (netem: uniform within ±jitter_ms, "
                  "may reorder; needs delay_ms >= jitter_ms and hosts.kernel: lab)",
                  _delay),
    "loss_pct": ((int, float), "random loss of IPv4 packets in percent, dropped on arrival "
                 "at the receiving end (nftables, any kernel)", _loss),
    "queue_pkts": (int, "drop-tail queue length in packets at each egress", _queue),
}
CONDITION_DEFAULTS: dict[str, Any] = {"delay_ms": 0, "jitter_ms": 0, "loss_pct": 0,
                                      "queue_pkts": 100}


def _link(bw_default: float | None) -> Section:
    fields: dict[str, Leaf | Section | MapOf | ListOf] = {}
    for key, (kind, doc, check) in CONDITION_KEYS.items():
        default = bw_default if key == "bw_mbps" else CONDITION_DEFAULTS[key]
        fields[key] = Leaf(kind, default, doc, check=check, nullable=key == "bw_mbps")
    return Section(fields, "shaping of one link tier, both directions")


def conditions_section(doc: str, unset: str) -> Section:
    """Every condition key, null = `unset` (link overrides, `set` events)."""
    return Section({key: Leaf(kind, None, f"{text}; null: {unset}", check=check,
                              nullable=True)
                    for key, (kind, text, check) in CONDITION_KEYS.items()}, doc)


_background_flows = Between(0, MAX_BACKGROUND_FLOWS, integer=True)


LINK_KEY_PATTERN = r"^[a-z]+[0-9]+[->][a-z]+[0-9]+$"


DVS = ("throughput_mbps", "goodput_mbps", "fct_s", "utilization")

SCHEMA = Section(
    {
        "name": Leaf(str, "experiment", "experiment name; results go to results/<name>-<time>/ "
                     "and Slurm jobs are named after it", check=plain_name_problem),
        "seed": Leaf(int, 1, "master seed: run order, host designations, ECMP hash seeds",
                     check=_seed),
        "repetitions": Leaf(int, 1, "repetitions of every factor combination (a plan, "
                            f"repetitions x levels x flow types, has at most {MAX_RUNS} runs)",
                            check=_repetitions),
        "topology": Section(
            {
                "kind": Leaf(str, "fattree", "topology family: fattree = the k-ary fat "
                             "tree; paths = N disjoint bottleneck paths between two "
                             "dual-homed hosts (topology.paths; seed 003's testbed)",
                             choices=("fattree", "paths")),
                "k": Leaf(int, 4, "fat-tree arity (pods); k=4: 20 switches, 16 hosts",
                          check=_even_k),
                "links": Section(
                    {"host": _link(20), "edge": _link(20), "core": _link(20)},
                    "per tier: host = host-edge, edge = edge-aggregation, "
                    "core = aggregation-core",
                ),
                "paths": ListOf(
                    Section(
                        {
                            **{key: Leaf(kind, None if key == "bw_mbps" else
                                         CONDITION_DEFAULTS[key], doc, check=check,
                                         nullable=key == "bw_mbps")
                               for key, (kind, doc, check) in CONDITION_KEYS.items()},
                            "background": Section(
                                {"flows": Leaf(int, 0, "long TCP downloads crossing only "
                                               "this bottleneck, for the whole run",
                                               check=_background_flows),
                                 "cc": Leaf(str, None, "their congestion control (null: "
                                            "hosts.cc; coupled ones run as their TCP "
                                            "form)", choices=KNOWN_CCS, nullable=True)},
                                "background TCP flows of this path"),
                        },
                        "one bottleneck path (kind: paths): the link ra<i>-rb<i>, both "
                        "directions, and its background flows",
                    ),
                    "kind paths: the bottlenecks, path 1 first; the client's address on "
                    "path i is an MPTCP subflow endpoint on its own interface (one subflow "
                    "per path); events name a bottleneck as ra<i>-rb<i>",
                    max_items=MAX_PATHS,
                ),
                "link_overrides": MapOf(
                    conditions_section("conditions of one link or one direction", "as its tier"),
                    "link name -> conditions replacing its tier's: 'a1-c1' both directions, "
                    "'a1>c1' only the direction from a1 to c1",
                    key_pattern=LINK_KEY_PATTERN,
                ),
            }
        ),
        "dataplane": Leaf(str, AUTO, plane_help(), choices=plane_choices()),
        "switching": Section(
            {
                "mode": Leaf(str, "ecmp", mode_help(), choices=tuple(MODES)),
                "spray": Leaf(str, "random", "per-packet choice when mode is spray",
                              choices=SPRAYS),
                **{p.key: Leaf(int, p.default, p.help,
                               check=Between(p.minimum, p.maximum, p.unit, integer=True))
                   for p in mode_params().values()},
                "ecn_threshold_pkts": Leaf(int, None, "switches mark ECN-capable packets CE "
                                           "when their egress queue holds at least this "
                                           "many packets (DCTCP's K), and drop other "
                                           "packets there; nftables plane: RED in ECN mode "
                                           "on every switch egress; bmv2: the egress "
                                           "queue depth (enq_qdepth); null = drop-tail "
                                           "only", check=_ecn_threshold, nullable=True),
            }
        ),
        "hosts": Section(
            {
                "transport": Leaf(str, "tcp", "transport of every transfer",
                                  choices=("tcp", "mptcp")),
                "subflows": Leaf(int, 4, "MPTCP subflows per connection on the single "
                                 "interface (ndiffports)", check=_subflows),
                "cc": Leaf(str, "cubic", "TCP congestion control (also for MPTCP subflows); "
                           "lia = RFC 6356 coupled control of MPTCP subflows, olia = "
                           "opportunistic linked increases (lab kernel; plain TCP runs "
                           "them as reno), coupled-bbr = BBR with coupled PROBE_BW "
                           "gains (lab kernel; plain TCP runs it as bbr)", choices=KNOWN_CCS),
                "kernel": Leaf(str, "host", "host: this machine's kernel; lab: the pathdiv lab "
                               "kernel (RB scheduler)", choices=("host", "lab")),
                "scheduler": Leaf(str, "default", "MPTCP packet scheduler "
                                  "(net.mptcp.scheduler); lab kernel: rb, roundrobin, "
                                  "arp = AR&P (redundant subflows for bad paths, "
                                  "new packets by predicted arrival), ar = its "
                                  "AR part only, redundant = copies on every other "
                                  "subflow, minrtt = lowest RTT with room (the AR&P "
                                  "paper's baseline; default is upstream's)",
                                  choices=LAB_SCHEDULERS),
                "subflow_paths": Leaf(str, "hashed", "where MPTCP subflows go: hashed = "
                                      "kernel path manager, ECMP's hash decides; disjoint "
                                      "= source ports chosen so the hash puts them on "
                                      "distinct paths (switching.mode ecmp); eliminate = "
                                      "subflows whose path shares a fabric link with an "
                                      "earlier one are not opened",
                                      choices=("hashed", "disjoint", "eliminate")),
                "reordering": Leaf(str, "default", "how hosts' TCP tolerates reordering: "
                                   "default = the kernel's settings; tuned = a higher "
                                   "initial and maximum reordering degree and RACK without "
                                   "the duplicate-ACK threshold (net.ipv4.tcp_reordering, "
                                   "tcp_max_reordering, tcp_recovery, per namespace); gro "
                                   "= the lab kernel's reorder hold: a receiver holds the "
                                   "SACKs of out-of-order segments for up to "
                                   "hosts.reorder_hold_us (Juggler's idea)",
                                   choices=("default", "tuned", "gro")),
                "mptcp_d_alpha": Leaf((int, float), 1.3, "hosts.cc mptcp-d: an RTT sample "
                                      "above alpha x the subflow's lowest RTT is a "
                                      "significant change, which triggers link-sharing "
                                      "detection (the paper's Algorithm 1; 1.3 there)",
                                      check=_mptcp_d_alpha),
                "mptcp_d_beta": Leaf((int, float), 0.1, "hosts.cc mptcp-d: a subflow whose "
                                     "changed RTT is within beta x its lowest RTT of the "
                                     "triggering RTT shares that subflow's link and has "
                                     "its window closed (0.1 in the paper)",
                                     check=_mptcp_d_beta),
                "reorder_hold_us": Leaf(int, 1000, "bound of the reorder hold in µs "
                                        "(hosts.reordering: gro): at least the delay "
                                        "spread of the paths a flow is sprayed over",
                                        check=_reorder_hold),
            }
        ),
        "energy": Section(
            {
                "idle_watts": Leaf((int, float), 0.0, "power model: watts one host draws "
                                   "while a transfer it takes part in lasts, busy or not "
                                   "(0: count only the CPU work)", check=_watts),
                "busy_watts_per_core": Leaf((int, float), 15.0, "power model: watts one "
                                            "core draws above idle while busy; a "
                                            "transfer's CPU seconds (client and server "
                                            "threads) times this is its busy energy",
                                            check=_watts),
            },
            "energy_j = busy_watts_per_core x CPU seconds + idle_watts x FCT x hosts of "
            "the group (per run, run_energy_j: the hosts' CPU seconds and the traffic "
            "phase), on the real clock only (NaN on the virtual clock, where CPU work "
            "takes no time)",
        ),
        "lab": Section(
            {
                "clock": Leaf(str, "virtual", "clock of the lab kernel (hosts.kernel: net): "
                              "virtual = User-Mode Linux time-travel, CPU work takes no "
                              "time and links are the only bottleneck; real = the wall "
                              "clock (for CPU-cost measures)", choices=("virtual", "real")),
                "memory_mb": Leaf(int, 1536, "memory of the lab kernel in MB (a k=4 run "
                                  "peaks near 500)", check=_lab_memory),
                "own_boot_above_kb": Leaf(int, 128, "on the virtual clock, a run whose "
                                          "transfers are larger than this many KB (or "
                                          "whose pattern is open-loop) starts a boot of "
                                          "the lab kernel of its own, and so gives the "
                                          "same results wherever it stands in the plan; "
                                          "others follow the run before them in its boot "
                                          "(0: every run boots alone; docs/DESIGN.md)",
                                          check=_own_boot_kb),
            },
            "how lab-kernel runs execute",
        ),
        "network": Section(
            {
                "reuse": Leaf(bool, True, "runs that share topology, data plane and link "
                              "conditions reuse one built network (nftables plane): "
                              "between runs it is reset and verified, and rebuilt when "
                              "the check finds what a reset cannot undo; false = build "
                              "the network afresh for every run (on the virtual clock "
                              "both give the same results: docs/DESIGN.md; runs with "
                              "their own boot, lab.own_boot_above_kb, build their own)"),
            },
            "how runs share a built network",
        ),
        "workload": Section(
            {
                "pattern": Leaf(str, "silent", pattern_help(), choices=tuple(PATTERNS)),
                "flow_types": MapOf(
                    Leaf((str, int), None, "payload size", check=_size_check),
                    "flow type name -> payload size of one transfer",
                    default={"query": "128KB", "short": "500KB", "long": "25MB"},
                    min_items=1, max_items=MAX_FLOW_TYPES,
                ),
                "iterations": Leaf(int, 4, "designation rounds per run (new pairs/groups each)",
                                   check=_iterations),
                "requests": Leaf(int, 1, "requests per client per iteration",
                                 check=_requests),
                "timeout_s": Leaf((int, float), 120, "a transfer not done by then fails",
                                  check=_seconds),
                "server_port": Leaf(int, 8080, "TCP port of the transfer server on every "
                                    "host", check=_port),
                "load": Leaf((int, float), 0.5, "poisson: offered load per host as a "
                             "fraction of its access link rate", check=_load_fraction),
                "sizes": Leaf(str, "websearch", "poisson: flow-size distribution: websearch "
                              "(DCTCP), datamining (VL2) or the path of a CDF file (lines "
                              "'<bytes> <cumulative probability>'; relative to the config's "
                              "folder; a regular file of at most 1 MB reached through no "
                              "symbolic link)", check=_sizes),
                "max_size": Leaf((str, int), None, "poisson: sizes above this are cut to it "
                                 "(null: no cut)", check=_size_check, nullable=True),
                "duration_s": Leaf((int, float), 10, "poisson: length of the arrival "
                                   "window (iterations are not used)", check=_seconds),
                "background": Section(
                    {
                        "pattern": Leaf(str, "none", "none; poisson: open-loop flows between "
                                        "random hosts (sizes from workload.sizes); "
                                        "permutation: each host fetches 1MB chunks from a "
                                        "fixed partner at Poisson times",
                                        choices=("none", "poisson", "permutation")),
                        "load": Leaf((int, float), 0.3, "offered load per host as a fraction "
                                     "of its access link rate", check=_load_fraction),
                        "port": Leaf(int, 8081, "TCP port of the background servers",
                                     check=_port),
                    },
                    "load under the measured workload: in the captures, not in transfers.csv "
                    "(its flows go to background.csv)",
                ),
                "rpc": Section(
                    {
                        "rate_per_s": Leaf((int, float), 0, "requests per second per host, "
                                           "Poisson (0: no request/response traffic)",
                                           check=_rpc_rate),
                        "connections": Leaf(int, 1, "persistent connections per host, each "
                                            "to a random other host", check=_connections),
                        "request_size": Leaf((str, int), "100B", "bytes of one request",
                                             check=_size_check),
                        "response_size": Leaf((str, int), "1KB", "bytes of one response",
                                              check=_size_check),
                        "port": Leaf(int, 8082, "TCP port of the request/response servers",
                                     check=_port),
                    },
                    "request/response (memcached-like) beside the measured workload; per "
                    "request latency goes to requests.csv",
                ),
                "designations": Leaf(str, "per_run", "per_run: every run draws its own "
                                     "client/server designations from its seed; "
                                     "per_repetition: every factor level of a repetition "
                                     "(and flow type) gets the same draws, so the levels "
                                     "are compared paired",
                                     choices=("per_run", "per_repetition")),
            }
        ),
        "events": ListOf(
            Section(
                {
                    "at_s": Leaf((int, float), None, "seconds after the workload starts",
                                 check=_at_s),
                    "link": Leaf(str, None, "link name such as a1-c1 (a1>c1: one direction, "
                                 "for set only)"),
                    "action": Leaf(str, None, "down: both ends drop every packet that arrives "
                                   "(routes stay, as before routing reacts); up: restored",
                                   choices=("down", "up"), nullable=True),
                    "set": conditions_section("new conditions of the link from then on",
                                              "unchanged"),
                },
                "one change of one link",
            ),
            "changes applied while the workload runs, each with action or set; recorded "
            "with their actual times in the manifest",
            max_items=MAX_EVENTS,
        ),
        "capture": Section(
            {
                "enabled": Leaf(bool, True, "capture packet headers on every link"),
                "snaplen": Leaf(int, 96, "bytes kept per packet; 96 holds every header the "
                                "metrics read (Ethernet 14 + IPv4 20 + TCP with options <= 60)",
                                check=_snaplen),
                "budget_mb": Leaf((int, str), "auto", "MB the captures of one run may "
                                  "write, all links together; auto: what the run's "
                                  "transfers need (payload / MSS x transfers x hops x "
                                  "(snaplen + 16)); each link's file is capped at its own "
                                  "need, and a budget below a run's need is refused at "
                                  "`pathdiv check`", check=_budget),
                "tool": Leaf(str, "auto", "the capturing program: linkcap (pathdiv's own, "
                             "one process for every link; built with the C compiler on "
                             "first use), tcpdump (one process per link), or auto: "
                             "linkcap where it can be built, else tcpdump; both write the "
                             "same pcap files", choices=("auto", "linkcap", "tcpdump")),
            }
        ),
        "fidelity": Section(
            {
                "enabled": Leaf(bool, True, "sample host CPU, qdiscs and TCP timeouts during "
                                "each run's traffic and give it a verdict (docs/fidelity.md)"),
                "sample_interval_s": Leaf((int, float), 0.05, "seconds between qdisc samples "
                                          "(a slow egress is seen only where its queue "
                                          "holds more than its rate sends in one "
                                          "interval: docs/fidelity.md)",
                                          check=_sample_interval),
                "steal_degraded_pct": Leaf((int, float), 3, "CPU stolen by the hypervisor "
                                           "during traffic (percent, mean of the cores) from "
                                           "which a run is degraded", check=_percent),
                "steal_invalid_pct": Leaf((int, float), 10, "steal (percent) from which a run "
                                          "is invalid", check=_percent),
                "link_rate_degraded": Leaf((int, float), 0.9, "a backlogged link sending "
                                           "below this fraction of its rate makes the run "
                                           "degraded", check=_fraction),
                "link_rate_invalid": Leaf((int, float), 0.75, "below this fraction of its "
                                          "rate: invalid", check=_fraction),
                "min_backlogged_s": Leaf((int, float), 1.0, "seconds a link must surely "
                                         "have been backlogged (the bytes its queue held, "
                                         "at its rate) before its rate is judged",
                                         check=_min_backlogged),
                "rto_degraded": Leaf(int, 3, "TCP timeouts beyond the qdisc drops (all hosts) "
                                     "from which a run is degraded", check=_rtos),
                "rto_invalid": Leaf(int, 20, "unexplained TCP timeouts from which a run is "
                                    "invalid", check=_rtos),
                "max_repeats": Leaf(int, 2, "times an invalid run is repeated (earlier "
                                    "attempts kept in runs/<run_id>/attempt-<n>/)",
                                    check=_max_repeats),
            },
            "fidelity monitor and verdict of real-clock runs",
        ),
        "factors": MapOf(
            MapOf(
                MapOf(Leaf((str, int, float, bool, dict), None, "override value, or for "
                           "applies_to {other factor: [levels]}", nullable=True),
                      "dotted config key -> value; applies_to: {other factor: [levels]} "
                      "where this level acts (analysis/stats/scope.py)",
                      key_pattern=r"^([a-z_]+(\.([a-z_]+|[0-9])){1,5}|applies_to)$", max_items=50),
                "level name -> overrides",
                min_items=1, max_items=MAX_LEVELS,
            ),
            "factor name -> levels; the plan crosses all factors",
            max_items=MAX_FACTORS,
        ),
        "analysis": Section(
            {
                "clusters": Leaf(list, ["condition", "flow_type"], "columns that split the "
                                 "data into test clusters", check=_names),
                "ivs": Leaf(list, None, "independent variables: one or two factor names; null: "
                            "the config's factors", nullable=True, check=_names),
                "dvs": Leaf(list, list(DVS), "dependent variables (metrics.csv columns)",
                            check=_names),
                "alpha": Leaf(float, 0.05, "significance level", check=_probability),
                "reference": Leaf((str, list), None, "the published study (or list of "
                                  "studies) this config reproduces: files of "
                                  "analysis/references/ (seed001, seed000); the report "
                                  "puts their figures beside ours", nullable=True,
                                  check=_reference),
                "lower_is_better": Leaf(list, None, "metrics where a smaller value is the "
                                        "better outcome (rankings, a reference's claims "
                                        "of kind better); null: fct_s, excess_pct, "
                                        "retrans_pct, reorder_pct", nullable=True,
                                        check=_names),
                "min_effect_pct": Leaf((int, float), 1.0, "smallest effect of interest, in "
                                       "percent of the compared mean: the summary separates "
                                       "significant effects at least this large from "
                                       "significant but negligible ones", check=_percent),
            }
        ),
    }
)


def iter_leaves(
    node: Leaf | Section | MapOf | ListOf = SCHEMA, prefix: str = ""
) -> list[tuple[str, Leaf | MapOf]]:
    """(dotted key, leaf) for every documented key; map values are shown as <name>
    when they are sections, list items as []."""
    out: list[tuple[str, Leaf | MapOf]] = []
    if isinstance(node, Section):
        for key, child in node.fields.items():
            out += iter_leaves(child, f"{prefix}.{key}" if prefix else key)
    elif isinstance(node, ListOf):
        out += iter_leaves(node.item, f"{prefix}[]")
    elif isinstance(node, MapOf) and isinstance(node.value, Section):
        out += iter_leaves(node.value, f"{prefix}.<name>")
    elif isinstance(node, MapOf):
        out.append((prefix, node))
    else:
        out.append((prefix, node))
    return out
