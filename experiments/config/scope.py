"""Factor levels that apply on some levels of another factor only (pure).

A level may say where it acts:

    factors:
      switching: {static-tcp: {...}, ..., ecmp-mptcp: {...}, ps-mptcp: {...}}
      host:
        vanilla: {hosts.scheduler: default}
        rb: {hosts.scheduler: rb, applies_to: {switching: [ecmp-mptcp, ps-mptcp]}}

The RB scheduler changes nothing on a TCP level, so `static-tcp` x `rb` would run the
same configuration as `static-tcp` x `vanilla` under a second name. With `applies_to`
the plan has no such cell, and the analysis tests each factor where it acts:

- the test of `host` (and of the interaction) uses the switching levels every host level
  applies to (ecmp-mptcp, ps-mptcp) with every host level: a two-way MANOVA;
- the test of `switching` uses every switching level with the host levels that apply
  everywhere (vanilla): a one-way MANOVA.

`analysis_tests` gives these tests, each with the levels it uses; without `applies_to`
there is one test, the full two-way design, as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

APPLIES_TO = "applies_to"

# factor -> level -> {other factor: levels where this level acts}
Scopes = dict[str, dict[str, dict[str, tuple[str, ...]]]]


def level_overrides(level: Mapping[str, Any]) -> dict[str, Any]:
    """The config keys a level sets (everything but `applies_to`)."""
    return {k: v for k, v in level.items() if k != APPLIES_TO}


def scopes_of(factors: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> Scopes:
    """Every level's `applies_to`, as tuples (levels without one are left out)."""
    out: Scopes = {}
    for factor, levels in factors.items():
        for level, body in levels.items():
            where = (body or {}).get(APPLIES_TO)
            if isinstance(where, Mapping):
                out.setdefault(factor, {})[level] = {
                    str(f): tuple(str(v) for v in (vs if isinstance(vs, list | tuple)
                                                   else [vs]))
                    for f, vs in where.items()}
    return out


def scope_problems(factors: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[str]:
    """What is wrong with the `applies_to` entries (empty when fine)."""
    problems = []
    for factor, levels in factors.items():
        for level, body in levels.items():
            if APPLIES_TO not in (body or {}):
                continue
            where = body[APPLIES_TO]
            at = f"factors.{factor}.{level}.{APPLIES_TO}"
            if not isinstance(where, Mapping) or not where:
                problems.append(f"{at}: {where!r}; expected {{other factor: [levels]}}, e.g. "
                                "{switching: [ecmp-mptcp, ps-mptcp]}")
                continue
            for other, values in where.items():
                values = values if isinstance(values, list | tuple) else [values]
                if other == factor or other not in factors:
                    others = [f for f in factors if f != factor]
                    problems.append(f"{at}.{other}: not another factor of this config; "
                                    f"choose from {', '.join(others) or 'none'}")
                    continue
                bad = [str(v) for v in values if str(v) not in factors[other]]
                if bad or not values:
                    problems.append(f"{at}.{other}: {bad or values!r} not level(s) of "
                                    f"{other}; its levels: {', '.join(factors[other])}")
    if problems:
        return problems
    scopes = scopes_of(factors)
    for factor, scoped in scopes.items():
        if len(scoped) == len(factors[factor]):
            problems.append(f"factors.{factor}: every level has {APPLIES_TO}; at least one "
                            "level must apply everywhere, so every other level has a "
                            f"{factor} level to run with")
    return problems


def applies(combo: Mapping[str, str], scopes: Scopes) -> bool:
    """Whether every level of a combination acts together with the others."""
    for factor, level in combo.items():
        for other, allowed in scopes.get(factor, {}).get(level, {}).items():
            if other in combo and combo[other] not in allowed:
                return False
    return True


@dataclass(frozen=True)
class Test:
    """One MANOVA over a subset of the levels: which factors it compares (`ivs`), which
    levels of every factor it uses, and the effects it is the test of (`effects`)."""

    ivs: tuple[str, ...]
    levels: dict[str, tuple[str, ...]]
    effects: tuple[str, ...]

    def describe(self) -> str:
        used = "; ".join(f"{f} in {{{', '.join(v)}}}" for f, v in self.levels.items())
        return f"test of {', '.join(self.effects)} on {used}"


def analysis_tests(levels: Mapping[str, Sequence[str]], ivs: Sequence[str],
                   scopes: Scopes) -> list[Test]:
    """The tests of a design whose levels may apply on some levels only (module doc).

    `levels` holds every factor's levels (in the config's order)."""
    ivs = tuple(ivs)
    full = {f: tuple(levels[f]) for f in ivs}
    if len(ivs) != 2 or not any(scopes.get(f) for f in ivs):
        return [Test(ivs, full, (*ivs, ":".join(ivs)) if len(ivs) == 2 else ivs)]
    a, b = ivs

    def ok(x: str, y: str) -> bool:
        return applies({a: x, b: y}, scopes)

    tests: list[Test] = []
    # each factor over all its levels, the other held at the levels that act with all
    for mine, other in ((a, b), (b, a)):
        kept = tuple(o for o in full[other]
                     if all(applies({mine: m, other: o}, scopes) for m in full[mine]))
        if not kept:
            continue
        ivs_here = ivs if len(kept) > 1 else (mine,)
        tests.append(Test(ivs_here, {a: full[a] if mine == a else kept,
                                     b: full[b] if mine == b else kept}, (mine,)))
    # the interaction: the largest block where every pair of levels acts together
    a_first = tuple(x for x in full[a] if all(ok(x, y) for y in full[b]))
    b_then = tuple(y for y in full[b] if all(ok(x, y) for x in a_first))
    b_first = tuple(y for y in full[b] if all(ok(x, y) for x in full[a]))
    a_then = tuple(x for x in full[a] if all(ok(x, y) for y in b_first))
    blocks = [(len(xs) * len(ys), xs, ys) for xs, ys in ((a_first, b_then), (a_then, b_first))
              if len(xs) > 1 and len(ys) > 1]
    if blocks:
        _, a_block, b_block = max(blocks, key=lambda t: t[0])
        tests.append(Test(ivs, {a: a_block, b: b_block}, (":".join(ivs),)))
    return _fold(tests)


def _fold(tests: list[Test]) -> list[Test]:
    """Join tests over the same levels into one (their effects together)."""
    out: list[Test] = []
    for t in tests:
        same = next((o for o in out if o.levels == t.levels and o.ivs == t.ivs), None)
        if same is None:
            out.append(t)
        else:
            out[out.index(same)] = Test(same.ivs, same.levels, (*same.effects, *t.effects))
    return out


def describe_tests(tests: Sequence[Test]) -> list[str]:
    """One line per test, for `pathdiv check` and the report."""
    return [f"{'two' if len(t.ivs) == 2 else 'one'}-way MANOVA, {t.describe()}"
            for t in tests]
