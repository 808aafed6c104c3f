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

from pathdiv.experiments.cluster.planfile import options_conflict, read_plan, register_plan
from pathdiv.experiments.cluster.shards import Shard, parse_shard, shard_runs
from pathdiv.experiments.config.checks import MAX_K
from pathdiv.experiments.config.cross import shadowed_overrides
from pathdiv.experiments.config.load import (
    Config,
    ConfigError,
    apply_overrides,
    load,
    parse_override,
    validate,
)
from pathdiv.experiments.config.names import resolve_config
from pathdiv.experiments.config.results_folder import hand_over, link_inside
from pathdiv.experiments.config.workloads import PATTERNS
from pathdiv.experiments.dataplane.select import Choice, choose_runs, find_tools, plane_problems
from pathdiv.experiments.execute.boot import host_cores, host_ram_mb
from pathdiv.experiments.execute.runstate import ResultsError
from pathdiv.experiments.fabric.environment import EnvironmentProblem, plan_problems, preflight
from pathdiv.experiments.plan import history
from pathdiv.experiments.plan.budget import budget_problems
from pathdiv.experiments.plan.estimate import (
    Estimator,
    boot_of,
    key_of,
    phases_s,
)
from pathdiv.experiments.plan.lanes import default_jobs, jobs_problem, phases, virtual_runs
from pathdiv.experiments.plan.memory import clock_problems, memory_problems
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
                + clock_problems(runs) + memory_problems(runs, host_ram_mb(), MAX_K))
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
    est = est or history.estimator()
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
                    est.source([*(key_of(r, plane(r)) for r in runs),
                                *(key_of(r) for r in runs)],  # the nftables figure's too
                               runs[0].config.name if runs else None))


def plane_choices(runs: list[Run]) -> dict[str, Choice]:
    """Run id -> the data plane it gets on this machine and why (`dataplane/select.py`)."""
    return choose_runs(runs)


@dataclass(frozen=True)
class RunStart:
    """What `run` tells `on_start` once the results folder exists, before the first run."""

    folder: Path
    runs: int  # runs this call executes (a shard's part of the plan)
    planned: int  # runs of the whole plan
    shard: Shard | None
    jobs: int  # lab kernels at once for the virtual-clock runs
    at_once: bool  # whether more than one lab kernel will run at once


def shard_plan(config: ConfigSource, out: str | Path, runs: list[Run], shards: int,
               options: Mapping[str, Any] | None = None) -> Path:
    """Make `out` the results folder of `runs` split into `shards` shards (what `pathdiv
    slurm` prepares before it submits them): plan.json lists the whole plan and which
    shard runs each run. ResultsError when the folder holds another plan's shards."""
    cfg = load_config(config)
    out = Path(out)
    opts = {**_options(options), "shards": shards}
    conflict = options_conflict(read_plan(out), opts)
    if conflict:
        raise ResultsError(f"{out}: {conflict}")
    folder = prepare_folder(cfg, out)
    register_plan(folder, cfg, runs, opts)
    hand_over(folder)  # run through sudo: the results are the user's
    return folder


def _shard(shard: Shard | str | None, out: str | Path | None) -> Shard | None:
    """`run`'s shard, parsed; ValueError without the folder every shard writes into."""
    if isinstance(shard, str):
        shard = parse_shard(shard)
    if shard is not None and out is None:
        raise ValueError(f"--shard {shard} needs --out DIR: every shard of a plan writes into "
                         "the same results folder")
    return shard


def _refuse_early(runs: list[Run], jobs: int | None) -> int:
    """What `run` refuses before any folder is made (jobs, the plan, this machine); the
    lab kernels at once."""
    jobs = jobs_for(runs, jobs)
    check_plan(runs)
    host_runs = [r for r in runs if r.config.host_kernel == "host"]
    if host_runs:
        preflight(host_runs[0].config)
    return jobs


def _options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The plan's options as plan.json records them (what a resume must repeat)."""
    return dict(options or {"reps": None, "only": [], "quick": False, "set": []})


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
        shard: Shard | str | None = None,
        on_start: Callable[[RunStart], None] | None = None, jobs: int | None = None
        ) -> RunResult:
    """Run a plan into `out` (a new results/<name>-<time> folder if None; an existing
    folder resumes), then analyse it (report.html) unless `analyze` is False or nothing
    completed. `runs` defaults to `plan(config)`; `progress` is called once per finished
    run with a RunProgress(run_id, status, done, total, manifest). Host-kernel runs need
    root; lab-kernel runs boot the lab kernel (as `pathdiv run` does). `on_start` is
    called with a `RunStart` once the folder exists, before the first run. `shard`
    (a Shard or "I/N") runs one shard of `runs`, into `out`, which every shard of the
    plan shares (its plan.json lists the whole plan; a folder holding another plan's
    shards is refused before any run); a shard does not analyse, and one without runs
    does nothing (`RunResult.outcome` lists no run). `options`: the plan's options as
    plan.json records them. `jobs`: lab kernels at once for the virtual-clock runs
    (default: one per core, as RAM allows; real-clock and host-kernel runs always run
    one at a time)."""
    cfg = load_config(config)
    planned = runs if runs is not None else plan(cfg)
    shard = _shard(shard, out)
    opts = _options(options)
    runs = planned
    if shard is not None:
        opts["shards"] = shard.count
        runs = shard_runs(planned, shard)
        if not runs:
            return RunResult(Path(str(out)), PlanOutcome(Path(str(out))))
    jobs = _refuse_early(runs, jobs)
    folder = prepare_folder(cfg, Path(out) if out is not None else None)
    if shard is not None:  # refused here, before any run, if the folder's shards differ
        register_plan(folder, cfg, planned, opts)
    if on_start is not None:
        on_start(RunStart(folder, len(runs), len(planned), shard, jobs,
                          jobs > 1 and virtual_runs(runs) > 1))
    try:
        outcome = run_plan(cfg, runs, folder, quiet=quiet, options=opts,
                           plan_runs=planned if shard is not None else None, shard=shard,
                           progress=progress, jobs=jobs, estimator=history.estimator())
        result = RunResult(folder, outcome)
        if analyze and shard is None and outcome.count("complete"):
            try:
                result.report = _analyze_folder(folder)
            except Exception as exc:  # the runs stay; `pathdiv analyze DIR` redoes this
                result.analysis_error = f"{type(exc).__name__}: {exc}"
    finally:
        # run through sudo: the results are the user's, once root has finished writing
        # them (the analysis too: a folder of the user's could hold a link by then)
        hand_over(folder)
    return result
