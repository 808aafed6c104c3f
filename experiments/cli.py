"""The `pathdiv` command line. Only this module turns errors into exit codes."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pathdiv.experiments.api as api
from pathdiv.experiments.api.live import KernelNetwork
from pathdiv.experiments.classroom.probe import format_probe, run_probe
from pathdiv.experiments.classroom.shell import PathdivCLI
from pathdiv.experiments.cluster.shards import describe_shards, parse_shard, shard_runs
from pathdiv.experiments.cluster.slurm import (
    SlurmError,
    SlurmJob,
    submit,
    task_mem,
    write_scripts,
)
from pathdiv.experiments.cluster.status import folder_status
from pathdiv.experiments.config.load import Config, ConfigError
from pathdiv.experiments.config.planes import BASELINE, PLANES
from pathdiv.experiments.config.results_folder import hand_over
from pathdiv.experiments.config.safe_yaml import shorten_text
from pathdiv.experiments.config.schema import MapOf, iter_leaves
from pathdiv.experiments.dataplane.base import DataPlaneError
from pathdiv.experiments.dataplane.bmv2.plane import DEBUG_ENV
from pathdiv.experiments.dataplane.select import Choice, times
from pathdiv.experiments.execute.boot import (
    LabKernelUnavailable,
    describe_lab_kernel,
    guest_kernel_description,
)
from pathdiv.experiments.execute.lab_command import run_in_lab_kernel
from pathdiv.experiments.execute.run import free_mb
from pathdiv.experiments.fabric.buildcost import build_work
from pathdiv.experiments.fabric.clean import clean
from pathdiv.experiments.fabric.environment import EnvironmentProblem
from pathdiv.experiments.plan import power as plan_power
from pathdiv.experiments.plan.budget import plan_need_mb, plan_total_mb
from pathdiv.experiments.plan.design import design_problems, observations_per_cell
from pathdiv.experiments.plan.estimate import format_duration
from pathdiv.experiments.plan.lanes import own_boot, virtual_runs
from pathdiv.experiments.plan.memory import chosen as memory_chosen
from pathdiv.experiments.plan.runs import (
    Run,
    describe,
    expand,
    parse_only,
    quick_config,
    quick_flow_types,
)
from pathdiv.experiments.running import NetworkError
from pathdiv.kernels.build import LabKernelError
from pathdiv.kernels.processes import restore_handlers, stop_on_signals
from pathdiv.topologies.fattree import FatTree

log = logging.getLogger("pathdiv")


def _setup_logging(level: int) -> None:
    """One line per phase on stderr. The "pathdiv" logger is set up by hand: once Mininet
    is imported, every logger created after it is Mininet's, with its own handler and
    level, which `logging.basicConfig` would not touch."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("pathdiv: %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(level)
    log.propagate = False
    logging.basicConfig(level=level, format="pathdiv: %(message)s")


def _config(args: argparse.Namespace) -> Config:
    return api.load_config(args.config, args.set or [])


def cmd_check(args: argparse.Namespace) -> int:
    cfg = _config(args)
    runs = expand(cfg)
    api.check_plan(runs)  # every run against its kernel and the capture budget
    jobs = api.jobs_for(runs, args.jobs)  # a --jobs this machine cannot hold is refused
    if args.shard:
        try:  # a bad --shard is refused before anything is printed
            shard = parse_shard(args.shard)
        except ValueError as exc:
            raise ConfigError([str(exc)], cfg.source) from None
        if shard.count > len(runs):
            raise ConfigError([f"--shard {shard}: N must be at most {len(runs)}, the runs of "
                               "the plan (an empty shard would only hold a node)"], cfg.source)
    topo = cfg.topology()
    if isinstance(topo, FatTree):
        print(f"{cfg.source}: valid. k={topo.k} fat tree: {len(topo.switches)} switches, "
              f"{len(topo.hosts)} hosts, {len(topo.links)} links; dataplane: "
              f"{cfg.dataplane}")
        print(build_work(runs[0].config).text())
    else:
        print(f"{cfg.source}: valid. {topo.count} parallel paths between dual-homed h1 "
              f"and h2: {len(topo.switches)} routers, {len(topo.hosts)} hosts "
              f"({len(topo.background_pairs())} background pairs), {len(topo.links)} links; "
              "plain routing, no switching mode")
    print(f"plan: {len(runs)} run(s)")
    _print_design(runs)
    if args.shard:
        shard = parse_shard(args.shard)
        print(describe_shards(runs, shard.count))
        runs = shard_runs(runs, shard)
        print(f"shard {shard} runs {len(runs)} of them:")
    choices = api.plane_choices(runs)
    print(describe(runs, {rid: c.plane or "none" for rid, c in choices.items()}))
    _print_planes(runs, choices)
    _print_time(runs, jobs, choices)
    for line in plan_power.lines(runs, args.pilot, cfg.data):
        print(line)
    lab_runs = sum(1 for r in runs if r.config.host_kernel == "lab")
    if lab_runs:
        alone = sum(map(own_boot, runs))
        how = (f"{alone} with transfers above lab.own_boot_above_kb in a boot each, the "
               "others in one boot per lab kernel" if alone else "one boot per lab kernel")
        print(f"lab kernel: {lab_runs} run(s) on the pathdiv lab kernel, {how}; "
              f"{describe_lab_kernel()}")
        print(memory_chosen(runs))
    return 0


def _print_planes(runs: list[Run], choices: dict[str, Choice]) -> None:
    """Which data plane the runs get here and why, and the one thing to install to get
    the fastest P4 plane where a run is not on it."""
    groups: dict[tuple[str | None, str, str], list[Run]] = {}
    for run in runs:
        c = choices[run.run_id]
        groups.setdefault((c.plane, c.rule, c.found), []).append(run)
    for (plane, rule, found), mine in groups.items():
        if plane is None:
            print(f"data plane: {len(mine)} run(s) cannot run here: {rule}")
            continue
        cost = "" if plane == BASELINE else (
            f"; expected {_span(choices[r.run_id].ratio for r in mine)}x the {BASELINE} "
            f"plane's time per run, {_span(choices[r.run_id].cell_ratio for r in mine)}x "
            "per cell")
        dear: dict[str, list[float]] = {}
        for r in mine:
            for other, r_other in choices[r.run_id].too_dear:
                dear.setdefault(other, []).append(r_other)
        cost += "".join(f"; {other} would take {_span(rs)}x per cell"
                        for other, rs in dear.items())
        lab = sum(1 for r in mine if r.config.host_kernel == "lab")
        note = (f"; {lab} in the lab kernel, whose P4 programs the host compiles before "
                "it boots" if PLANES[plane].p4 and lab else "")
        print(f"data plane: {len(mine)} run(s) on {plane} ({rule}{cost})"
              + (f"; {found}" if found else "") + note)
    for hint in dict.fromkeys(c.hint for c in choices.values() if c.hint):
        print(f"  {hint}")


def _span(values: Iterable[float]) -> str:
    """'1.2' or '1.1-1.4': the range of `values` to two figures."""
    seen = list(values)
    low, high = times(min(seen)), times(max(seen))
    return low if low == high else f"{low}-{high}"


def _print_time(runs: list[Run], jobs: int, choices: dict[str, Choice]) -> None:
    """The plan's expected wall time on this machine, and where the costs came from."""
    t = api.expected_time(runs, jobs, choices=choices)
    used = sorted({c.plane for c in choices.values() if c.plane is not None})
    also = (f" ({format_duration(t.nftables_seconds)} on the {BASELINE} plane)"
            if round(t.seconds) != round(t.nftables_seconds) else "")
    if virtual_runs(runs) > 1 and t.jobs > 1:
        how = (f"{t.jobs} lab kernels at once (--jobs; one at a time "
               f"~{format_duration(t.serial_seconds)})")
    else:
        how = "one run at a time"
    print(f"expected wall time: ~{format_duration(t.seconds)} for the runs on the "
          f"{' and '.join(used) or 'no'} data plane{also}, {how}; analysis not included")
    print(f"  estimated from {t.source}")


def _print_design(runs: list[Run]) -> None:
    """Capture need and observations per cell of the plan, or what falls short."""
    need, which = plan_need_mb(runs)
    if which:
        budget = runs[0].config.data["capture"]["budget_mb"]
        print(f"captures: up to {need:.0f} MB per run ({which}); capture.budget_mb: {budget}")
        total, free = plan_total_mb(runs), free_mb(Path("results"))
        print(f"  all {len(runs)} runs together up to {total / 1000:.1f} GB (an upper bound; "
              f"{free / 1000:.1f} GB free under "
              f"results/): a run whose captures may not fit the space left is not started")
    cells = observations_per_cell(runs) if runs and runs[0].factors else {}
    if cells:
        print(f"design: {len(cells)} cells, {min(cells.values())}-{max(cells.values())} "
              f"observations each; designations "
              f"{runs[0].config.data['workload']['designations']}")
    for problem in design_problems(runs):
        print(f"warning: {problem}")
    if runs and runs[0].factors:
        from pathdiv.analysis.stats.scope import analysis_tests, describe_tests, scopes_of

        data = runs[0].config.data
        ivs = data["analysis"]["ivs"] or list(data["factors"])
        levels = {f: list(lv) for f, lv in data["factors"].items()}
        tests = analysis_tests(levels, ivs, scopes_of(data["factors"]))
        print("analysis (per cluster " + " x ".join(data["analysis"]["clusters"]) + "):")
        for line in describe_tests(tests):
            print(f"  {line}")


def _outside_lab_kernel(cfg: Config) -> bool:
    """hosts.kernel: lab asked for on another kernel: the command boots the lab kernel."""
    return cfg.host_kernel == "lab" and guest_kernel_description() is None


def _in_lab_kernel(args: argparse.Namespace, cfg: Config) -> int:
    try:
        return run_in_lab_kernel(args.command, cfg, json_out=getattr(args, "json", False),
                                 verbose=args.verbose)
    except (LabKernelError, LabKernelUnavailable) as exc:
        raise NetworkError(f"hosts.kernel: lab: {exc}") from exc


def cmd_net(args: argparse.Namespace) -> int:
    cfg = _config(args)
    cfg.fat_tree("`pathdiv net`")
    if _outside_lab_kernel(cfg):
        return _in_lab_kernel(args, cfg)
    with api.network(cfg) as live:
        assert isinstance(live, KernelNetwork)  # the lab kernel's case left above
        log.info("%s", live.dataplane)
        print(f"pathdiv: k={live.topo.k} fat tree up ({live.dataplane}); type 'help', "
              "'exit' ends; lab commands: paths, counters, mode, flow, draw", flush=True)
        # Ctrl-C belongs to the CLI (it stops the command running in a node, as often as
        # typed); SIGTERM and SIGHUP still end `net` and tear the network down
        own = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            PathdivCLI(live.net)
        finally:
            signal.signal(signal.SIGINT, own)
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    cfg = _config(args)
    cfg.fat_tree("`pathdiv probe`")
    if cfg.transport != "mptcp":
        cfg = cfg.with_overrides([("hosts.transport", "mptcp")])
    if _outside_lab_kernel(cfg):
        return _in_lab_kernel(args, cfg)
    with api.network(cfg) as live:
        assert isinstance(live, KernelNetwork)  # the lab kernel's case left above
        log.info("%s", live.dataplane)
        result = run_probe(live.net)
    print(json.dumps(result) if args.json else format_probe(result))
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    print(clean().summary())
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    for key, leaf in iter_leaves():
        if isinstance(leaf, MapOf):
            print(f"{key + '.<name>':<34} {leaf.doc} (at most {leaf.max_items})")
            continue
        allowed = f" [{' | '.join(map(str, leaf.choices))}]" if leaf.choices else ""
        bounds = getattr(leaf.check, "allowed", None)
        allowed += f" [allowed: {bounds}]" if bounds else ""
        print(f"{key:<34} {leaf.doc}{allowed} (default: {leaf.default!r})")
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    report = api.analyze(args.folder, stats_only=args.stats_only,
                         include_invalid=args.include_invalid, design=args.design)
    print(f"report: {report}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from pathdiv.analysis.report import stability  # the analysis only, no emulation

    argv = [str(args.first), str(args.second)]
    argv += ["--design", str(args.design)] if args.design else []
    argv += ["--write", str(args.write)] if args.write else []
    return stability.main(argv, prog="pathdiv compare")


def _plan(args: argparse.Namespace) -> tuple[Config, list[Run], dict[str, Any]]:
    """The config, the runs and the plan options `run` and `slurm` take from the command."""
    cfg = _config(args)
    if args.quick:
        cfg = quick_config(cfg)
    if args.reps is not None and args.reps < 1:
        raise ValueError(f"--reps {args.reps}: expected an integer >= 1")
    reps = args.reps if args.reps is not None else (1 if args.quick else None)
    runs = api.plan(cfg, repetitions=reps, flow_types=quick_flow_types(cfg) if args.quick
                    else None, only=parse_only(args.only or []))
    if not runs:
        raise ValueError("the plan is empty; check --only against `pathdiv check CONFIG`")
    options = {"reps": reps, "only": args.only or [], "quick": args.quick,
               "set": args.set or []}
    return cfg, runs, options


def cmd_run(args: argparse.Namespace) -> int:
    cfg, runs, options = _plan(args)
    folder_seen: list[Path] = []

    def started(start: api.RunStart) -> None:
        folder_seen.append(start.folder)
        if not args.quiet:
            part = (f"shard {start.shard}: {start.runs} of {start.planned}" if start.shard
                    else f"{start.runs}")
            at_once = (f", up to {start.jobs} lab kernels at once (--jobs)" if start.at_once
                       else "")
            print(f"pathdiv: {part} run(s) into {start.folder}{at_once}", file=sys.stderr)

    try:
        result = api.run(cfg, args.out, runs=runs, quiet=args.quiet, options=options,
                         shard=args.shard, on_start=started,
                         analyze=not (args.shard or args.no_analyze), jobs=args.jobs)
    except KeyboardInterrupt as exc:
        again = f" --shard {args.shard}" if args.shard else ""
        where = folder_seen[0] if folder_seen else args.out
        print(f"pathdiv: interrupted{_by(exc)}; the network was torn down and no partial run is "
              f"marked complete. Resume with: pathdiv run {args.config}{again} --out "
              f"{where} (with the same options)", file=sys.stderr)
        return 130
    return _ran(args, result, len(runs))


def _ran(args: argparse.Namespace, result: api.RunResult, planned: int) -> int:
    """What `pathdiv run` says once its runs ended, and its exit status."""
    shard = args.shard
    folder, outcome = result.folder, result.outcome
    if shard and not outcome.statuses:
        print(f"pathdiv: shard {shard} has no runs (the plan has {planned}); nothing to do")
        return 0
    print(f"{folder}: {outcome.summary()}")
    if shard:
        print(f"pathdiv: shard {shard} finished; a shard does not analyse. Once every shard "
              f"is done (`pathdiv status {folder}`), run `pathdiv analyze {folder}`")
        return 1 if outcome.count("failed") else 0
    if args.no_analyze:
        return 1 if outcome.count("failed") else 0
    if not outcome.count("complete"):
        print(f"pathdiv: no complete run to analyse; see the reasons in {folder}/plan.json",
              file=sys.stderr)
        return 1
    if result.analysis_error:  # the runs stay; analysis can be redone from the files
        print(f"pathdiv: analysis failed ({result.analysis_error}); the runs are kept "
              f"in {folder}: fix the cause and run `pathdiv analyze {folder}`",
              file=sys.stderr)
        return 1
    print(f"report: {result.report}")
    if outcome.count("failed"):
        print(f"pathdiv: {outcome.count('failed')} run(s) failed (reasons in "
              f"{folder}/plan.json); resume with --out {folder} to retry them",
              file=sys.stderr)
        return 1
    return 0


def _by(exc: KeyboardInterrupt) -> str:
    """' by SIGTERM' when a signal other than Ctrl-C's stopped the command."""
    name = str(exc.args[0]) if exc.args else "SIGINT"
    return f" by {name}" if name != "SIGINT" else ""


def cmd_status(args: argparse.Namespace) -> int:
    status = folder_status(args.folder)
    print(json.dumps(status.to_dict(), indent=2) if args.json else status.summary())
    return 0


def _launcher() -> list[str]:
    """How a cluster node starts this pathdiv: its console script, else the module."""
    script = Path(sys.executable).parent / "pathdiv"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "pathdiv.experiments.cli"]


def cmd_slurm(args: argparse.Namespace) -> int:
    cfg, runs, options = _plan(args)
    if not 1 <= args.shards <= len(runs):
        raise ValueError(f"--shards {args.shards}: expected 1 to {len(runs)} (the plan has "
                         f"{len(runs)} run(s); an empty shard would only hold a node)")
    folder = api.shard_plan(cfg, args.out.resolve(), runs, args.shards, options)
    plan_args = [a for item in args.set or [] for a in ("--set", item)]
    plan_args += [a for item in args.only or [] for a in ("--only", item)]
    plan_args += ["--reps", str(args.reps)] if args.reps is not None else []
    plan_args += ["--quick"] if args.quick else []
    job = SlurmJob(name=cfg.name, command=_launcher(), config=Path(cfg.source).resolve(),
                   out=folder, shards=args.shards, plan_args=plan_args,
                   partition=args.partition, time_limit=args.time,
                   mem=args.mem or task_mem(runs),
                   cpus=args.cpus, exclusive=not args.shared_nodes, workdir=Path.cwd())
    array, analysis = write_scripts(job)
    hand_over(folder)  # the scripts too
    print(f"plan: {len(runs)} run(s) in {args.shards} shard(s) into {folder}")
    print(describe_shards(runs, args.shards))
    if args.dry_run:
        print(f"wrote {array} and {analysis}; submit them with:\n"
              f"  ARRAY=$(sbatch --parsable {array})\n"
              f"  sbatch --dependency=afterok:$ARRAY --kill-on-invalid-dep=yes {analysis}")
        return 0
    array_id, analysis_id = submit(array, analysis)
    print(f"submitted job array {array_id} ({args.shards} task(s)) and analysis job "
          f"{analysis_id} (after every task exits 0); follow with `pathdiv status {folder}`")
    return 0


JOBS_HELP = ("lab kernels at once for the virtual-clock runs (default: one per core, as "
             "RAM allows); real-clock and host-kernel runs run one at a time")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="pathdiv",
        description="Emulated data-center fat trees: ECMP, packet spraying and MPTCP, "
                    "measured and compared with MANOVA.",
    )
    ap.add_argument("-v", "--verbose", action="store_true", help="log every phase")
    ap.add_argument("--debug", action="store_true",
                    help="show the traceback of an unexpected error; bmv2 switches write "
                         "console logs and per-port pcaps (labs)")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def with_config(name: str, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_)
        p.add_argument("config", help="YAML config, e.g. configs/noisy.yaml")
        p.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a config key, e.g. --set switching.mode=spray "
                            "(repeatable; validated like the file)")
        return p

    p = with_config("check", "validate a config and print its run plan; starts nothing")
    p.add_argument("--shard", metavar="I/N", help="also print how the plan splits into N "
                   "shards and the runs of shard I (counted from 0)")
    p.add_argument("--jobs", type=int, metavar="N", help=JOBS_HELP)
    p.add_argument("--pilot", type=Path, metavar="DIR", help="results folder of a pilot run "
                   "of this config: the spreads the power lines come from")
    p.set_defaults(func=cmd_check)
    with_config("net", "build the network and open the Mininet CLI").set_defaults(func=cmd_net)
    p = with_config("probe", "build the network, measure path spreading and link fidelity")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_probe)
    p = with_config("run", "run the whole plan (resumable), then analyse it")
    p.add_argument("--out", type=Path, help="results folder; an existing one is resumed "
                   "(default: results/<name>-<YYYYmmdd-HHMMSS>)")
    p.add_argument("--reps", type=int, help="repetitions (overrides the config's)")
    p.add_argument("--only", action="append", metavar="KEY=VALUE",
                   help="restrict the plan to one factor level or flow type, e.g. "
                        "--only switching=ecmp-mptcp --only flow_type=query (repeatable)")
    p.add_argument("--quick", action="store_true", help="one repetition, query+short flow "
                   "types, one iteration: a fast look, not a study")
    p.add_argument("--quiet", action="store_true", help="no progress bar or per-run lines")
    p.add_argument("--no-analyze", action="store_true", help="stop after the runs; "
                   "`pathdiv analyze DIR` does the analysis later")
    p.add_argument("--shard", metavar="I/N", help="run only shard I of N (I counts from 0) "
                   "of the plan, balanced by expected run time, into the shared --out "
                   "folder; no analysis (run `pathdiv analyze DIR` after the last shard)")
    p.add_argument("--jobs", type=int, metavar="N", help=JOBS_HELP)
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("status", help="which runs of a results folder are complete, failed, "
                       "running or pending, per shard")
    p.add_argument("folder", type=Path, help="a results folder of `pathdiv run`")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_status)
    p = with_config("slurm", "run the plan as a Slurm job array of shards plus an analysis "
                    "job that waits for it")
    p.add_argument("--out", type=Path, required=True, help="results folder on a file "
                   "system every node mounts at the same path")
    p.add_argument("--shards", type=int, required=True, help="number of array tasks "
                   "(shards of the plan); one emulation per node at a time")
    p.add_argument("--partition", help="Slurm partition of the jobs (default: the cluster's)")
    p.add_argument("--time", help="time limit of one task, e.g. 2:00:00 (default: the "
                   "partition's)")
    p.add_argument("--mem", help="memory of one task (default: 6G, or what the lab "
                   "kernel's lab.memory_mb, its jail and the host take when that is more; "
                   "host-kernel runs need about 1G)")
    p.add_argument("--cpus", type=int, default=2, help="cores of one task (default: 2)")
    p.add_argument("--shared-nodes", action="store_true", help="do not ask for whole nodes "
                   "(--exclusive); only where nothing else runs on them")
    p.add_argument("--reps", type=int, help="repetitions (as for `pathdiv run`)")
    p.add_argument("--only", action="append", metavar="KEY=VALUE",
                   help="restrict the plan (as for `pathdiv run`; repeatable)")
    p.add_argument("--quick", action="store_true", help="the --quick plan of `pathdiv run`")
    p.add_argument("--dry-run", action="store_true", help="write the batch scripts into "
                   "DIR/slurm/ and print the sbatch commands; submit nothing")
    p.set_defaults(func=cmd_slurm)
    p = sub.add_parser("analyze", help="recompute metrics, statistics and report of a folder")
    p.add_argument("folder", type=Path, help="a results folder written by `pathdiv run`")
    p.add_argument("--stats-only", action="store_true",
                   help="skip the captures: analyse an existing metrics.csv (data from "
                        "elsewhere)")
    p.add_argument("--include-invalid", action="store_true",
                   help="also analyse runs the fidelity monitor judged invalid (left out "
                        "by default; see docs/fidelity.md)")
    p.add_argument("--design", metavar="CONFIG",
                   help="take the analysis design (the analysis section and the factor "
                        "levels' applies_to) from CONFIG instead of the folder's "
                        "config.yaml, e.g. to re-analyse a folder run before a level said "
                        "where it acts; the report says so")
    p.set_defaults(func=cmd_analyze)
    p = sub.add_parser("compare", help="did the verdicts of one config hold between two "
                       "seeds? (the seed-to-seed stability table)")
    p.add_argument("first", type=Path, help="a results folder (or docs/reproduction/<name>)")
    p.add_argument("second", type=Path, help="the same config run with another seed")
    p.add_argument("--design", metavar="CONFIG",
                   help="mark both with this config's analysis section (as for analyze)")
    p.add_argument("--write", metavar="FILE", help="put the table between the file's "
                   "<!-- stability:begin --> and <!-- stability:end --> markers")
    p.set_defaults(func=cmd_compare)
    sub.add_parser("clean", help="remove processes/namespaces a killed run left behind") \
        .set_defaults(func=cmd_clean)
    sub.add_parser("keys", help="list every config key with its meaning and default") \
        .set_defaults(func=cmd_keys)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # SIGINT, SIGTERM and SIGHUP (also when started by a script with `&`, which ignores
    # SIGINT) stop every command as Ctrl-C does; a second signal cannot cut the teardown
    handlers = stop_on_signals()
    try:
        return _main(args)
    finally:
        restore_handlers(handlers)


def _main(args: argparse.Namespace) -> int:
    if args.debug:
        os.environ[DEBUG_ENV] = "1"  # read by every bmv2 switch the network starts
    _setup_logging(logging.INFO if args.verbose else logging.WARNING)
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a reader that left (`| head -1`) shows here, not at exit
        return code
    except (ConfigError, EnvironmentProblem) as exc:
        print(f"pathdiv: {exc}", file=sys.stderr)
        return 2
    except (NetworkError, DataPlaneError, SlurmError, ValueError) as exc:
        print(f"pathdiv: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print(f"pathdiv: interrupted{_by(exc)}; the network was torn down", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `pathdiv check ... | head`: the reader left, nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # the last resort: one line, never a traceback by default
        if args.debug:
            raise
        print(f"pathdiv: unexpected {type(exc).__name__} ({shorten_text(str(exc), 200)}); "
              "nothing more was started. Run again with --debug for the traceback, and "
              "report it", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
