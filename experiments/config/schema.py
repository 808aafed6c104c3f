"""The configuration schema as data: every key with its type, unit, default and doc.

`pathdiv.experiments.config.load` validates files and `--set` overrides against this tree, and the
README's key table is generated from it (`pathdiv keys`), so the three cannot drift.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
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

    fields: dict[str, Leaf | Section | MapOf]
    doc: str = ""


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


def _positive(value: Any) -> str | None:
    return None if value > 0 else "a number > 0"


def _non_negative(value: Any) -> str | None:
    return None if value >= 0 else "a number >= 0"


def _even_k(value: Any) -> str | None:
    return None if value >= 2 and value % 2 == 0 and value <= 58 else "an even integer 2..58"


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


def _link(bw_default: float | None) -> Section:
    return Section(
        {
            "bw_mbps": Leaf(
                (int, float), bw_default, "link rate in Mbit/s (null: unshaped)",
                check=_positive, nullable=True,
            ),
            "delay_ms": Leaf(
                (int, float), 0, "one-way delay in ms added at each egress (needs netem)",
                check=_non_negative,
            ),
            "queue_pkts": Leaf(int, 100, "drop-tail queue length in packets at each egress",
                               check=_at_least_one),
        },
        "shaping of one link tier",
    )


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
                "cc": Leaf(str, "cubic", "TCP congestion control (also for MPTCP subflows)",
                           choices=KNOWN_CCS),
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
                                "fetches from another at once",
                                choices=("silent", "noisy", "incast", "permutation")),
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
            }
        ),
        "capture": Section(
            {
                "enabled": Leaf(bool, True, "capture packet headers on every link"),
                "snaplen": Leaf(int, 160, "bytes kept per packet (IP+TCP+MPTCP options)",
                                check=_at_least_one),
                "budget_mb": Leaf(int, 2000, "capture size limit per run, all links together",
                                  check=_at_least_one),
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
                MapOf(Leaf((str, int, float, bool), None, "override value", nullable=True),
                      "dotted config key -> value", key_pattern=r"^[a-z_]+(\.[a-z_]+)+$"),
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
            }
        ),
    }
)


def iter_leaves(
    node: Leaf | Section | MapOf = SCHEMA, prefix: str = ""
) -> list[tuple[str, Leaf | MapOf]]:
    """(dotted key, leaf) for every documented key; map values are shown as <name>."""
    out: list[tuple[str, Leaf | MapOf]] = []
    if isinstance(node, Section):
        for key, child in node.fields.items():
            out += iter_leaves(child, f"{prefix}.{key}" if prefix else key)
    elif isinstance(node, MapOf):
        out.append((prefix, node))
    else:
        out.append((prefix, node))
    return out
