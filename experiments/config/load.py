"""Load, validate and override pathdiv configurations. Pure: no side effects.

A config is YAML read within bounds (safe_yaml.py), checked against `schema.SCHEMA`
and between its keys (cross.py), and returned as a `Config`: the resolved mapping (every
default filled in) plus typed accessors. Every problem is reported at once, each naming
the key, the bad value and what is allowed, and nothing is started.
"""

from __future__ import annotations

import copy
import itertools
import math
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pathdiv.analysis.safe_yaml import MAX_TEXT_BYTES, YamlRefused, load_text, shorten
from pathdiv.analysis.stats.scope import level_overrides, scope_problems
from pathdiv.experiments.config.checks import parse_size, plain_name_problem
from pathdiv.experiments.config.cross import (
    condition_problems,
    cross_problems,
    paths_problems,
    shadowed_overrides,
    threshold_problems,
)
from pathdiv.experiments.config.files import invoking_user, is_file_reference, user_cannot_read
from pathdiv.experiments.config.schema import SCHEMA, Leaf, ListOf, MapOf, Section
from pathdiv.topologies.conditions import (
    Conditions,
    link_params_of,
    resolve,
    topology_of,
)
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.model import LinkParams, Tier
from pathdiv.topologies.paths import ParallelPaths


class ConfigError(ValueError):
    """One or more configuration problems; `problems` lists them one per line."""

    SHOWN = 20  # a config with 10000 unknown keys gets 20 lines, then a count

    def __init__(self, problems: list[str], source: str = "config") -> None:
        self.problems = problems
        shown = problems[: self.SHOWN]
        more = [f"... and {len(problems) - len(shown)} more"] if len(problems) > len(shown) \
            else []
        lines = "\n".join(f"  - {p}" for p in [*shown, *more])
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


MAX_STRING_CHARS = 1000  # any string value (a CDF file's path is the longest)


def _defaults(node: Leaf | Section | MapOf | ListOf) -> Any:
    """The value `node` resolves to when absent (what a refused value is replaced by, so
    the checks after the schema still find every key)."""
    return _validate(node, None, "", [])


def _validate(node: Leaf | Section | MapOf | ListOf, value: Any, key: str,
              problems: list[str]) -> Any:
    """Return the value with defaults filled; append problems for bad values."""
    if isinstance(node, ListOf):
        return _validate_list(node, value, key, problems)
    if isinstance(node, Leaf):
        return _validate_leaf(node, value, key, problems)
    if value is None:
        if isinstance(node, MapOf):
            return copy.deepcopy(node.default)
        value = {}
    if not isinstance(value, Mapping):
        what = "a mapping of flow type names" if key == "workload.flow_types" else \
            "a mapping (key: value lines indented under it)"
        problems.append(f"{key or 'config'}: expected {what}, got {shorten(value)}")
        return _defaults(node)
    if isinstance(node, MapOf):
        return _validate_map(node, value, key, problems)
    return _validate_section(node, value, key, problems)


def _validate_list(node: ListOf, value: Any, key: str, problems: list[str]) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append(f"{key}: expected a list, got {shorten(value)}")
        return []
    if len(value) > node.max_items:
        problems.append(f"{key}: {len(value)} items; at most {node.max_items}")
        return []
    return [_validate(node.item, item, f"{key}[{i}]", problems)
            for i, item in enumerate(value)]


def _validate_map(node: MapOf, value: Mapping[Any, Any], key: str,
                  problems: list[str]) -> Any:
    if len(value) > node.max_items:
        problems.append(f"{key}: {len(value)} entries; at most {node.max_items}")
        return _defaults(node)
    if len(value) < node.min_items and node.default:
        problems.append(f"{key}: {shorten(dict(value))} is empty; name at least "
                        f"{node.min_items} entry, or leave {key} out for the defaults "
                        f"({', '.join(node.default)})")
        return _defaults(node)
    if len(value) < node.min_items:
        problems.append(f"{key}: {shorten(dict(value))} is empty; give at least "
                        f"{node.min_items} entry")
        return {}
    source = value or copy.deepcopy(node.default)
    out: dict[str, Any] = {}
    for name, child in source.items():
        plain = isinstance(name, str) and re.fullmatch(node.key_pattern, name)
        # a name with a newline or escape sequence is shown as repr, never raw
        shown = name[:60] if isinstance(name, str) and name.isprintable() else \
            shorten(name, 40)
        sub = f"{key}.{shown}"
        if not plain:
            problems.append(f"{sub}: the name {shorten(name, 40)} is not allowed; use "
                            f"letters, digits, '_', '-' (pattern {node.key_pattern})")
            continue
        out[name] = _validate(node.value, child, sub, problems)
    return out


def _validate_section(node: Section, value: Mapping[Any, Any], key: str,
                      problems: list[str]) -> dict[str, Any]:
    out = {}
    for name in value:
        if name not in node.fields:
            valid = ", ".join(node.fields)
            shown = name[:60] if isinstance(name, str) else shorten(name, 40)
            where = f"{key}.{shown}" if key else shown
            problems.append(f"{where}: unknown key; valid keys here are {valid}")
    for name, child in node.fields.items():
        sub = f"{key}.{name}" if key else name
        present = value.get(name, None if not isinstance(child, Leaf) else child.default)
        if isinstance(child, Leaf) and name not in value:
            out[name] = copy.deepcopy(child.default)
        else:
            out[name] = _validate(child, present, sub, problems)
    return out


def _validate_leaf(node: Leaf, value: Any, key: str, problems: list[str]) -> Any:
    if value is None:
        if node.nullable:
            return None
        problems.append(f"{key}: null is not allowed; expected {_type_name(node.kind)}")
        return copy.deepcopy(node.default)
    if not _is_kind(value, node.kind):
        problems.append(f"{key}: {shorten(value)} is a {type(value).__name__}; expected "
                        f"{_type_name(node.kind)}")
        return copy.deepcopy(node.default)
    if isinstance(value, float) and not math.isfinite(value):
        problems.append(f"{key}: {shorten(value)} is not allowed; expected a finite number")
        return copy.deepcopy(node.default)
    if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
        problems.append(f"{key}: {shorten(value)} is {len(value)} characters long; at most "
                        f"{MAX_STRING_CHARS}")
        return copy.deepcopy(node.default)
    if node.choices is not None and value not in node.choices:
        allowed = ", ".join(map(str, node.choices))
        problems.append(f"{key}: {shorten(value)} is not allowed; choose one of {allowed}")
        return copy.deepcopy(node.default)
    if node.check is not None:
        want = node.check(value)
        if want is not None:
            problems.append(f"{key}: {shorten(value)} is not allowed; expected {want}")
            return copy.deepcopy(node.default)
    return value


def _schema_at(dotted: str) -> Leaf | Section | MapOf | ListOf | None:
    node: Leaf | Section | MapOf | ListOf = SCHEMA
    for part in dotted.split("."):
        if isinstance(node, Section) and part in node.fields:
            node = node.fields[part]
        elif isinstance(node, MapOf):
            node = node.value
        elif isinstance(node, ListOf) and part.isdigit() and int(part) < node.max_items:
            node = node.item  # topology.paths.1.loss_pct: an item of a list, from 0
        else:
            return None
    return node


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    """data['a']['b'] = value for 'a.b', creating mappings on the way; a number indexes a
    list ('topology.paths.1.loss_pct': the second path's), which grows to reach it."""
    parts = dotted.split(".")
    cur: Any = data
    for part, after in itertools.pairwise(parts):
        if isinstance(cur, list):
            index = int(part)
            cur.extend({} for _ in range(index + 1 - len(cur)))
            if not isinstance(cur[index], dict):
                cur[index] = {}
            cur = cur[index]
            continue
        nxt = cur.get(part)
        want = list if after.isdigit() else dict
        if not isinstance(nxt, want):
            nxt = want()
            cur[part] = nxt
        cur = nxt
    if isinstance(cur, list):
        index = int(parts[-1])
        cur.extend({} for _ in range(index + 1 - len(cur)))
        cur[index] = value
    else:
        cur[parts[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """'switching.mode=spray' -> ('switching.mode', 'spray'); the value is YAML."""
    if "=" not in text:
        raise ConfigError([f"--set {shorten_arg(text)!r}: expected KEY=VALUE, e.g. "
                           "switching.mode=spray"])
    key, raw = text.split("=", 1)
    key = key.strip()
    if _schema_at(key) is None:
        raise ConfigError([f"--set {shorten_arg(key)}: unknown key; see `pathdiv keys` for "
                           "the valid keys"])
    if not raw.strip():
        return key, None
    try:
        return key, load_text(raw)
    except YamlRefused as exc:
        raise ConfigError([f"--set {key}={shorten_arg(raw)}: {exc}; quote a text value, "
                           f"e.g. --set {key}='\"...\"'"]) from None


def shorten_arg(text: str, limit: int = 40) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


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
    def ecn_threshold_pkts(self) -> int | None:
        value = self.data["switching"]["ecn_threshold_pkts"]
        return None if value is None else int(value)

    @property
    def transport(self) -> str:
        return str(self.data["hosts"]["transport"])

    @property
    def captured_links(self) -> str:
        """capture.links: 'all' or 'access' (the hosts' own links only)."""
        return str(self.data["capture"]["links"])

    @property
    def subflows(self) -> int:
        """Subflows per connection actually used: 1 for TCP."""
        return int(self.data["hosts"]["subflows"]) if self.transport == "mptcp" else 1

    @property
    def cc(self) -> str:
        return str(self.data["hosts"]["cc"])

    @property
    def mptcp_d(self) -> tuple[float, float]:
        """(alpha, beta) of extra subflow elimination (hosts.cc: mptcp-d)."""
        hosts = self.data["hosts"]
        return float(hosts["mptcp_d_alpha"]), float(hosts["mptcp_d_beta"])

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
    def juggler(self) -> tuple[int, int, int]:
        """(in-sequence timeout µs, out-of-order timeout µs, flows) of hosts.reordering:
        juggler."""
        hosts = self.data["hosts"]
        return (int(hosts["juggler_inseq_timeout_us"]), int(hosts["juggler_ooo_timeout_us"]),
                int(hosts["juggler_flows"]))

    @property
    def subflow_paths(self) -> str:
        return str(self.data["hosts"]["subflow_paths"])

    @property
    def host_kernel(self) -> str:
        return str(self.data["hosts"]["kernel"])

    def link_params(self) -> dict[Tier, LinkParams]:
        return link_params_of(self.data["topology"]["links"])

    def link_conditions(self) -> Conditions:
        """Every link direction's conditions (`pathdiv.topologies.conditions`)."""
        return resolve(self.topology(), self.data["topology"]["link_overrides"])

    def flow_sizes(self) -> dict[str, int]:
        return {n: parse_size(v) for n, v in self.data["workload"]["flow_types"].items()}

    @property
    def topology_kind(self) -> str:
        return str(self.data["topology"]["kind"])

    def topology(self) -> FatTree | ParallelPaths:
        """The one topology object every stage reads."""
        return topology_of(self.data)

    def fat_tree(self, what: str) -> FatTree:
        """The topology of a config that `what` (a command, the live network) can build
        only as a fat tree; ConfigError naming topology.kind otherwise."""
        topo = self.topology()
        if not isinstance(topo, FatTree):
            raise ConfigError([f"topology.kind: {self.topology_kind!r}: {what} builds the "
                               "fat tree only (allowed: fattree); a kind: paths config runs "
                               "with `pathdiv run` (docs/paths.md)"], self.source)
        return topo

    def with_overrides(self, overrides: Iterable[tuple[str, Any]]) -> Config:
        return validate(apply_overrides(self.data, overrides), self.source)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.data, sort_keys=False)


def validate(raw: Any, source: str = "config") -> Config:
    """Check a parsed mapping; raise ConfigError listing every problem."""
    problems: list[str] = []
    if not isinstance(raw, Mapping):
        raise ConfigError([f"the top level must be a mapping of keys (name: ..., topology: "
                           f"...), got {shorten(raw)}"], source)
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
    if not any(p.startswith("topology") for p in problems):
        problems += paths_problems(data)
    if not any(p.startswith(("topology.k", "topology.paths", "hosts.kernel"))
               for p in problems):  # links have names
        problems += condition_problems(data)
    if not problems:
        problems += cross_problems(data)
    if problems:
        raise ConfigError(problems, source)
    return Config(data, source)


def read_config_text(p: Path) -> str:
    """The text of a config file: a regular file (not a device or FIFO: opened without
    blocking, so a FIFO is refused at once) of at most MAX_TEXT_BYTES, UTF-8; run
    through sudo, one the invoking user may read."""
    user = invoking_user()
    denied = user_cannot_read(p, user) if user is not None else None
    if denied:
        raise ConfigError([f"{p}: {denied}; pathdiv reads only configs you may read"],
                          str(p))
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ConfigError([f"{p} is not a regular file; a config is a YAML file"],
                                  str(p))
            data = f.read(MAX_TEXT_BYTES + 1)
    except OSError as exc:
        raise ConfigError([f"cannot read {p}: {exc.strerror}"], str(p)) from None
    if len(data) > MAX_TEXT_BYTES:
        raise ConfigError([f"{p} is larger than {MAX_TEXT_BYTES // 1000} kB; a config is a "
                           "few kB of YAML"], str(p))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start]
        raise ConfigError([f"{p} is not UTF-8 text (byte {exc.start} is {bad:#04x}); save it "
                           "as UTF-8"], str(p)) from None


def _resolve_files(raw: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Paths of files the config names (workload.sizes, in the config and in factor
    levels) made absolute against the config's folder, not the working directory."""
    def fix(value: Any) -> Any:
        if isinstance(value, str) and is_file_reference(value) and \
                not Path(value).is_absolute():
            return str(folder / value)
        return value

    workload = raw.get("workload")
    if isinstance(workload, dict) and "sizes" in workload:
        raw = {**raw, "workload": {**workload, "sizes": fix(workload["sizes"])}}
    factors = raw.get("factors")
    if isinstance(factors, dict):
        raw = {**raw, "factors": {
            f: ({lv: ({k: (fix(v) if k == "workload.sizes" else v)
                       for k, v in over.items()} if isinstance(over, dict) else over)
                 for lv, over in levels.items()} if isinstance(levels, dict) else levels)
            for f, levels in factors.items()}}
    return raw


def load(path: str | Path, overrides: Iterable[str] = ()) -> Config:
    """Read a YAML file, apply `--set` overrides, validate."""
    p = Path(path)
    text = read_config_text(p)
    try:
        raw = load_text(text)
    except YamlRefused as exc:
        raise ConfigError([str(exc)], str(p)) from None
    raw = {} if raw is None else raw
    if isinstance(raw, Mapping) and "name" not in raw:
        if plain_name_problem(p.stem) is not None:
            raise ConfigError([f"name: the config sets none, and its file name "
                               f"{shorten(p.stem)} is not a plain name; set name: to 1-64 "
                               "letters, digits, '_', '-', '.' (it becomes a folder and a "
                               "Slurm job name)"], str(p))
        raw = {"name": p.stem, **raw}
    if isinstance(raw, dict):
        raw = _resolve_files(raw, Path(os.path.abspath(p)).parent)
    parsed = [parse_override(o) for o in overrides]
    cfg = validate(apply_overrides(raw, parsed) if isinstance(raw, Mapping) else raw, str(p))
    shadowed = shadowed_overrides(cfg.data, [key for key, _ in parsed])
    if shadowed:
        raise ConfigError(shadowed, str(p))
    return cfg
