"""Expand a config's factors into the run plan (pure).

Every combination of factor levels and flow types is one cell (a level with `applies_to`
only where it acts, analysis/stats/scope.py); each repetition is a
block holding every cell once, in an order shuffled by the master seed (a randomised
complete block design, so slow drifts of the machine do not line up with a factor).
A run's id and seed depend only on its cell and repetition, never on its position,
so a resumed plan finds its finished runs again.

Who fetches from whom is drawn from a run's `workload_seed`: with
`workload.designations: per_run` that is the run's own seed (every run its own draws);
with `per_repetition` it depends on the repetition and flow type only, so every factor
level of a repetition meets the same client/server designations and the comparison
between levels is paired.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pathdiv.analysis.stats.scope import applies, level_overrides, scopes_of
from pathdiv.experiments.config.checks import MAX_PLAN_TRANSFERS, MAX_RUNS
from pathdiv.experiments.config.enumeration import run_transfers
from pathdiv.experiments.config.load import Config, ConfigError, apply_overrides, validate
from pathdiv.experiments.config.workloads import open_loop


@dataclass(frozen=True)
class Run:
    run_id: str
    order: int
    repetition: int
    flow_type: str
    factors: dict[str, str]
    seed: int
    config: Config = field(repr=False, compare=False)
    workload_seed: int = -1  # the seed of the designations; -1: the run's own seed

    def __post_init__(self) -> None:
        if self.workload_seed < 0:
            object.__setattr__(self, "workload_seed", self.seed)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "order": self.order, "repetition": self.repetition,
                "flow_type": self.flow_type, "factors": self.factors, "seed": self.seed,
                "workload_seed": self.workload_seed}


def run_seed(master: int, key: str) -> int:
    digest = hashlib.blake2s(f"{master}|{key}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


def designation_seed(cfg: Config, repetition: int, flow_type: str, seed: int) -> int:
    """The seed a run draws its designations from (see the module docstring)."""
    if cfg.data["workload"]["designations"] == "per_repetition":
        return run_seed(cfg.seed, f"designations|{flow_type}|rep{repetition}")
    return seed


def expand(
    cfg: Config,
    repetitions: int | None = None,
    flow_types: list[str] | None = None,
    only: dict[str, str] | None = None,
) -> list[Run]:
    """All runs of the plan in execution order. `repetitions` (the command line's --reps)
    replaces the config's for every flow type."""
    sizes = cfg.flow_sizes()
    flows = flow_types or list(sizes)
    unknown = [f for f in flows if f not in sizes]
    if unknown:
        raise ValueError(f"flow type(s) {', '.join(unknown)} not in workload.flow_types "
                         f"({', '.join(sizes)})")
    factors: dict[str, dict[str, dict[str, Any]]] = cfg.data["factors"]
    only = only or {}
    for name, level in only.items():
        if name == "flow_type":
            continue
        if name not in factors or level not in factors[name]:
            valid = {f: list(lv) for f, lv in factors.items()}
            raise ValueError(f"--only {name}={level}: no such factor level; factors: {valid}")
    names = list(factors)
    level_lists = [
        [lv for lv in factors[n] if only.get(n, lv) == lv] for n in names
    ]
    flows = [f for f in flows if only.get("flow_type", f) == f]
    reps_of = {f: repetitions_of(cfg.data, f, repetitions) for f in flows}
    count = sum(reps_of.values()) * math.prod(len(lv) for lv in level_lists)
    if count > MAX_RUNS:
        counts = sorted(set(reps_of.values()))
        reps_text = (f"{counts[0]} x" if len(counts) == 1 else
                     f"{'+'.join(str(n) for n in reps_of.values())} over")
        raise ConfigError([f"repetitions: {reps_text} {len(flows)} flow type(s) x "
                           f"{' x '.join(str(len(lv)) for lv in level_lists) or '1'} factor "
                           f"level(s) make {count} runs; a plan has at most {MAX_RUNS} "
                           "(split it into several configs)"], cfg.source)
    scopes = scopes_of(factors)
    cells: list[tuple[dict[str, str], str]] = [
        (dict(zip(names, combo, strict=True)), flow)
        for combo in itertools.product(*level_lists)
        if applies(dict(zip(names, combo, strict=True)), scopes)  # no cell run twice
        for flow in flows
    ]
    _refuse_shared_ids(cells, names, cfg.source)
    # each cell's config validated once (not once per repetition: a CDF file, a topology)
    configs: dict[str, Config] = {}
    for levels, _flow in cells:
        combo = cell_key("", levels, names)
        if combo not in configs:
            overrides: list[tuple[str, Any]] = []
            for n, lv in levels.items():
                overrides += list(level_overrides(factors[n][lv]).items())
            try:
                configs[combo] = validate(apply_overrides(cfg.data, overrides), cfg.source)
            except ConfigError as exc:  # the levels that make the combination, named
                where = " with ".join(f"factors.{n}.{lv}" for n, lv in levels.items())
                raise ConfigError([f"{where}: {p}" for p in exc.problems],
                                  cfg.source) from None
    _refuse_large_plan([(reps_of[flow], configs[cell_key("", lv, names)])
                        for lv, flow in cells], cfg.source)
    rng = random.Random(cfg.seed)
    runs: list[Run] = []
    for rep in range(1, max(reps_of.values(), default=0) + 1):
        block = [cell for cell in cells if rep <= reps_of[cell[1]]]
        rng.shuffle(block)
        for levels, flow in block:
            run_cfg = configs[cell_key("", levels, names)]
            key = f"{cell_key(flow, levels, names)}_rep{rep}"
            seed = run_seed(cfg.seed, key)
            runs.append(Run(key, len(runs), rep, flow, levels, seed, run_cfg,
                            designation_seed(cfg, rep, flow, seed)))
    return runs


def _refuse_large_plan(cells: list[tuple[int, Config]], source: str) -> None:
    """A plan whose runs make more than MAX_PLAN_TRANSFERS transfers in all (counted in
    closed form: `check` draws each run's to size its captures) is refused; `cells` holds
    each cell's repetitions beside its config."""
    total = sum(reps * run_transfers(c.data, len(c.topology().hosts)) for reps, c in cells)
    if total > MAX_PLAN_TRANSFERS:
        counts = sorted({reps for reps, _ in cells})
        reps_text = f"{counts[0]} x" if len(counts) == 1 else "the repetitions of"
        raise ConfigError([f"repetitions: {reps_text} {len(cells)} cell(s) make "
                           f"{total:.3g} transfers in all; a plan has at most "
                           f"{MAX_PLAN_TRANSFERS} (fewer repetitions, iterations or "
                           "requests, or several configs)"], source)


def repetitions_of(data: Mapping[str, Any], flow: str, override: int | None = None) -> int:
    """A flow type's repetitions: `override`, the config's number, or its entry of
    {flow type: repetitions} (1 for a flow type it does not name)."""
    if override is not None:
        return override
    reps = data["repetitions"]
    return int(reps.get(flow, 1)) if isinstance(reps, Mapping) else int(reps)


def cell_key(flow: str, levels: dict[str, str], names: list[str]) -> str:
    """The run id of a cell without its repetition: flow type and levels joined by '_'."""
    return "_".join([flow, *(levels[n] for n in names)])


def _refuse_shared_ids(cells: list[tuple[dict[str, str], str]], names: list[str],
                       source: str) -> None:
    """Two cells whose ids are the same ('a_b' + 'c' and 'a' + 'b_c') would write into
    one run folder, the second overwriting the first as if it were a resume."""
    seen: dict[str, tuple[dict[str, str], str]] = {}
    for levels, flow in cells:
        key = cell_key(flow, levels, names)
        if key in seen:
            a, b = seen[key], (levels, flow)
            show = [", ".join([f"flow_type={f}", *(f"{n}={lv[n]}" for n in names)])
                    for lv, f in (a, b)]
            raise ConfigError([f"factors: the runs of ({show[0]}) and ({show[1]}) would both "
                               f"have the run id {key}_rep<N> (flow type and levels joined "
                               "by '_'); rename a level or flow type so no two join the same"],
                              source)
        seen[key] = (levels, flow)


def describe(runs: list[Run], planes: dict[str, str] | None = None) -> str:
    """A human-readable table of the plan; `planes` maps a run id to the data plane it
    gets here (the column then reads e.g. `p4-ebpf (auto)`)."""
    planes = planes or {}

    def plane(run: Run) -> str:
        wanted = run.config.dataplane
        got = planes.get(run.run_id, wanted)
        return got if got == wanted else f"{got} ({wanted})"

    if not runs:
        return "the plan is empty"
    names = list(runs[0].factors)
    head = ["#", "run_id", "flow", *names, "mode", "transport", "scheduler", "kernel",
            "dataplane"]
    rows = [
        [str(r.order + 1), r.run_id, r.flow_type, *(r.factors[n] for n in names),
         r.config.mode, r.config.transport, r.config.scheduler, r.config.host_kernel,
         plane(r)]
        for r in runs
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*head), *(fmt.format(*row) for row in rows)])


# ---- command-line options that shape a plan ------------------------------------------
QUICK_FLOW_TYPES = ("query", "short")
QUICK_ITERATIONS = 1
QUICK_DURATION_S = 5.0


def quick_config(cfg: Config) -> Config:
    """--quick: fewer iterations (the repetition and flow types are the plan's job); a
    `poisson` workload, which has no iterations, gets a shorter window instead."""
    iterations = min(int(cfg.data["workload"]["iterations"]), QUICK_ITERATIONS)
    overrides: list[tuple[str, Any]] = [("workload.iterations", iterations)]
    if open_loop(cfg.data["workload"]["pattern"]):
        overrides.append(("workload.duration_s",
                          min(float(cfg.data["workload"]["duration_s"]), QUICK_DURATION_S)))
    return cfg.with_overrides(overrides)


def quick_flow_types(cfg: Config) -> list[str]:
    """query+short when the config has them, else its first two flow types."""
    names = list(cfg.flow_sizes())
    chosen = [f for f in QUICK_FLOW_TYPES if f in names]
    return chosen or names[:2]


def parse_only(items: list[str]) -> dict[str, str]:
    """['switching=ecmp-tcp', 'flow_type=query'] -> dict; bad items name the fix."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"--only {item!r}: expected FACTOR=LEVEL, e.g. --only "
                             "switching=ecmp-mptcp or --only flow_type=query")
        out[key.strip()] = value.strip()
    return out
