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


def _subflows(value: Any) -> str | None:
    return None if 1 <= value <= 8 else "an integer 1..8"


def _probability(value: Any) -> str | None:
    return None if 0 < value < 1 else "a number between 0 and 1"


def _port(value: Any) -> str | None:
    return None if 1 <= value <= 65535 else "a TCP port 1..65535"


def _at_least_one(value: Any) -> str | None:
    return None if value >= 1 else "an integer >= 1"


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
                "kernel": Leaf(str, "host", "host: this machine's kernel; lab: the pathdiv lab "
                               "kernel (RB scheduler)", choices=("host", "lab")),
                "scheduler": Leaf(str, "default", "MPTCP packet scheduler "
                                  "(net.mptcp.scheduler)",
                                  choices=("default", "rb", "roundrobin")),
            }
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
                "designations": Leaf(str, "per_run", "per_run: every run draws its own "
                                     "client/server designations from its seed; "
                                     "per_repetition: every factor level of a repetition "
                                     "(and flow type) gets the same draws, so the levels "
                                     "are compared paired",
                                     choices=("per_run", "per_repetition")),
            }
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
                "reference": Leaf((str, list), None, "the published study (or list of "
                                  "studies) this config reproduces: files of "
                                  "analysis/references/ (seed001, seed000); the report "
                                  "puts their figures beside ours", nullable=True,
                                  check=_reference),
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
