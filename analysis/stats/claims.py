"""A published study's claims as data: loading and scoping (pure).

A reference is a YAML file in analysis/references/ (`analysis.reference` names it):

    name, study, source       what it is and the paper it comes from (authors, title,
                              venue, year)
    levels                    {factor: {the study's level name: our level name}}: the
                              study's factor levels; observations at other levels (the RB
                              scheduler in seed 001, say) are left out of its claims. A
                              level we only stand in for is a mapping {ours: our level,
                              stands_in: why it is not the study's mechanism}: every
                              claim naming it is *not comparable* (reported apart, never
                              counted) until the level itself is run
    design                    [{item, value, section}]: what the study fixed
    silent_on                 [{item, note, section}]: what it gives no figure for (never
                              estimated)
    table_iv                  {section, metric, tolerance_points, columns: [switching
                              levels], rows: [{condition, flow_type, pct: [...]}]}: a
                              table of figures, one claim of kind `excess` per cell
    claims                    [{id, section, kind, claim, where, within, compare, metrics,
                              significance, paper_pct, margin_pct, tolerance_pct,
                              not_comparable, caveat}]

A claim's scope: `where` picks the test clusters (a mapping, or a list of mappings any of
which may match; values a level or a list of levels), `within` the observations inside a
cluster ({factor: [levels]}), and each `compare` entry [a, b] two sides, each a mapping
{factor: level} (a side that leaves a factor out pools its levels, as a main effect
does). `kind` says what the paper claims, and so which test judges it
(pathdiv.analysis.stats.verdicts, `TEST_OF_KIND`): better (a beats b: direction),
best (a has the best mean within scope: direction against the runner-up),
no_difference (equivalence), not_worse (non-inferiority: b never significantly beats
a), not_better (non-superiority), figure (`paper_pct`: the paper's percentage
difference of a against b) and excess (a figure of `table_iv`, in points). The optional
`margin_pct` is the equivalence margin the paper states (default: the config's
`analysis.min_effect_pct`); `tolerance_pct` (figure) and `tolerance_points` (table_iv)
a tolerance around the paper's figure; `not_comparable` says why a claim cannot be
judged here; `caveat` what a reader must know beside its verdict. `significance` is what
the paper says about it: stated, not stated, or means only (a direction is judged by a
test either way).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

REFERENCE_DIR = Path(__file__).resolve().parents[1] / "references"
KINDS = ("better", "not_worse", "not_better", "no_difference", "figure", "best", "excess")
TEST_OF_KIND = {"better": "direction", "best": "direction", "no_difference": "equivalence",
                "not_worse": "non-inferiority", "not_better": "non-superiority",
                "figure": "figure", "excess": "figure"}
SIGNIFICANCE = ("stated", "not stated", "means only")

Side = dict[str, str]


class ReferenceError(ValueError):
    """A reference file that is missing or malformed."""


@dataclass(frozen=True)
class Claim:
    id: str
    section: str
    kind: str
    claim: str
    where: tuple[dict[str, tuple[str, ...]], ...]
    within: dict[str, tuple[str, ...]]
    compare: tuple[tuple[Side, Side | None], ...]
    metrics: tuple[str, ...]
    significance: str = "not stated"
    paper_pct: float | None = None
    tolerance: float | None = None  # figure / excess: agreement within this many points
    margin_pct: float | None = None  # equivalence kinds: the paper's margin, % of b's mean
    not_comparable: str = ""  # why our data cannot judge it (a stand-in level, ...)
    caveat: str = ""  # what a reader must know beside the verdict

    @property
    def test(self) -> str:
        """The test that judges the claim (pathdiv.analysis.stats.verdicts)."""
        return TEST_OF_KIND[self.kind]

    def applies_to(self, cluster: Mapping[str, str]) -> bool:
        """Whether the claim speaks about the test cluster `cluster` ({column: level})."""
        return any(all(str(cluster.get(k)) in v for k, v in w.items()) for w in self.where)

    def scope_text(self) -> str:
        parts = [" or ".join(_fmt_where(w) for w in self.where)]
        parts += [f"{k} in {{{', '.join(v)}}}" for k, v in self.within.items()]
        return "; ".join(p for p in parts if p)


def _fmt_where(where: Mapping[str, tuple[str, ...]]) -> str:
    return ", ".join(f"{k}={'|'.join(v)}" for k, v in where.items()) or "every cluster"


@dataclass(frozen=True)
class Reference:
    name: str
    study: str
    source: str
    levels: dict[str, dict[str, str]] = field(default_factory=dict)
    design: list[dict[str, Any]] = field(default_factory=list)
    silent_on: list[dict[str, Any]] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    # {factor: {our level: why it only stands in for the study's level}}
    stand_ins: dict[str, dict[str, str]] = field(default_factory=dict)

    def directions(self) -> list[Claim]:
        """The stated directions (every claim that is not a single figure)."""
        return [c for c in self.claims if c.kind not in ("figure", "excess")]

    def of_kind(self, kind: str) -> list[Claim]:
        return [c for c in self.claims if c.kind == kind]

    def ours(self, factor: str) -> list[str] | None:
        """Our names of the study's levels of `factor` (None: the study lists none)."""
        return list(self.levels[factor].values()) if factor in self.levels else None


def available() -> list[str]:
    """Names of the references shipped in analysis/references/."""
    return sorted(p.stem for p in REFERENCE_DIR.glob("*.yaml"))


def _need(data: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in data:
        raise ReferenceError(f"{where}: key {key!r} missing; expected {key}: ...")
    return data[key]


def _levels(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else (str(value),)


def _side(value: Any, levels: Mapping[str, Mapping[str, str]], at: str) -> Side:
    if not isinstance(value, Mapping) or not value:
        raise ReferenceError(f"{at}: {value!r}; expected a mapping {{factor: level}}")
    out = {}
    for factor, level in value.items():
        names = levels.get(str(factor))
        if names is not None and str(level) not in names:
            raise ReferenceError(f"{at}: {factor}={level} is not one of the study's levels "
                                 f"({', '.join(names)})")
        out[str(factor)] = names[str(level)] if names is not None else str(level)
    return out


def _claim(d: Any, levels: Mapping[str, Mapping[str, str]], at: str) -> Claim:
    if not isinstance(d, Mapping):
        raise ReferenceError(f"{at}: expected a mapping, got {d!r}")
    kind = str(_need(d, "kind", at))
    if kind not in KINDS:
        raise ReferenceError(f"{at}.kind: {kind!r}; choose one of {', '.join(KINDS)}")
    significance = str(d.get("significance", "not stated"))
    if significance not in SIGNIFICANCE:
        raise ReferenceError(f"{at}.significance: {significance!r}; choose one of "
                             f"{', '.join(SIGNIFICANCE)}")
    raw_where = d.get("where") or {}
    wheres = raw_where if isinstance(raw_where, list) else [raw_where]
    where = tuple({str(k): _levels(v) for k, v in (w or {}).items()} for w in wheres)
    within = {}
    for factor, values in (d.get("within") or {}).items():
        names = levels.get(str(factor))
        within[str(factor)] = tuple(names.get(v, v) if names else v for v in _levels(values))
    compare = []
    for i, pair in enumerate(_need(d, "compare", at)):
        if not isinstance(pair, list | tuple) or len(pair) not in (1, 2):
            raise ReferenceError(f"{at}.compare[{i}]: {pair!r}; expected [a, b] (or [a] for "
                                 "kind best)")
        a = _side(pair[0], levels, f"{at}.compare[{i}][0]")
        b = _side(pair[1], levels, f"{at}.compare[{i}][1]") if len(pair) == 2 else None
        if b is None and kind != "best":
            raise ReferenceError(f"{at}.compare[{i}]: kind {kind} compares two sides [a, b]")
        compare.append((a, b))
    paper_pct = d.get("paper_pct")
    if kind == "figure" and paper_pct is None:
        raise ReferenceError(f"{at}: kind figure needs paper_pct (the paper's percentage)")
    margin = _number(d, "margin_pct", at)
    if margin is not None and (kind not in ("no_difference", "not_worse", "not_better")
                               or margin <= 0):
        raise ReferenceError(f"{at}.margin_pct: {margin!r}; a margin > 0 belongs to kinds "
                             "no_difference, not_worse and not_better")
    tolerance = _number(d, "tolerance_pct", at)
    if tolerance is not None and (kind != "figure" or tolerance < 0):
        raise ReferenceError(f"{at}.tolerance_pct: {tolerance!r}; a tolerance >= 0 belongs "
                             "to kind figure")
    return Claim(str(_need(d, "id", at)), str(_need(d, "section", at)), kind,
                 str(_need(d, "claim", at)), where, within, tuple(compare),
                 tuple(str(m) for m in _need(d, "metrics", at)), significance,
                 None if paper_pct is None else float(paper_pct), tolerance, margin,
                 str(d.get("not_comparable") or ""), str(d.get("caveat") or ""))


def _number(d: Mapping[str, Any], key: str, at: str) -> float | None:
    value = d.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReferenceError(f"{at}.{key}: {value!r}; expected a number")
    return float(value)


def _table_claims(table: Any, levels: Mapping[str, Mapping[str, str]]) -> list[Claim]:
    """One `excess` claim per cell of a table_iv section."""
    at = "table_iv"
    columns = [str(c) for c in _need(table, "columns", at)]
    metric = str(table.get("metric", "excess_pct"))
    section = str(table.get("section", "Table IV"))
    tolerance = float(table.get("tolerance_points", 3))
    claims = []
    for i, row in enumerate(_need(table, "rows", at)):
        pct = _need(row, "pct", f"{at}.rows[{i}]")
        if len(pct) != len(columns):
            raise ReferenceError(f"{at}.rows[{i}].pct: {len(pct)} figures for "
                                 f"{len(columns)} columns ({', '.join(columns)})")
        condition, flow = str(row["condition"]), str(row["flow_type"])
        for column, value in zip(columns, pct, strict=True):
            side = _side({"switching": column}, levels, f"{at}.columns")
            claims.append(Claim(
                f"table-iv-{condition}-{flow}-{column}", section, "excess",
                f"{condition} {flow} flows, {column}: {float(value):g} % of traffic beyond "
                "the payload", ({"condition": (condition,), "flow_type": (flow,)},), {},
                ((side, None),), (metric,), "not stated", float(value), tolerance))
    return claims


def _levels_and_stand_ins(data: Any, where: str) -> tuple[dict[str, dict[str, str]],
                                                          dict[str, dict[str, str]]]:
    """`levels` as {factor: {study's: ours}}, and the levels we only stand in for."""
    levels: dict[str, dict[str, str]] = {}
    stand_ins: dict[str, dict[str, str]] = {}
    for factor, names in (data or {}).items():
        levels[str(factor)] = {}
        for study_level, ours in (names or {}).items():
            at = f"{where}: levels.{factor}.{study_level}"
            if isinstance(ours, Mapping):
                if "ours" not in ours or not ours.get("stands_in"):
                    raise ReferenceError(f"{at}: {dict(ours)!r}; expected our level name or "
                                         "{ours: <level>, stands_in: <why it is not the "
                                         "study's mechanism>}")
                levels[str(factor)][str(study_level)] = str(ours["ours"])
                stand_ins.setdefault(str(factor), {})[str(ours["ours"])] = str(
                    ours["stands_in"])
            else:
                levels[str(factor)][str(study_level)] = str(ours)
    return levels, stand_ins


def _with_stand_ins(claim: Claim, stand_ins: Mapping[str, Mapping[str, str]]) -> Claim:
    """`claim`, not comparable when one of its sides or its scope names a stand-in."""
    if claim.not_comparable:
        return claim
    named = [side for pair in claim.compare for side in pair if side]
    used = {(f, lv) for side in named for f, lv in side.items()}
    used |= {(f, lv) for f, lvs in claim.within.items() for lv in lvs}
    reasons = [stand_ins[f][lv] for f, lv in sorted(used) if lv in stand_ins.get(f, {})]
    if not reasons:
        return claim
    return replace(claim, not_comparable="; ".join(dict.fromkeys(reasons)))


def parse_reference(data: Any, where: str = "reference") -> Reference:
    if not isinstance(data, Mapping):
        raise ReferenceError(f"{where}: expected a mapping, got {data!r}")
    levels, stand_ins = _levels_and_stand_ins(data.get("levels"), where)
    claims = [_claim(d, levels, f"{where}: claims[{i}]")
              for i, d in enumerate(data.get("claims") or [])]
    if data.get("table_iv"):
        claims = _table_claims(data["table_iv"], levels) + claims
    claims = [_with_stand_ins(c, stand_ins) for c in claims]
    ids = [c.id for c in claims]
    doubled = sorted({i for i in ids if ids.count(i) > 1})
    if doubled:
        raise ReferenceError(f"{where}: claim id(s) {', '.join(doubled)} used twice")
    return Reference(str(_need(data, "name", where)), str(_need(data, "study", where)),
                     str(_need(data, "source", where)), levels,
                     list(data.get("design") or []), list(data.get("silent_on") or []),
                     claims, stand_ins)


def load_reference(name: str) -> Reference:
    """A shipped reference by name (`seed001`) or a YAML file by path."""
    path = Path(name) if name.endswith(".yaml") else REFERENCE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ReferenceError(f"analysis.reference: {name!r} is not a reference; choose one "
                             f"of {', '.join(available())} or give a .yaml path")
    return parse_reference(yaml.safe_load(path.read_text()), str(path))


def in_study(reference: Reference, data: pd.DataFrame) -> pd.DataFrame:
    """The observations at the study's own factor levels (columns it does not list are
    not restricted)."""
    keep = pd.Series(True, index=data.index)
    for factor, names in reference.levels.items():
        if factor in data.columns:
            keep &= data[factor].astype(str).isin(list(names.values()))
    return data[keep]


def scoped(claim: Claim, data: pd.DataFrame) -> pd.DataFrame:
    """The observations of one cluster that the claim's `within` keeps; a factor the data
    lacks keeps none (a claim about another experiment's factor, as one reference's
    figures spread over several configs, is not measured here)."""
    keep = pd.Series(True, index=data.index)
    for factor, levels in claim.within.items():
        if factor not in data.columns:
            return data.iloc[0:0]
        keep &= data[factor].astype(str).isin(levels)
    return data[keep]


def side_rows(data: pd.DataFrame, side: Side) -> pd.DataFrame:
    """The observations of one side ({factor: level}); a missing column matches none."""
    keep = pd.Series(True, index=data.index)
    for factor, level in side.items():
        if factor not in data.columns:
            return data.iloc[0:0]
        keep &= data[factor].astype(str) == level
    return data[keep]


def side_label(side: Side | None) -> str:
    return "" if side is None else "/".join(side.values())
