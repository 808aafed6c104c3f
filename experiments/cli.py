"""The `pathdiv` command line. Only this module turns errors into exit codes."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from experiments.config import Config, ConfigError, load
from experiments.dataplane.base import DataPlaneError
from experiments.environment import EnvironmentProblem, preflight
from experiments.network import LabError
from experiments.schema import MapOf, iter_leaves

log = logging.getLogger("pathdiv")


def _config(args: argparse.Namespace) -> Config:
    return load(args.config, args.set or [])


def cmd_check(args: argparse.Namespace) -> int:
    from experiments.dataplane.select import select_dataplane
    from experiments.plan import describe, expand

    cfg = _config(args)
    runs = expand(cfg)
    topo = cfg.topology()
    _, reason = select_dataplane(cfg.dataplane)
    print(f"{cfg.source}: valid. k={topo.k} fat tree: {len(topo.switches)} switches, "
          f"{len(topo.hosts)} hosts, {len(topo.links)} links; {reason}")
    print(f"plan: {len(runs)} run(s)")
    print(describe(runs))
    lab_runs = sum(1 for r in runs if r.config.host_kernel == "lab")
    if lab_runs:
        from experiments.labruns import describe_lab_vm

        print(f"lab VM: {lab_runs} run(s) on the pathdiv lab kernel, in one boot; "
              f"{describe_lab_vm()}")
    return 0


def _lab(args: argparse.Namespace, cfg: Config) -> tuple[object, str]:
    from experiments.dataplane.select import select_dataplane
    from experiments.network import Lab

    if cfg.host_kernel == "lab":
        raise LabError("hosts.kernel: lab runs inside the pathdiv lab VM, which `net` and "
                       "`probe` do not boot yet; use hosts.kernel: host here")
    preflight(cfg)
    cls, reason = select_dataplane(cfg.dataplane)
    workdir = Path(tempfile.mkdtemp(prefix="pathdiv-lab-"))
    return Lab(cfg, cls, workdir), reason


def cmd_net(args: argparse.Namespace) -> int:
    cfg = _config(args)
    lab, reason = _lab(args, cfg)
    log.info("%s", reason)
    from experiments.labcli import PathdivCLI

    with lab as running:  # type: ignore[attr-defined]
        print(f"pathdiv: k={running.topo.k} fat tree up ({reason}); type 'help', 'exit' "
              "ends; lab commands: paths, counters, mode, flow", flush=True)
        PathdivCLI(running)
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    from experiments.probe import format_probe, run_probe

    cfg = _config(args)
    if cfg.transport != "mptcp":
        cfg = cfg.with_overrides([("hosts.transport", "mptcp")])
    lab, reason = _lab(args, cfg)
    log.info("%s", reason)
    with lab as running:  # type: ignore[attr-defined]
        result = run_probe(running)
    print(json.dumps(result) if args.json else format_probe(result))
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    from experiments.clean import clean

    print(clean().summary())
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    for key, leaf in iter_leaves():
        if isinstance(leaf, MapOf):
            print(f"{key + '.<name>':<34} {leaf.doc}")
            continue
        allowed = f" [{' | '.join(map(str, leaf.choices))}]" if leaf.choices else ""
        print(f"{key:<34} {leaf.doc}{allowed} (default: {leaf.default!r})")
    return 0


def analyze_folder(folder: Path, stats_only: bool = False,
                   include_invalid: bool = False) -> Path:
    """Metrics from the captures (unless stats_only), then statistics and the report.

    Reads only files, so a results folder can be re-analysed anywhere, any time."""
    from analysis.report import write_report

    if not folder.is_dir():
        raise ValueError(f"{folder}: no such results folder")
    if not stats_only:
        from analysis.metrics import compute_metrics

        if not (folder / "runs").is_dir():
            raise ValueError(f"{folder} has no runs/ folder; for a folder holding only "
                             "metrics.csv use `pathdiv analyze --stats-only`")
        path = compute_metrics(folder)
        log.info("metrics: %s", path)
    elif not (folder / "metrics.csv").is_file():
        raise ValueError(f"{folder} has no metrics.csv to analyse")
    return write_report(folder, stats_only=stats_only, include_invalid=include_invalid)


def cmd_analyze(args: argparse.Namespace) -> int:
    report = analyze_folder(args.folder, stats_only=args.stats_only,
                            include_invalid=args.include_invalid)
    print(f"report: {report}")
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def cmd_run(args: argparse.Namespace) -> int:
    from experiments.plan import expand
    from experiments.runner import (
        parse_only,
        prepare_folder,
        quick_config,
        quick_flow_types,
        run_plan,
    )

    cfg = _config(args)
    if args.quick:
        cfg = quick_config(cfg)
    if args.reps is not None and args.reps < 1:
        raise ValueError(f"--reps {args.reps}: expected an integer >= 1")
    reps = args.reps if args.reps is not None else (1 if args.quick else None)
    runs = expand(cfg, repetitions=reps, flow_types=quick_flow_types(cfg) if args.quick
                  else None, only=parse_only(args.only or []))
    if not runs:
        raise ValueError("the plan is empty; check --only against `pathdiv check CONFIG`")
    host_runs = [r for r in runs if r.config.host_kernel == "host"]
    if host_runs:
        preflight(host_runs[0].config)
    folder = prepare_folder(cfg, args.out)
    options = {"reps": reps, "only": args.only or [], "quick": args.quick,
               "set": args.set or []}
    if not args.quiet:
        print(f"pathdiv: {len(runs)} run(s) into {folder}", file=sys.stderr)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # `kill`, `timeout`: as Ctrl-C
    try:
        outcome = run_plan(cfg, runs, folder, quiet=args.quiet, options=options)
    except KeyboardInterrupt:
        print(f"pathdiv: interrupted; the network was torn down and no partial run is "
              f"marked complete. Resume with: pathdiv run {args.config} --out {folder} "
              "(with the same options)", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(f"{folder}: {outcome.summary()}")
    if args.no_analyze:
        return 1 if outcome.count("failed") else 0
    if not outcome.count("complete"):
        print(f"pathdiv: no complete run to analyse; see the reasons in {folder}/plan.json",
              file=sys.stderr)
        return 1
    try:
        report = analyze_folder(folder)
    except Exception as exc:  # the runs stay; analysis can be redone from the files
        print(f"pathdiv: analysis failed ({type(exc).__name__}: {exc}); the runs are kept "
              f"in {folder}: fix the cause and run `pathdiv analyze {folder}`",
              file=sys.stderr)
        return 1
    print(f"report: {report}")
    if outcome.count("failed"):
        print(f"pathdiv: {outcome.count('failed')} run(s) failed (reasons in "
              f"{folder}/plan.json); resume with --out {folder} to retry them",
              file=sys.stderr)
        return 1
    return 0


def cmd_not_yet(name: str, issue: int) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        print(f"pathdiv {name}: not available yet (tracked in issue {issue}); nothing was run",
              file=sys.stderr)
        return 3

    return run


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="pathdiv",
        description="Emulated data-center fat trees: ECMP, packet spraying and MPTCP, "
                    "measured and compared with MANOVA.",
    )
    ap.add_argument("-v", "--verbose", action="store_true", help="log every phase")
    ap.add_argument("--debug", action="store_true",
                    help="bmv2 switches write console logs and per-port pcaps (labs)")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def with_config(name: str, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_)
        p.add_argument("config", help="YAML config, e.g. configs/noisy.yaml")
        p.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a config key, e.g. --set switching.mode=spray "
                            "(repeatable; validated like the file)")
        return p

    with_config("check", "validate a config and print its run plan; starts nothing") \
        .set_defaults(func=cmd_check)
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
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("analyze", help="recompute metrics, statistics and report of a folder")
    p.add_argument("folder", type=Path, help="a results folder written by `pathdiv run`")
    p.add_argument("--stats-only", action="store_true",
                   help="skip the captures: analyse an existing metrics.csv (data from "
                        "elsewhere)")
    p.add_argument("--include-invalid", action="store_true",
                   help="also analyse runs the fidelity monitor judged invalid (left out "
                        "by default; see docs/fidelity.md)")
    p.set_defaults(func=cmd_analyze)
    sub.add_parser("clean", help="remove processes/namespaces a killed run left behind") \
        .set_defaults(func=cmd_clean)
    sub.add_parser("keys", help="list every config key with its meaning and default") \
        .set_defaults(func=cmd_keys)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.debug:
        from experiments.dataplane.bmv2 import DEBUG_ENV

        os.environ[DEBUG_ENV] = "1"  # read by every bmv2 switch the lab starts
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="pathdiv: %(message)s",
    )
    try:
        return int(args.func(args))
    except (ConfigError, EnvironmentProblem) as exc:
        print(f"pathdiv: {exc}", file=sys.stderr)
        return 2
    except (LabError, DataPlaneError, ValueError) as exc:
        print(f"pathdiv: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pathdiv: interrupted; the network was torn down", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
