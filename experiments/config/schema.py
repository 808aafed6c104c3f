"""The configuration schema as data: every key with its type, unit, default and doc.

`pathdiv.experiments.config.load` validates files and `--set` overrides against this tree, and the
README's key table is generated from it (`pathdiv keys`), so the three cannot drift.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from pathdiv.kernels.abilities import KNOWN_CCS

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


@dataclass(frozen=True)
class MapOf:
    """A mapping whose keys the user chooses (names of flow types, factors, levels)."""

    value: Leaf | Section | MapOf
    doc: str
    default: dict[str, Any] = field(default_factory=dict)
    key_pattern: str = r"^[A-Za-z][A-Za-z0-9_.-]*$"


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


def _size_check(value: Any) -> str | None:
    try:
        parse_size(value)
    except ValueError:
        return "a positive size such as 10KB, 500KB, 25MB or 1MiB (KB = 1000 bytes)"
    return None


SIZE_DISTRIBUTIONS = ("websearch", "datamining")


def _sizes(value: Any) -> str | None:
    if value in SIZE_DISTRIBUTIONS or str(value).endswith((".txt", ".cdf", ".csv")):
        return None
    return "websearch, datamining or a CDF file path ending in .txt, .cdf or .csv"


def _positive(value: Any) -> str | None:
    return None if value > 0 else "a number > 0"


def _non_negative(value: Any) -> str | None:
    return None if value >= 0 else "a number >= 0"


def _reference(value: Any) -> str | None:
    names = sorted(p.name.removesuffix(".yaml")
                   for p in resources.files("pathdiv.analysis.references").iterdir()
                   if p.name.endswith(".yaml"))
    values = value if isinstance(value, list) else [value]
    ok = values and all(v in names for v in values)
    return None if ok else f"one of {', '.join(names)}, or a list of them"


def _budget(value: Any) -> str | None:
    if value == "auto" or (isinstance(value, int) and value >= 1):
        return None
    return "an integer number of MB >= 1, or auto (sized from the plan)"


def _even_k(value: Any) -> str | None:
    return None if value >= 2 and value % 2 == 0 and value <= 58 else "an even integer 2..58"


def _reorder_hold(value: Any) -> str | None:
    return None if 1 <= value <= 1_000_000 else "an integer from 1 to 1000000 (µs)"


def _subflows(value: Any) -> str | None:
    return None if 1 <= value <= 8 else "an integer 1..8"


def _probability(value: Any) -> str | None:
    return None if 0 < value < 1 else "a number between 0 and 1"


def _port(value: Any) -> str | None:
    return None if 1 <= value <= 65535 else "a TCP port 1..65535"


def _at_least_one(value: Any) -> str | None:
    return None if value >= 1 else "an integer >= 1"


def _at_least_256(value: Any) -> str | None:
    return None if value >= 256 else "an integer >= 256"
def _percent(value: Any) -> str | None:
    return None if 0 <= value <= 100 else "a percentage 0..100"


def _fraction(value: Any) -> str | None:
    return None if 0 < value <= 1 else "a fraction of the link rate, > 0 and <= 1"
def _load_fraction(value: Any) -> str | None:
    return None if 0 < value <= 1 else "a fraction of the link rate, 0 < load <= 1"


def _loss(value: Any) -> str | None:
    return None if 0 <= value < 100 else "a percentage 0 <= loss_pct < 100"


# Link condition keys: (type, doc, check). The tiers give them defaults; link overrides
# and `set` events change them per link or per direction (fabric/conditions.py).
CONDITION_KEYS: dict[str, tuple[type | tuple[type, ...], str, Check]] = {
    "bw_mbps": ((int, float), "link rate in Mbit/s (null: unshaped)", _positive),
    "delay_ms": ((int, float), "one-way delay in ms added at each egress (needs netem: "
                 "hosts.kernel: lab)", _non_negative),
    "jitter_ms": ((int, float), "delay variation in ms (netem: uniform within ±jitter_ms, "
                  "may reorder; needs delay_ms >= jitter_ms and hosts.kernel: lab)",
                  _non_negative),
    "loss_pct": ((int, float), "random loss of IPv4 packets in percent, dropped on arrival "
                 "at the receiving end (nftables, any kernel)", _loss),
    "queue_pkts": (int, "drop-tail queue length in packets at each egress", _at_least_one),
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


LINK_KEY_PATTERN = r"^[a-z]+[0-9]+[->][a-z]+[0-9]+$"


DVS = ("throughput_mbps", "goodput_mbps", "fct_s", "utilization")

SCHEMA = Section(
    {
        "name": Leaf(str, "experiment", "experiment name; results go to results/<name>-<time>/"),
        "seed": Leaf(int, 1, "master seed: run order, host designations, ECMP hash seeds"),
        "repetitions": Leaf(int, 1, "repetitions of every factor combination",
                            check=_at_least_one),
        "topology": Section(
            {
                "kind": Leaf(str, "fattree", "topology family", choices=("fattree",)),
                "k": Leaf(int, 4, "fat-tree arity (pods); k=4: 20 switches, 16 hosts",
                          check=_even_k),
                "links": Section(
                    {"host": _link(20), "edge": _link(20), "core": _link(20)},
                    "per tier: host = host-edge, edge = edge-aggregation, "
                    "core = aggregation-core",
                ),
                "link_overrides": MapOf(
                    conditions_section("conditions of one link or one direction", "as its tier"),
                    "link name -> conditions replacing its tier's: 'a1-c1' both directions, "
                    "'a1>c1' only the direction from a1 to c1",
                    key_pattern=LINK_KEY_PATTERN,
                ),
            }
        ),
        "dataplane": Leaf(
            str, "auto", "switch implementation; auto = bmv2 when its tools are found",
            choices=("kernel", "bmv2", "auto"),
        ),
        "switching": Section(
            {
                "mode": Leaf(str, "ecmp", "static: one path per destination; ecmp: per-flow "
                             "hash; spray: per-packet", choices=("static", "ecmp", "spray")),
                "spray": Leaf(str, "random", "per-packet choice when mode is spray",
                              choices=("random", "roundrobin")),
            }
        ),
        "hosts": Section(
            {
                "transport": Leaf(str, "tcp", "transport of every transfer",
                                  choices=("tcp", "mptcp")),
                "subflows": Leaf(int, 4, "MPTCP subflows per connection on the single "
                                 "interface (ndiffports)", check=_subflows),
                "cc": Leaf(str, "cubic", "TCP congestion control (also for MPTCP subflows); "
                           "lia = RFC 6356 coupled control of MPTCP subflows (lab kernel; "
                           "plain TCP runs it as reno)", choices=KNOWN_CCS),
                "kernel": Leaf(str, "host", "host: this machine's kernel; net: the pathdiv lab "
                               "kernel (RB scheduler)", choices=("host", "lab")),
                "scheduler": Leaf(str, "default", "MPTCP packet scheduler "
                                  "(net.mptcp.scheduler)",
                                  choices=("default", "rb", "roundrobin")),
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
                "reorder_hold_us": Leaf(int, 1000, "bound of the reorder hold in µs "
                                        "(hosts.reordering: gro): at least the delay "
                                        "spread of the paths a flow is sprayed over",
                                        check=_reorder_hold),
            }
        ),
        "lab": Section(
            {
                "clock": Leaf(str, "virtual", "clock of the lab kernel (hosts.kernel: net): "
                              "virtual = User-Mode Linux time-travel, CPU work takes no "
                              "time and links are the only bottleneck; real = the wall "
                              "clock (for CPU-cost measures)", choices=("virtual", "real")),
                "memory_mb": Leaf(int, 1536, "memory of the lab kernel in MB (a k=4 run "
                                  "peaks near 500)", check=_at_least_256),
            },
            "how lab-kernel runs execute",
        ),
        "workload": Section(
            {
                "pattern": Leaf(str, "silent", "silent: 1-to-1 pairs take turns; noisy: "
                                "two halves, in each one client fetches from the rest at "
                                "once (partition-aggregate); incast: one client fetches "
                                "from every other host at once; permutation: every host "
                                "fetches from another at once"
                                "; poisson: open-loop arrivals at every host with sizes "
                                "from workload.sizes at workload.load",
                                choices=("silent", "noisy", "incast", "permutation",
                                         "poisson")),
                "flow_types": MapOf(
                    Leaf((str, int), None, "payload size", check=_size_check),
                    "flow type name -> payload size of one transfer",
                    default={"query": "128KB", "short": "500KB", "long": "25MB"},
                ),
                "iterations": Leaf(int, 4, "designation rounds per run (new pairs/groups each)",
                                   check=_at_least_one),
                "requests": Leaf(int, 1, "requests per client per iteration",
                                 check=_at_least_one),
                "timeout_s": Leaf((int, float), 120, "a transfer not done by then fails",
                                  check=_positive),
                "server_port": Leaf(int, 8080, "TCP port of the transfer server on every "
                                    "host", check=_port),
                "load": Leaf((int, float), 0.5, "poisson: offered load per host as a "
                             "fraction of its access link rate", check=_load_fraction),
                "sizes": Leaf(str, "websearch", "poisson: flow-size distribution: websearch "
                              "(DCTCP), datamining (VL2) or the path of a CDF file (lines "
                              "'<bytes> <cumulative probability>')", check=_sizes),
                "max_size": Leaf((str, int), None, "poisson: sizes above this are cut to it "
                                 "(null: no cut)", check=_size_check, nullable=True),
                "duration_s": Leaf((int, float), 10, "poisson: length of the arrival "
                                   "window (iterations are not used)", check=_positive),
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
                                           check=_non_negative),
                        "connections": Leaf(int, 1, "persistent connections per host, each "
                                            "to a random other host", check=_at_least_one),
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
                                 check=_non_negative),
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
        ),
        "capture": Section(
            {
                "enabled": Leaf(bool, True, "capture packet headers on every link"),
                "snaplen": Leaf(int, 96, "bytes kept per packet; 96 holds every header the "
                                "metrics read (Ethernet 14 + IPv4 20 + TCP with options <= 60)",
                                check=_at_least_one),
                "budget_mb": Leaf((int, str), "auto", "MB the captures of one run may "
                                  "write, all links together; auto: what the run's "
                                  "transfers need (payload / MSS x transfers x hops x "
                                  "(snaplen + 16)); each link's file is capped at its own "
                                  "need, and a budget below a run's need is refused at "
                                  "`pathdiv check`", check=_budget),
            }
        ),
        "fidelity": Section(
            {
                "enabled": Leaf(bool, True, "sample host CPU, qdiscs and TCP timeouts during "
                                "each run's traffic and give it a verdict (docs/fidelity.md)"),
                "sample_interval_s": Leaf((int, float), 0.2, "seconds between qdisc samples",
                                          check=_positive),
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
                "min_backlogged_s": Leaf((int, float), 1.0, "seconds a link must be "
                                         "backlogged before its rate is judged",
                                         check=_positive),
                "rto_degraded": Leaf(int, 3, "TCP timeouts beyond the qdisc drops (all hosts) "
                                     "from which a run is degraded", check=_at_least_one),
                "rto_invalid": Leaf(int, 20, "unexplained TCP timeouts from which a run is "
                                    "invalid", check=_at_least_one),
                "max_repeats": Leaf(int, 2, "times an invalid run is repeated (earlier "
                                    "attempts kept in runs/<run_id>/attempt-<n>/)",
                                    check=_non_negative),
            },
            "fidelity monitor and verdict of real-clock runs",
        ),
        "factors": MapOf(
            MapOf(
                MapOf(Leaf((str, int, float, bool, dict), None, "override value, or for "
                           "applies_to {other factor: [levels]}", nullable=True),
                      "dotted config key -> value; applies_to: {other factor: [levels]} "
                      "where this level acts (experiments/config/scope.py)",
                      key_pattern=r"^([a-z_]+(\.[a-z_]+)+|applies_to)$"),
                "level name -> overrides",
            ),
            "factor name -> levels; the plan crosses all factors",
        ),
        "analysis": Section(
            {
                "clusters": Leaf(list, ["condition", "flow_type"], "columns that split the "
                                 "data into test clusters"),
                "ivs": Leaf(list, None, "independent variables: one or two factor names; null: "
                            "the config's factors", nullable=True),
                "dvs": Leaf(list, list(DVS), "dependent variables (metrics.csv columns)"),
                "alpha": Leaf(float, 0.05, "significance level", check=_probability),
                "reference": Leaf((str, list), None, "the published study (or list of "
                                  "studies) this config reproduces: files of "
                                  "analysis/references/ (seed001, seed000); the report "
                                  "puts their figures beside ours", nullable=True,
                                  check=_reference),
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
