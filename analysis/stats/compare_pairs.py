"""The comparisons of interest as the config writes them (`analysis.compare`): one parser.

An entry is a pair of levels of one factor, a against b, optionally with the other
factors' levels the comparison holds:

    [ps-mptcp, ecmp-mptcp]
    [ps-mptcp, ecmp-mptcp, {host: vanilla}]           # one level held
    [ps-mptcp, ecmp-mptcp, {host: [vanilla, rb]}]     # several

`compare_pair` turns one into (a, b, held), held as ((factor, (levels, ...)), ...), and
accepts that parsed form again (a spec rebuilt from itself); `compare_problem` says what
is wrong with a whole list, for `pathdiv check` (experiments/config/checks.py) and for
`AnalysisSpec` (stats/spec.py) alike. Whether the levels exist, and belong to one
factor, depends on the config's factors: experiments/config/cross.py checks that.
Standard library only: `pathdiv check` reads it without the statistics' imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The other factors' levels a comparison of interest holds: ((factor, (levels, ...)), ...).
Held = tuple[tuple[str, tuple[str, ...]], ...]

MAX_PAIRS = 20  # entries of analysis.compare
MAX_HELD = 8  # factors one entry holds
MAX_LEVELS = 64  # levels of one held factor
MAX_NAME = 64  # characters of a level or factor name

ALLOWED = (f"a list of at most {MAX_PAIRS} pairs [a, b] of level names of one factor, "
           "e.g. [ps-mptcp, ecmp-mptcp], each optionally with the other factors' levels "
           "it holds: [a, b, {factor: level or [levels]}], e.g. [ps-mptcp, ecmp-mptcp, "
           "{host: vanilla}]")


def _name(x: Any) -> bool:
    return isinstance(x, str) and 0 < len(x) <= MAX_NAME


def _held(x: Any) -> Held | None:
    """{factor: level or [levels]} (or its parsed form) as Held; None if it is neither."""
    if isinstance(x, Mapping):
        if not x:  # the config's {} holds nothing: leave it out
            return None
        items = list(x.items())
    elif isinstance(x, tuple) and all(isinstance(i, tuple) and len(i) == 2 for i in x):
        items = list(x)  # the parsed form (YAML gives lists, never tuples)
    else:
        return None
    out = []
    for factor, value in items:
        levels = list(value) if isinstance(value, list | tuple) else [value]
        if not (_name(factor) and 0 < len(levels) <= MAX_LEVELS
                and all(_name(level) for level in levels)):
            return None
        out.append((factor, tuple(levels)))
    return tuple(out) if len(out) <= MAX_HELD else None


def compare_pair(pair: Any) -> tuple[str, str, Held]:
    """One entry of `analysis.compare` as (a, b, held); ValueError when it is not one."""
    if isinstance(pair, list | tuple) and len(pair) in (2, 3) and all(map(_name, pair[:2])):
        held = () if len(pair) == 2 else _held(pair[2])
        if held is not None:
            return pair[0], pair[1], held
    raise ValueError(f"{pair!r} is not a pair [a, b] or [a, b, {{factor: level or [levels]}}]")


def compare_problem(value: Any) -> str | None:
    """None when `value` is a valid `analysis.compare` list; else what is allowed, and
    which entry is not (the text after "expected" in an error naming key and value)."""
    if not isinstance(value, list | tuple) or len(value) > MAX_PAIRS:
        return ALLOWED
    for i, pair in enumerate(value):
        try:
            compare_pair(pair)
        except ValueError:
            return f"{ALLOWED}; entry {i}, {pair!r}, is not one"
    return None


def compare_pairs(value: Any, key: str = "analysis.compare") -> tuple[tuple[str, str, Held],
                                                                      ...]:
    """Every entry of `value` parsed; ValueError naming `key`, the value and what is
    allowed."""
    problem = compare_problem(value)
    if problem is not None:
        raise ValueError(f"{key}: {value!r} is not allowed; expected {problem}")
    return tuple(compare_pair(pair) for pair in value)
