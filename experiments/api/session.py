"""Configs, plans and runs from Python: what `pathdiv check` and `pathdiv run` do.

    from pathdiv.experiments import api
    cfg = api.load_config("silent", {"repetitions": 1, "hosts.kernel": "host"})
    runs = api.plan(cfg, flow_types=["query"])
    result = api.run(cfg, out="results/try", progress=print)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pathdiv.experiments.cluster.shards import Shard
from pathdiv.experiments.config.load import (
    Config,
    ConfigError,
    apply_overrides,
    load,
    parse_override,
    shadowed_overrides,
    validate,
)
from pathdiv.experiments.config.names import resolve_config
from pathdiv.experiments.config.results_folder import hand_over, link_inside
from pathdiv.experiments.config.schema import MAX_K
from pathdiv.experiments.config.workloads import PATTERNS
from pathdiv.experiments.dataplane.select import Choice, choose_runs, find_tools, plane_problems
from pathdiv.experiments.execute.lab_kernel import host_cores, host_ram_mb
from pathdiv.experiments.fabric.environment import EnvironmentProblem, plan_problems, preflight
from pathdiv.experiments.plan import history
from pathdiv.experiments.plan.budget import budget_problems
from pathdiv.experiments.plan.estimate import (
    Estimator,
    boot_of,
    key_of,
    phases_s,
)
from pathdiv.experiments.plan.lanes import default_jobs, jobs_problem, phases
from pathdiv.experiments.plan.memory import memory_problems
from pathdiv.experiments.plan.runs import Run, expand, quick_config, quick_flow_types
from pathdiv.experiments.runner import PlanOutcome, RunProgress, prepare_folder, run_plan

log = logging.getLogger("pathdiv")

ConfigSource = str | Path | Mapping[str, Any] | Config
Overrides = Mapping[str, Any] | Iterable[str]

# The patterns pathdiv ships; one registered from user code exists only in this process.
SHIPPED_PATTERNS = frozenset(PATTERNS)


def _pairs(overrides: Overrides) -> list[tuple[str, Any]]:
    if isinstance(overrides, Mapping):
        return [(str(k), v) for k, v in overrides.items()]
    return [parse_override(str(o)) for o in overrides]


def load_config(source: ConfigSource, overrides: Overrides = ()) -> Config:
    """A validated config from a file path, a config name (`silent` finds
    configs/silent.yaml), a mapping, or a Config; `overrides` are dotted keys, as a mapping
    ({"hosts.transport": "mptcp"}) or as `--set` strings ("hosts.transport=mptcp").
    Raises ConfigError naming every bad key, its value and what is allowed."""
    pairs = _pairs(overrides)
    if isinstance(source, Config):
        return source.with_overrides(pairs) if pairs else source
    if isinstance(source, Mapping):
        cfg = validate(apply_overrides({"name": "api", **source}, pairs), "config from Python")
        shadowed = shadowed_overrides(cfg.data, [k for k, _ in pairs])
        if shadowed:
            raise ConfigError(shadowed, "config from Python")
        return cfg
    if not isinstance(overrides, Mapping):  # --set strings: applied before validation
        return load(resolve_config(source), [str(o) for o in overrides])
    cfg = load(resolve_config(source))
    if not pairs:
        return cfg
    cfg = cfg.with_overrides(pairs)
    shadowed = shadowed_overrides(cfg.data, [k for k, _ in pairs])
    if shadowed:
        raise ConfigError(shadowed, cfg.source)
    return cfg


def plan(config: ConfigSource, repetitions: int | None = None,
         flow_types: list[str] | None = None, only: Mapping[str, str] | None = None,
         quick: bool = False) -> list[Run]:
    """The runs `config` expands to, in execution order (`pathdiv check` prints them).
    `only` keeps runs whose factor levels or flow type match (`{"switching": "ps-tcp"}`);
    `quick` is `--quick` (one repetition, fewer iterations, two flow types)."""
    cfg = load_config(config)
    if quick:
        cfg = quick_config(cfg)
        repetitions = 1 if repetitions is None else repetitions
        flow_types = flow_types or quick_flow_types(cfg)
    return expand(cfg, repetitions=repetitions, flow_types=flow_types,
                  only=dict(only) if only else None)


def check_plan(runs: list[Run]) -> None:
    """Refuse a plan this machine cannot run: capture budget, kernel abilities, data
    plane modes, a network larger than lab.memory_mb or this machine's RAM holds
    (plan.memory), and a user-registered pattern on the lab kernel (its guest is another
    process, which knows only the patterns pathdiv ships)."""
    if not runs:
        raise ValueError("the plan is empty; check `only` against `pathdiv check CONFIG`")
    budget = budget_problems(runs)
    if budget:
        raise ConfigError(budget, runs[0].config.source)
    found = find_tools()
    planes = {rid: c.plane for rid, c in choose_runs(runs, found).items()}
    problems = (plan_problems(runs, planes=planes) + plane_problems(runs, found)
                + memory_problems(runs, host_ram_mb(), MAX_K))
    for run in runs:
        pattern = str(run.config.data["workload"]["pattern"])
        if run.config.host_kernel == "lab" and pattern not in SHIPPED_PATTERNS:
            problems.append(f"{run.run_id}: workload.pattern {pattern!r} was registered from "
                            "Python; the lab kernel's guest cannot see it: run it with "
                            "hosts.kernel: host")
            break
    if problems:
        raise EnvironmentProblem(problems)


def analyze(folder: str | Path, stats_only: bool = False, include_invalid: bool = False,
            design: str | Path | None = None) -> Path:
    """`pathdiv analyze`: metrics from the captures (unless `stats_only`), then the
    statistics and the report; the path of report.html. Reads only files, so a results
    folder can be re-analysed anywhere, any time. `design` names a config whose analysis
    section and factor scopes replace the folder's own (a folder run before its config
    scoped its levels). No symbolic link inside the folder is followed: one is refused."""
    # the statistics stack loads only when asked for (the CLI starts fast without it)
    from pathdiv.analysis.report.analyze import analyze_folder, spec_from_config

    folder = Path(folder)
    link = link_inside(folder) if folder.is_dir() else None
    if link is not None:  # analysis runs as root and writes into the folder
        raise ValueError(f"{folder} holds the symbolic link {link}; pathdiv follows no "
                         "link in a results folder: remove it, then analyse again")
    spec, label = None, None
    if design is not None:
        path = resolve_config(str(design))
        spec, label = spec_from_config(load(path).data), str(path)
    report = analyze_folder(folder, stats_only=stats_only, include_invalid=include_invalid,
                            spec=spec, design=label)
    hand_over(folder)  # run through sudo: the results are the user's
    return report


_analyze_folder = analyze  # `run` takes a flag of the same name


def jobs_for(runs: list[Run], jobs: int | None = None) -> int:
    """Lab kernels at once for `runs` on this machine: `jobs` when given (ValueError when
    this machine cannot hold that many), else one per core as RAM allows."""
    cores, ram = host_cores(), host_ram_mb()
    if jobs is None:
        return default_jobs(runs, cores, ram)
    problem = jobs_problem(jobs, runs, cores, ram or 1 << 40)
    if problem:
        raise ValueError(problem)
    return jobs


def estimator() -> Estimator:
    """Run-time estimates calibrated from this machine's history of runs."""
    return history.estimator()


@dataclass(frozen=True)
class PlanTime:
    """The expected wall time of a plan on this machine."""

    seconds: float         # with `jobs` lab kernels at once
    serial_seconds: float  # one run at a time
    nftables_seconds: float  # as `seconds`, with every run on the nftables plane
    jobs: int
    source: str            # where the costs came from, in words

    @property
    def kernel_seconds(self) -> float:
        """`nftables_seconds` under the nftables plane's former name ("kernel")."""
        return self.nftables_seconds


def expected_time(runs: list[Run], jobs: int, est: Estimator | None = None,
                  choices: dict[str, Choice] | None = None) -> PlanTime:
    """What `pathdiv check` prints: the plan's runs (boots included, analysis not) with
    `jobs` lab kernels at once, one at a time, and on the nftables plane; `choices` are
    the runs' planes (`plane_choices`; chosen here when not given)."""
    est = est or estimator()
    chosen = choices if choices is not None else choose_runs(runs)

    def plane(run: Run) -> str | None:
        return chosen[run.run_id].plane

    def cost(run: Run) -> float:
        return est.run_s(run, plane(run))

    def on_baseline(run: Run) -> float:
        return est.run_s(run)

    def boot(run: Run) -> float:
        return boot_of(run, plane(run))

    par = [lanes for _, lanes in phases(runs, jobs, cost)]
    one = [lanes for _, lanes in phases(runs, 1, cost)]
    base = [lanes for _, lanes in phases(runs, jobs, on_baseline)]
    return PlanTime(phases_s(par, cost, boot), phases_s(one, cost, boot),
                    phases_s(base, on_baseline, boot_of), jobs,
                    est.source((key_of(r, plane(r)) for r in runs),
                               runs[0].config.name if runs else None))


def plane_choices(runs: list[Run]) -> dict[str, Choice]:
    """Run id -> the data plane it gets on this machine and why (`dataplane/select.py`)."""
    return choose_runs(runs)


@dataclass
class RunResult:
    """What `run` did: the results folder, each run's status, the report (or why not)."""

    folder: Path
    outcome: PlanOutcome
    report: Path | None = None
    analysis_error: str = ""

    @property
    def ok(self) -> bool:
        return not self.outcome.count("failed") and not self.analysis_error


def run(config: ConfigSource, out: str | Path | None = None, *,
        runs: list[Run] | None = None,
        progress: Callable[[RunProgress], None] | None = None,
        analyze: bool = True, quiet: bool = True, options: Mapping[str, Any] | None = None,
        shard: Shard | None = None, plan_runs: list[Run] | None = None,
        on_start: Callable[[Path], None] | None = None, jobs: int | None = None
        ) -> RunResult:
    """Run a plan into `out` (a new results/<name>-<time> folder if None; an existing
    folder resumes), then analyse it (report.html) unless `analyze` is False or nothing
    completed. `runs` defaults to `plan(config)`; `progress` is called once per finished
    run with a RunProgress(run_id, status, done, total, manifest). Host-kernel runs need
    root; lab-kernel runs boot the lab kernel (as `pathdiv run` does). `on_start(folder)`
    is called once the folder exists, before the first run; `shard` runs one shard of
    `plan_runs` (a shard does not analyse). `jobs`: lab kernels at once for the
    virtual-clock runs (default: one per core, as RAM allows; real-clock and host-kernel
    runs always run one at a time)."""
    cfg = load_config(config)
    runs = runs if runs is not None else plan(cfg)
    check_plan(runs)
    jobs = jobs_for(runs, jobs)
    host_runs = [r for r in runs if r.config.host_kernel == "host"]
    if host_runs:
        preflight(host_runs[0].config)
    folder = prepare_folder(cfg, Path(out) if out is not None else None)
    if on_start is not None:
        on_start(folder)
    opts = dict(options or {"reps": None, "only": [], "quick": False, "set": []})
    try:
        outcome = run_plan(cfg, runs, folder, quiet=quiet, options=opts,
                           plan_runs=plan_runs, shard=shard, progress=progress, jobs=jobs,
                           estimator=estimator())
    finally:
        hand_over(folder)  # run through sudo: the results are the user's
    result = RunResult(folder, outcome)
    if analyze and shard is None and outcome.count("complete"):
        try:
            result.report = _analyze_folder(folder)
        except Exception as exc:  # the runs stay; `pathdiv analyze DIR` redoes this
            result.analysis_error = f"{type(exc).__name__}: {exc}"
    return result
