"""What a config's values may be: sizes, ranges, names, and every limit the schema puts
on a value (pure). The schema (schema.py) names these checks beside its keys; a check
returns None for a good value, else what is allowed.
"""

from __future__ import annotations

import math
import re
from importlib import resources
from typing import Any

from pathdiv.analysis.stats.compare_pairs import compare_problem
from pathdiv.kernels.abilities import JUGGLER_MAX_FLOWS

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


def size_check(value: Any) -> str | None:
    try:
        size = parse_size(value)
    except (ValueError, OverflowError):
        return "a positive size such as 10KB, 500KB, 25MB or 1MiB (KB = 1000 bytes)"
    if size > MAX_SIZE_BYTES:
        return "a size of at most 1GB"
    return None


size_check.allowed = "1B..1GB"  # type: ignore[attr-defined]


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


def sizes(value: Any) -> str | None:
    if value in SIZE_DISTRIBUTIONS or str(value).endswith((".txt", ".cdf", ".csv")):
        return None
    return "websearch, datamining or a CDF file path ending in .txt, .cdf or .csv"


NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def plain_name_problem(value: Any) -> str | None:
    """`name` becomes a folder (results/<name>-<time>/) and a Slurm job name."""
    if NAME_RE.fullmatch(value) and ".." not in value:
        return None
    return ("a plain name of 1-64 letters, digits, '_', '-', '.', starting with a letter "
            "or digit, without '..' (it becomes a folder and a Slurm job name)")


plain_name_problem.allowed = "[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"  # type: ignore[attr-defined]


def names(value: Any) -> str | None:
    ok = all(isinstance(v, str) and 0 < len(v) <= 64 for v in value) and len(value) <= 20
    return None if ok else "a list of at most 20 names (strings)"


def reference(value: Any) -> str | None:
    names = sorted(p.name.removesuffix(".yaml")
                   for p in resources.files("pathdiv.analysis.references").iterdir()
                   if p.name.endswith(".yaml"))
    values = value if isinstance(value, list) else [value]
    ok = values and all(v in names for v in values)
    return None if ok else f"one of {', '.join(names)}, or a list of them"


def pairs(value: Any) -> str | None:
    """analysis.compare: the one parser's verdict (analysis/stats/compare_pairs.py)."""
    return compare_problem(value)


MAX_BUDGET_MB = 50_000  # captures of one run: 50 GB


def budget(value: Any) -> str | None:
    if value == "auto" or (isinstance(value, int) and 1 <= value <= MAX_BUDGET_MB):
        return None
    return f"an integer number of MB from 1 to {MAX_BUDGET_MB}, or auto (sized from the plan)"


budget.allowed = f"1..{MAX_BUDGET_MB} MB or auto"  # type: ignore[attr-defined]

MAX_K = 16  # k=16: 320 switches, 1,024 hosts, 3,072 links (the virtual clock: plan/memory.py)


def even_k(value: Any) -> str | None:
    ok = 2 <= value <= MAX_K and value % 2 == 0
    return None if ok else f"an even integer 2..{MAX_K}"


even_k.allowed = f"2, 4, ... {MAX_K}"  # type: ignore[attr-defined]


def reorder_hold(value: Any) -> str | None:
    return None if 1 <= value <= 1_000_000 else "an integer from 1 to 1000000 (µs)"


reorder_hold.allowed = "1..1000000 µs"  # type: ignore[attr-defined]


def juggler_timeout(value: Any) -> str | None:
    return None if 0 <= value <= 1_000_000 else "an integer from 0 to 1000000 (µs)"


juggler_timeout.allowed = "0..1000000 µs"  # type: ignore[attr-defined]


def juggler_flows(value: Any) -> str | None:
    ok = 1 <= value <= JUGGLER_MAX_FLOWS
    return None if ok else f"an integer from 1 to {JUGGLER_MAX_FLOWS} (flows)"


juggler_flows.allowed = f"1..{JUGGLER_MAX_FLOWS} flows"  # type: ignore[attr-defined]


ECN_THRESHOLD_MAX = 1000  # packets; deeper than any queue a k=4 lab link is given


def ecn_threshold(value: Any) -> str | None:
    return (None if value is None or 1 <= value <= ECN_THRESHOLD_MAX
            else f"null (no marking) or an integer from 1 to {ECN_THRESHOLD_MAX} (packets)")


def watts(value: Any) -> str | None:
    ok = isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value <= 1000
    return None if ok else "a number of watts from 0 to 1000"


watts.allowed = "0..1000 W"  # type: ignore[attr-defined]


def mptcp_d_alpha(value: Any) -> str | None:
    return None if 1 < value <= 10 else "a number above 1 and at most 10"


def mptcp_d_beta(value: Any) -> str | None:
    return None if 0 < value <= 1 else "a number above 0 and at most 1"


def subflows(value: Any) -> str | None:
    return None if 1 <= value <= 8 else "an integer 1..8"


subflows.allowed = "1..8"  # type: ignore[attr-defined]


def probability(value: Any) -> str | None:
    return None if 0 < value < 1 else "a number between 0 and 1"


def port(value: Any) -> str | None:
    return None if 1 <= value <= 65535 else "a TCP port 1..65535"


port.allowed = "1..65535"  # type: ignore[attr-defined]

# Upper bounds (see Between); each shows in `pathdiv keys`.
MAX_REPETITIONS = 1000
MAX_RUNS = 1000  # runs of one plan (repetitions x factor levels x flow types): days of emulation
MAX_ITERATIONS = 1000
MAX_REQUESTS = 100
# Transfers (or open-loop arrivals) of one run, and of the runs `pathdiv check` draws
# for one plan: products of the bounds above (iterations x requests x hosts) would reach
# 12.8 million per run on a k=8 fat tree; each is bounded in closed form first
MAX_TRANSFERS = 100_000
MAX_PLAN_TRANSFERS = 500_000  # 100 times the largest shipped plan (seed000: ~4400)
MAX_SECONDS = 3600.0  # one timeout, one arrival window, the time of one event
MAX_QUEUE_PKTS = 100_000
MAX_LAB_MEMORY_MB = 22_528  # of 24 GB, leaving the host room (a k=16 network: plan/memory.py)
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

repetition_count = Between(1, MAX_REPETITIONS, integer=True)


def repetitions(value: Any) -> str | None:
    """A whole number, or {flow type: whole number} (checked against the flow types with
    the other keys, config/cross.py)."""
    if isinstance(value, dict):
        ok = value and len(value) <= MAX_FLOW_TYPES and all(
            isinstance(k, str) and isinstance(n, int) and not isinstance(n, bool)
            and repetition_count(n) is None for k, n in value.items())
        return None if ok else (f"{{flow type: {repetition_count.want}}}, e.g. "
                                "{query: 10, short: 10, long: 2}")
    return repetition_count(value)


repetitions.allowed = (  # type: ignore[attr-defined]
    f"{repetition_count.allowed}, or {{flow type: {repetition_count.allowed}}}")
iterations = Between(1, MAX_ITERATIONS, integer=True)
requests = Between(1, MAX_REQUESTS, integer=True)
connections = Between(1, MAX_CONNECTIONS, integer=True)
rtos = Between(1, MAX_RTOS, integer=True)
max_repeats = Between(0, MAX_REPEATS, integer=True)
seconds = Between(0, MAX_SECONDS, "s", low_open=True)
at_s = Between(0, MAX_SECONDS, "s")
queue = Between(1, MAX_QUEUE_PKTS, "packets", integer=True)
lab_memory_mb = Between(256, MAX_LAB_MEMORY_MB, "MB", integer=True)


def lab_memory(value: Any) -> str | None:
    if value == "auto" or (isinstance(value, int) and lab_memory_mb(value) is None):
        return None
    return f"auto or {lab_memory_mb.want}"


lab_memory.allowed = f"auto or {lab_memory_mb.allowed}"  # type: ignore[attr-defined]
own_boot_kb = Between(0, MAX_SIZE_BYTES // 1000, "KB", integer=True)
snaplen = Between(64, MAX_SNAPLEN, "bytes", integer=True)
sample_interval = Between(0.05, 60, "s")
cc_trace_ms = Between(0, 10_000, "ms")
measure_s = Between(0, MAX_SECONDS, "s")
min_backlogged = Between(0, 600, "s", low_open=True)
bw = Between(0, MAX_BW_MBPS, "Mbit/s", low_open=True)
delay = Between(0, MAX_DELAY_MS, "ms")
rpc_rate = Between(0, MAX_RPC_RATE, "requests/s")
seed = Between(0, MAX_SEED, integer=True)
def percent(value: Any) -> str | None:
    return None if 0 <= value <= 100 else "a percentage 0..100"


percent.allowed = "0..100 %"  # type: ignore[attr-defined]


def fraction(value: Any) -> str | None:
    return None if 0 < value <= 1 else "a fraction of the link rate, > 0 and <= 1"


fraction.allowed = "> 0 and <= 1"  # type: ignore[attr-defined]
def load_fraction(value: Any) -> str | None:
    return None if 0 < value <= 1 else "a fraction of the link rate, 0 < load <= 1"


load_fraction.allowed = "> 0 and <= 1"  # type: ignore[attr-defined]


def loss(value: Any) -> str | None:
    return None if 0 <= value < 100 else "a percentage 0 <= loss_pct < 100"


loss.allowed = ">= 0 and < 100 %"  # type: ignore[attr-defined]
