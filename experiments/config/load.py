"""Load, validate and override pathdiv configurations. Pure: no side effects.

A config is YAML read with `yaml.safe_load`, checked against `schema.SCHEMA`
and returned as a `Config`: the resolved mapping (every default filled in) plus typed
accessors. Every problem is reported at once, each naming the key, the bad value and
what is allowed, and nothing is started.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pathdiv.analysis.metrics.columns import DEPENDENT_VARIABLES
from pathdiv.experiments.config.schema import (
    SCHEMA,
    SIZE_DISTRIBUTIONS,
    Leaf,
    ListOf,
    MapOf,
    Section,
    parse_size,
)
from pathdiv.experiments.config.scope import APPLIES_TO, level_overrides, scope_problems
from pathdiv.experiments.fidelity.verdict import threshold_problems
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.model import LinkParams, Tier


class ConfigError(ValueError):
    """One or more configuration problems; `problems` lists them one per line."""

    def __init__(self, problems: list[str], source: str = "config") -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{source}: {len(problems)} problem(s), nothing was started:\n{lines}")


def _type_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {int: "integer", float: "number", str: "string", bool: "true/false", list: "list"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _is_kind(value: Any, kind: type | tuple[type, ...]) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        return False  # YAML's true is not an integer here
    if isinstance(value, int) and float in kinds:
        return True
    return isinstance(value, kinds)


def _validate(node: Leaf | Section | MapOf | ListOf, value: Any, key: str,
              problems: list[str]) -> Any:
    """Return the value with defaults filled; append problems for bad values."""
    if isinstance(node, ListOf):
        if value is None:
            return []
        if not isinstance(value, list):
            problems.append(f"{key}: expected a list, got {value!r}")
            return []
        return [_validate(node.item, item, f"{key}[{i}]", problems)
                for i, item in enumerate(value)]
    if isinstance(node, Leaf):
        if value is None:
            if node.nullable:
                return None
            problems.append(f"{key}: null is not allowed; expected {_type_name(node.kind)}")
            return node.default
        if not _is_kind(value, node.kind):
            problems.append(
                f"{key}: {value!r} is a {type(value).__name__}; expected {_type_name(node.kind)}"
            )
            return node.default
        if node.choices is not None and value not in node.choices:
            allowed = ", ".join(map(str, node.choices))
            problems.append(f"{key}: {value!r} is not allowed; choose one of {allowed}")
            return node.default
        if node.check is not None:
            want = node.check(value)
            if want is not None:
                problems.append(f"{key}: {value!r} is not allowed; expected {want}")
                return node.default
        return value
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        problems.append(f"{key or 'config'}: expected a mapping, got {value!r}")
        return {}
    if isinstance(node, MapOf):
        source = value or copy.deepcopy(node.default)
        out: dict[str, Any] = {}
        for name, child in source.items():
            sub = f"{key}.{name}"
            if not isinstance(name, str) or not re.match(node.key_pattern, name):
                problems.append(f"{sub}: the name {name!r} is not allowed; use letters, digits, "
                                f"'_', '-' (pattern {node.key_pattern})")
                continue
            out[name] = _validate(node.value, child, sub, problems)
        return out
    out = {}
    for name in value:
        if name not in node.fields:
            valid = ", ".join(node.fields)
            where = f"{key}.{name}" if key else str(name)
            problems.append(f"{where}: unknown key; valid keys here are {valid}")
    for name, child in node.fields.items():
        sub = f"{key}.{name}" if key else name
        present = value.get(name, None if not isinstance(child, Leaf) else child.default)
        if isinstance(child, Leaf) and name not in value:
            out[name] = copy.deepcopy(child.default)
        else:
            out[name] = _validate(child, present, sub, problems)
    return out


def _schema_at(dotted: str) -> Leaf | Section | MapOf | ListOf | None:
    node: Leaf | Section | MapOf | ListOf = SCHEMA
    for part in dotted.split("."):
        if isinstance(node, Section) and part in node.fields:
            node = node.fields[part]
        elif isinstance(node, MapOf):
            node = node.value
        else:
            return None
    return node


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    """data['a']['b'] = value for 'a.b', creating mappings on the way."""
    parts = dotted.split(".")
    cur = data
    for part in parts[:-1]:
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[part] = nxt
        cur = nxt
    cur[parts[-1]] = value


def get_dotted(data: Mapping[str, Any], dotted: str) -> Any:
    cur: Any = data
    for part in dotted.split("."):
        cur = cur[part]
    return cur


def parse_override(text: str) -> tuple[str, Any]:
    """'switching.mode=spray' -> ('switching.mode', 'spray'); the value is YAML."""
    if "=" not in text:
        raise ConfigError([f"--set {text!r}: expected KEY=VALUE, e.g. switching.mode=spray"])
    key, raw = text.split("=", 1)
    key = key.strip()
    if _schema_at(key) is None:
        raise ConfigError([f"--set {key}: unknown key; see `pathdiv keys` for the valid keys"])
    return key, yaml.safe_load(raw) if raw.strip() else None


def apply_overrides(raw: Mapping[str, Any], overrides: Iterable[tuple[str, Any]]) -> dict:
    data = copy.deepcopy(dict(raw))
    for key, value in overrides:
        set_dotted(data, key, value)
    return data


@dataclass(frozen=True)
class Config:
    """A validated configuration: `data` is the resolved mapping (all defaults filled)."""

    data: dict[str, Any]
    source: str = "config"

    # typed accessors --------------------------------------------------------------
    @property
    def name(self) -> str:
        return str(self.data["name"])

    @property
    def seed(self) -> int:
        return int(self.data["seed"])

    @property
    def k(self) -> int:
        return int(self.data["topology"]["k"])

    @property
    def dataplane(self) -> str:
        return str(self.data["dataplane"])

    @property
    def mode(self) -> str:
        return str(self.data["switching"]["mode"])

    @property
    def spray(self) -> str:
        return str(self.data["switching"]["spray"])

    @property
    def transport(self) -> str:
        return str(self.data["hosts"]["transport"])

    @property
    def subflows(self) -> int:
        """Subflows per connection actually used: 1 for TCP."""
        return int(self.data["hosts"]["subflows"]) if self.transport == "mptcp" else 1

    @property
    def cc(self) -> str:
        return str(self.data["hosts"]["cc"])

    @property
    def scheduler(self) -> str:
        return str(self.data["hosts"]["scheduler"])

    @property
    def reordering(self) -> str:
        return str(self.data["hosts"]["reordering"])

    @property
    def reorder_hold_us(self) -> int:
        return int(self.data["hosts"]["reorder_hold_us"])

    @property
    def subflow_paths(self) -> str:
        return str(self.data["hosts"]["subflow_paths"])

    @property
    def host_kernel(self) -> str:
        return str(self.data["hosts"]["kernel"])

    def link_params(self) -> dict[Tier, LinkParams]:
        links = self.data["topology"]["links"]
        return {
            Tier(tier): LinkParams(
                bw_mbps=None if p["bw_mbps"] is None else float(p["bw_mbps"]),
                delay_ms=float(p["delay_ms"]),
                queue_pkts=int(p["queue_pkts"]),
                jitter_ms=float(p["jitter_ms"]),
                loss_pct=float(p["loss_pct"]),
            )
            for tier, p in links.items()
        }

    def conditions(self) -> Any:
        """Every link direction's conditions (`pathdiv.experiments.fabric.conditions`)."""
        from pathdiv.experiments.fabric.conditions import resolve

        return resolve(self.topology(), self.data["topology"]["link_overrides"])

    def flow_sizes(self) -> dict[str, int]:
        return {n: parse_size(v) for n, v in self.data["workload"]["flow_types"].items()}

    def topology(self) -> FatTree:
        """The one topology object every stage reads."""
        return FatTree(self.k, self.link_params(), aliases_per_host=self.subflows - 1)

    def with_overrides(self, overrides: Iterable[tuple[str, Any]]) -> Config:
        return validate(apply_overrides(self.data, overrides), self.source)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.data, sort_keys=False)


def validate(raw: Any, source: str = "config") -> Config:
    """Check a parsed mapping; raise ConfigError listing every problem."""
    problems: list[str] = []
    if not isinstance(raw, Mapping):
        raise ConfigError([f"the top level must be a mapping of keys, got {raw!r}"], source)
    data = _validate(SCHEMA, raw, "", problems)
    # Factor levels override dotted keys: each must exist and each resolved level must
    # itself validate, so a typo in a level fails now, not in run 17 of 40.
    for factor, levels in data.get("factors", {}).items():
        for level, overrides in levels.items():
            for dotted, value in level_overrides(overrides).items():
                where = f"factors.{factor}.{level}.{dotted}"
                node = _schema_at(dotted)
                if node is None or dotted.split(".")[0] in ("factors", "analysis"):
                    problems.append(f"{where}: unknown key {dotted!r}; a level overrides "
                                    "config keys such as switching.mode or hosts.transport")
                    continue
                sub: list[str] = []
                _validate(node, value, dotted, sub)
                problems += [f"factors.{factor}.{level}: {p}" for p in sub]
    problems += scope_problems(data.get("factors", {}))
    problems += threshold_problems(data.get("fidelity", {}))
    if not any(p.startswith("topology.k") for p in problems):  # links have names
        problems += condition_problems(data)
    if not problems:
        problems += _cross_problems(data)
    if problems:
        raise ConfigError(problems, source)
    return Config(data, source)


def _cross_problems(data: Mapping[str, Any]) -> list[str]:
    """Problems between keys: what analysis names must exist, a key one factor owns."""
    problems = []
    factors: dict[str, dict[str, dict[str, Any]]] = data["factors"]
    owner: dict[str, str] = {}
    for factor, levels in factors.items():
        for level, overrides in levels.items():
            for dotted in level_overrides(overrides):
                other = owner.setdefault(dotted, factor)
                if other != factor:
                    problems.append(
                        f"factors.{factor}.{level}.{dotted}: factor {other!r} sets {dotted} "
                        "too; a key belongs to one factor, or the levels of one would "
                        "silently undo the other's (merge the two factors into one)")
    analysis = data["analysis"]
    if analysis["ivs"] is None:  # resolved here, so every later stage reads a list
        analysis["ivs"] = list(factors)
    for name in analysis["dvs"]:
        if name not in DEPENDENT_VARIABLES:
            problems.append(f"analysis.dvs: {name!r} is not a metrics.csv column; choose "
                            f"from {', '.join(DEPENDENT_VARIABLES)}")
    # without factors there is nothing to compare (the report then only describes)
    for name in analysis["ivs"] if factors else []:
        if name not in factors:
            problems.append(f"analysis.ivs: {name!r} is not a factor of this config; "
                            f"factors: {', '.join(factors)}")
    if factors and not 1 <= len(analysis["ivs"]) <= 2:
        problems.append(f"analysis.ivs: {analysis['ivs']!r} names {len(analysis['ivs'])} "
                        "factors; the MANOVA takes one or two")
    columns = ["condition", "flow_type", *factors]
    for name in analysis["clusters"]:
        if name not in columns:
            problems.append(f"analysis.clusters: {name!r} is not a column that splits the "
                            f"data; choose from {', '.join(columns)}")
        elif name in analysis["ivs"]:
            problems.append(f"analysis.clusters: {name!r} is also in analysis.ivs; a "
                            "factor is compared within clusters or splits them, not both")
    return problems


def shadowed_overrides(data: Mapping[str, Any], keys: Iterable[str]) -> list[str]:
    """`--set` keys that factor levels set again, so the override would not reach them."""
    problems = []
    for key in keys:
        levels = [f"{factor}={level}"
                  for factor, lvls in data.get("factors", {}).items()
                  for level, overrides in lvls.items()
                  if any(k != APPLIES_TO and (k == key or k.startswith(key + ".")
                                              or key.startswith(k + "."))
                         for k in overrides)]
        if levels:
            problems.append(
                f"--set {key}: the factor level(s) {', '.join(levels)} set {key} "
                "themselves, so this override would change no run of theirs; edit those "
                "levels in the config, or pick levels with --only")
    return problems


def condition_problems(data: dict[str, Any]) -> list[str]:
    """Link names of overrides and events, and the shape of each event."""
    from pathdiv.experiments.fabric.conditions import ConditionError, parse_link

    problems: list[str] = []
    topo = Config(data).topology()
    for name in data["topology"]["link_overrides"]:
        try:
            parse_link(topo, name)
        except ConditionError as exc:
            problems.append(f"topology.link_overrides.{name}: {exc}")
    for i, event in enumerate(data.get("events") or []):
        where = f"events[{i}]"
        if event["at_s"] is None:
            problems.append(f"{where}.at_s: missing; expected seconds after the workload "
                            "starts, e.g. at_s: 5")
        if event["link"] is None:
            problems.append(f"{where}.link: missing; expected a link name such as a1-c1")
        else:
            try:
                parse_link(topo, str(event["link"]))
            except ConditionError as exc:
                problems.append(f"{where}.link: {exc}")
        changes = {k: v for k, v in (event["set"] or {}).items() if v is not None}
        if (event["action"] is None) == (not changes):
            problems.append(f"{where}: needs exactly one of action (down or up) or "
                            "set (e.g. set: {bw_mbps: 5})")
        elif event["action"] is not None and ">" in str(event["link"] or ""):
            problems.append(f"{where}.link: {event['link']!r}: a link goes {event['action']} "
                            "as a whole; name it with '-' (a1-c1)")
    if not any(p.startswith("topology.link_overrides") for p in problems):
        from pathdiv.experiments.fabric.conditions import resolve

        conds = resolve(topo, data["topology"]["link_overrides"])
        bad = sorted(f"{u}>{v}" for (u, v), c in conds.items() if c.jitter_ms > c.delay_ms)
        if bad:
            problems.append(f"jitter_ms: larger than delay_ms on {', '.join(bad[:6])}"
                            f"{' ...' if len(bad) > 6 else ''}; netem varies the delay by "
                            "±jitter_ms, so set delay_ms >= jitter_ms there")
    open_loop = data["workload"]["pattern"] == "poisson" or \
        data["workload"]["background"]["pattern"] != "none"
    if open_loop and data["topology"]["links"]["host"]["bw_mbps"] is None:
        problems.append("topology.links.host.bw_mbps: null (unshaped) leaves no link rate to "
                        "offer workload.load or workload.background.load against; set a rate")
    sizes = str(data["workload"]["sizes"])
    if sizes not in SIZE_DISTRIBUTIONS and (data["workload"]["pattern"] == "poisson" or
                                            data["workload"]["background"]["pattern"]
                                            == "poisson"):
        from pathdiv.experiments.traffic.poisson import CdfError, read_cdf

        try:
            read_cdf(sizes)
        except CdfError as exc:
            problems.append(f"workload.sizes: {exc}")
    lossy = any((p or {}).get("loss_pct") for p in [
        *data["topology"]["links"].values(), *data["topology"]["link_overrides"].values(),
        *((e.get("set") or {}) for e in data.get("events") or [])])
    if lossy and data["dataplane"] == "bmv2":
        problems.append("loss_pct: loss is dropped by nftables on arrival, which bmv2 "
                        "switches read before; use dataplane: kernel for lossy links")
    return problems


def load(path: str | Path, overrides: Iterable[str] = ()) -> Config:
    """Read a YAML file, apply `--set` overrides, validate."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError([f"cannot read {p}: {exc.strerror}"], str(p)) from None
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start]
        raise ConfigError([f"{p} is not UTF-8 text (byte {exc.start} is {bad:#04x}); save it "
                           "as UTF-8"], str(p)) from None
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError([f"not valid YAML: {exc}"], str(p)) from None
    if isinstance(raw, Mapping) and "name" not in raw:
        raw = {"name": p.stem, **raw}
    parsed = [parse_override(o) for o in overrides]
    cfg = validate(apply_overrides(raw, parsed) if isinstance(raw, Mapping) else raw, str(p))
    shadowed = shadowed_overrides(cfg.data, [key for key, _ in parsed])
    if shadowed:
        raise ConfigError(shadowed, str(p))
    return cfg
