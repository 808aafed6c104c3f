"""Execute a run plan into a results folder, resumably.

Layout (every file written atomically):

    results/<name>-<YYYYmmdd-HHMMSS>/
        config.yaml                 the resolved config as run
        plan.json                   every planned run with its status and reason
        runs/<run_id>/manifest.json written last: a run is complete only when it says so
        runs/<run_id>/transfers.csv one row per transfer
        runs/<run_id>/captures/     one pcap per link (headers only)
        runs/<run_id>/lab/          node scripts and server logs of the run
        runs/<run_id>/fidelity.json the fidelity monitor's record and verdict
        runs/<run_id>/attempt-<n>/  an earlier attempt judged invalid, kept whole

A run's status is `complete`, `failed` (the network or the workload broke; the reason is
in `error`) or `skipped` (this machine cannot run it as configured, e.g. hosts.kernel:
lab where the lab kernel cannot run; never relabelled as something else). Resuming a folder
skips complete runs and redoes every other run from scratch (its folder is deleted first).

Runs with hosts.kernel: host execute here, in plan order; then the runs with
hosts.kernel: lab, per clock (execute.lab_kernel): on the virtual clock spread over
`jobs` lab kernels at once (one boot each, its runs in plan order; plan.lanes deals
them by expected time), on the real clock in one boot, one run at a time. Every
complete run's wall time goes into this machine's history (plan.history), which
calibrates the next estimates.

Pure parts (folder naming, state of a run folder, what to resume, manifest skeletons)
are kept apart from `execute_run`/`run_plan`, which build networks.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import itertools
import json
import logging
import os
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from tqdm import tqdm

from pathdiv.analysis.metrics.paths_run import PATHS_RESULT
from pathdiv.experiments.cluster.planfile import (
    annotate_shards,
    merged_statuses,
    plan_document,
    update_plan,
)
from pathdiv.experiments.cluster.shards import Shard, shard_of
from pathdiv.experiments.cluster.tracking import RunTracker, busy_runs
from pathdiv.experiments.config.load import Config, ConfigError, read_config_text, validate
from pathdiv.experiments.config.results_folder import MARKER, out_problem
from pathdiv.experiments.config.safe_yaml import YamlRefused, load_text, shorten_text
from pathdiv.experiments.dataplane.select import choose, choose_runs
from pathdiv.experiments.execute.guestcost import GuestCost, forks
from pathdiv.experiments.execute.keeper import NetworkKeeper
from pathdiv.experiments.execute.lab_kernel import (
    LabKernelUnavailable,
    LabSession,
    guest_kernel_description,
    heartbeat_path,
    host_cpus,
    lab_kernel_image,
    lane_cpu,
    progress_file,
)
from pathdiv.experiments.execute.runstate import (
    STATUSES,
    base_manifest,
    finish_manifest,
    run_state,
    write_status,
)
from pathdiv.experiments.fabric.environment import preflight, running_kernel_release
from pathdiv.experiments.fabric.network import NetworkError
from pathdiv.experiments.fidelity import runhooks as fidelity
from pathdiv.experiments.fidelity.attempts import attempt_entry, shelve, should_repeat
from pathdiv.experiments.fidelity.record import machine_clock
from pathdiv.experiments.manifest import (
    counter_deltas,
    counter_snapshot,
    git_revision,
    memory_mb,
    memory_used_mb,
    namespace_state,
    tool_versions,
    write_csv_atomic,
    write_json_atomic,
    write_text_atomic,
)
from pathdiv.experiments.plan import history
from pathdiv.experiments.plan.budget import budget_of, disk_shortfall, run_need
from pathdiv.experiments.plan.estimate import (
    Estimator,
    PlanClock,
    boot_of,
    key_of,
)
from pathdiv.experiments.plan.lanes import boots, phases
from pathdiv.experiments.plan.runs import Run, expand
from pathdiv.experiments.running import RunningNetwork
from pathdiv.experiments.traffic import clockgrid
from pathdiv.experiments.traffic.paths_session import run_paths
from pathdiv.experiments.traffic.rounds import (
    COLUMNS,
    Traffic,
    at_instant,
    row_dicts,
    with_placement,
)
from pathdiv.experiments.traffic.session import run_session, session_manifest

log = logging.getLogger("pathdiv")



class ResultsError(ValueError):
    """A results folder that cannot take this plan (another experiment's, unreadable)."""


# ---- pure: options, folders, states ----------------------------------------------------
def new_folder_name(name: str, now: datetime) -> str:
    return f"{name}-{now:%Y%m%d-%H%M%S}"


def split_resume(runs: list[Run], folder: Path) -> tuple[list[Run], list[Run]]:
    """(runs still to do, runs already complete); failed/skipped/partial ones are redone."""
    todo, done = [], []
    for run in runs:
        (done if run_state(folder / "runs" / run.run_id) == "complete" else todo).append(run)
    return todo, done


def config_differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two resolved configs."""
    out: list[str] = []
    for key in sorted(set(old) | set(new), key=str):
        dotted = f"{prefix}.{key}" if prefix else str(key)
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += config_differences(a, b, dotted)
        elif a != b:
            out.append(dotted)
    return out


def check_resumable(folder: Path, cfg: Config) -> None:
    """Raise ResultsError when `folder` holds a different experiment's results."""
    path = folder / "config.yaml"
    if not path.exists():
        if (folder / "runs").exists():
            raise ResultsError(f"{folder} has runs/ but no config.yaml; it was not written by "
                               "`pathdiv run`. Choose another --out folder")
        return
    try:  # within bounds: a lab guest may write into the folder, config.yaml included
        old = load_text(read_config_text(path)) or {}
    except (ConfigError, YamlRefused) as exc:
        raise ResultsError(f"{path} cannot be read ({shorten_text(str(exc))}); choose "
                           "another --out folder") from None
    if not isinstance(old, dict):
        raise ResultsError(f"{path} holds no config; choose another --out folder")
    diff = config_differences(old, cfg.data)
    if diff:
        shown = ", ".join(diff[:6]) + (" ..." if len(diff) > 6 else "")
        raise ResultsError(f"{folder} holds results of a different config (differs in "
                           f"{shown}); resume it with the same config and --set/--quick "
                           "options, or choose another --out folder")


def lab_skip_reason(problem: str) -> str:
    """Why runs with hosts.kernel: lab are skipped here (a full sentence with the fix)."""
    return (f"hosts.kernel: lab runs in the pathdiv lab kernel, which cannot run here: {problem}. "
            "The run was not relabelled: fix that and resume this folder, or copy the config "
            "with hosts.kernel: host in its levels (the rb scheduler exists only in the lab "
            "kernel)")


@dataclass
class PlanOutcome:
    folder: Path
    statuses: dict[str, str] = field(default_factory=dict)  # run_id -> status

    def count(self, status: str) -> int:
        return sum(1 for s in self.statuses.values() if s == status)

    def summary(self) -> str:
        parts = [f"{self.count(s)} {s}" for s in STATUSES if self.count(s)]
        return f"{len(self.statuses)} run(s): " + (", ".join(parts) or "none")


# ---- plan.json ------------------------------------------------------------------------
# ---- side effects ----------------------------------------------------------------------
def prepare_folder(cfg: Config, out: Path | None, root: Path = Path("results")) -> Path:
    """The results folder: `out` (new or resumed) or a new timestamped one under `root`."""
    if out is None:
        out = root / new_folder_name(cfg.name, datetime.now())
        if out.exists():
            raise ResultsError(f"{out} already exists; wait a second or pass --out")
    problem = out_problem(out)
    if problem:
        raise ResultsError(problem)
    check_resumable(out, cfg)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).touch()
    write_text_atomic(out / "config.yaml", cfg.to_yaml())
    return out


class DiskFull(OSError):
    """A run's captures may not fit the free space left: the run is not started."""


def free_mb(path: Path) -> float:
    """MB free on the file system that holds `path` (or its nearest existing parent)."""
    for place in (path, *path.parents):
        if place.exists():
            return shutil.disk_usage(place).free / 1_000_000
    return 0.0


def execute_run(run: Run, run_dir: Path,
                on_round: Callable[[int, int], None] | None = None,
                keeper: NetworkKeeper | None = None) -> dict[str, Any]:
    """Build the network (or, with a `keeper`, reuse the previous run's, reset and
    verified: execute.keeper), run the workload with captures, tear down (a keeper keeps
    it for the next run instead); return the manifest.

    Failures become status 'failed' with the reason; Ctrl-C writes a failed manifest
    (so nothing is marked complete) and propagates after the network is torn down.
    """

    cfg = run.config
    manifest = base_manifest(run)
    manifest.update(kernel_release=running_kernel_release(), git_revision=git_revision(),
                    tools=tool_versions(), lab_kernel=guest_kernel_description())
    manifest["clock"] = machine_clock()  # the one place a run's clock is written
    timings = manifest["timings"]
    started = time.monotonic()
    workload = cfg.data["workload"]
    if cfg.topology_kind == "paths":
        return execute_paths_run(run, run_dir, manifest, started)
    own = keeper is None  # without a keeper the network lives for this run only
    kept = keeper if keeper is not None else NetworkKeeper()
    started_procs = [forks()]  # processes started by the kernel so far, per phase
    try:
        capture = cfg.data["capture"]
        need = run_need(cfg, run.flow_type, run.workload_seed) if capture["enabled"] else None
        if need is not None:
            short = disk_shortfall(budget_of(cfg, need), free_mb(run_dir), str(run_dir.parent))
            if short:
                raise DiskFull(short)
        preflight(cfg)
        choice = choose(run)  # the guest chooses as the host did (dataplane/select.py)
        manifest["dataplane"] = {"selected": choice.reason, "asked": choice.asked}
        cls = choice.switches()
        traffic = Traffic(run.flow_type, cfg.flow_sizes()[run.flow_type], cfg.transport,
                          int(workload["server_port"]), float(workload["timeout_s"]))
        net, manifest["network"] = kept.acquire(cfg, cls, run_dir / "lab")
        reused = bool(manifest["network"]["reused"])
        traffic = with_placement(traffic, cfg.subflow_paths, cfg.subflows, net, run.seed)
        timings["build_s"] = 0.0 if reused else round(net.build_s, 3)
        timings["reset_s"] = float(manifest["network"].get("reset_s", 0.0))
        # memory this kernel uses (the guest's, in the lab kernel): what a topology
        # needs (docs/benchmarks.md, "Bigger fat trees"): built, capturing, after traffic
        info = memory_mb()
        memory = manifest["memory_mb"] = {"total": info and info[0],
                                          "built": info and info[1]}
        manifest["dataplane"].update(net.dp.describe())
        # a reused network was verified equal to the state that passed this check
        failed = [] if reused else net.ping_all()
        if failed:
            raise NetworkError(f"{len(failed)} host pair(s) cannot reach each other "
                           f"(e.g. {failed[:3]}); the network is broken")
        state = namespace_state(net, net.topo.hosts[0])
        manifest["sysctls"] = state.pop("sysctls")
        manifest["namespace"] = state  # which host was asked, its qdiscs
        if manifest["clock"] == "virtual":  # the run starts on the clock's grid, its
            # traffic a fixed time after that (clockgrid.py). Python's collector runs
            # here only: left to its allocation counts, which the runs before set, it
            # collected in some runs' traffic and not in others' (FCTs up to 4.3 ms apart)
            gc.disable()
            gc.collect()
            grid = clockgrid.align()
            traffic = at_instant(traffic, grid + clockgrid.FIRST_ROUND_NS)
            switch_threads = net.dp.first_in_first_out() if traffic.fifo else 0
            manifest["clock_grid"] = {
                "period_ns": clockgrid.GRID_NS, "start_ns": grid,
                "first_round_ns": traffic.start_ns, "sched_fifo": traffic.fifo,
                "sched_fifo_switch_threads": switch_threads}
        # where start_capture listens: each link's upper end
        captured = [(link.b.node, link.b.intf) for link in net.topo.links]
        if need is not None:
            budget = budget_of(cfg, need)
            manifest["capture"]["start"] = net.start_capture(
                run_dir / "captures", int(capture["snaplen"]), budget, need.caps(budget),
                str(capture["tool"]))
            manifest["capture"]["start"]["need_mb"] = round(need.total_mb, 1)
            memory["capturing"] = memory_used_mb()
            before = _counters(net, captured, manifest)
        pace = None if traffic.start_ns is None else \
            functools.partial(clockgrid.sleep_to_next, manifest["clock_grid"]["start_ns"])
        monitor = fidelity.start(net, cfg.data["fidelity"], manifest, pace)
        woken = GuestCost()
        woken.start()
        started_procs.append(forks())
        t0 = time.monotonic()
        try:
            session = run_session(net, cfg, run.workload_seed, traffic,
                                  run_dir / "lab" / "logs", on_round)
            rows = session.rows
            # on the virtual clock from the first round's instant: the wait before it is
            # idle guest time (no traffic, no wall time)
            began = t0 if traffic.start_ns is None else traffic.start_ns / 1e9
            timings["traffic_s"] = round(time.monotonic() - began, 3)
            manifest["guest_cost"] = woken.stop()
            started_procs.append(forks())
            memory["after_traffic"] = memory_used_mb()
        finally:
            samples = fidelity.stop(monitor)
        record = fidelity.finish(monitor, samples, cfg.data["fidelity"], manifest)
        try:
            if capture["enabled"]:
                net.wait_quiet()  # the last FINs and ACKs belong in the captures
                after = _counters(net, captured, manifest)
                manifest["capture"]["stop"] = net.stop_capture()
                fidelity.captures(record, manifest["capture"]["stop"], manifest)
                if before and after:
                    manifest["interface_counters"] = counter_deltas(before, after)
        finally:
            fidelity.save(record, run_dir)
        t1 = time.monotonic()
        kept.release(True)  # a keeper keeps it for the next run
        if own:
            kept.close()
        timings["teardown_s"] = round(time.monotonic() - t1, 3)
        started_procs.append(forks())
        manifest["processes_started"] = dict(zip(
            ("before_traffic", "traffic", "after_traffic"),
            (b - a for a, b in itertools.pairwise(started_procs)), strict=True))
        write_csv_atomic(run_dir / "transfers.csv", COLUMNS, row_dicts(rows))
        manifest.update(session_manifest(session, run_dir))
        if session.instants:  # the virtual clock's round instants (traffic/clockgrid.py)
            manifest["clock_grid"]["rounds"] = session.instants
        ok = sum(1 for r in rows if r.ok)
        manifest["transfers"] = {"total": len(rows), "ok": ok, "failed": len(rows) - ok,
                                 "rounds": session.rounds}
        manifest["status"] = "complete"
    except KeyboardInterrupt:
        kept.close()
        manifest["error"] = ("interrupted (SIGINT); the network was torn down. Resume the "
                             "folder with `pathdiv run CONFIG --out DIR` to redo this run")
        finish_manifest(manifest, run_dir, started)
        raise
    except Exception as exc:
        kept.close()  # a run that failed may have left anything: never reused
        manifest["error"] = f"{type(exc).__name__}: {exc}"
        log.debug("run %s failed:\n%s", run.run_id, traceback.format_exc())
    finish_manifest(manifest, run_dir, started)
    return manifest


def execute_paths_run(run: Run, run_dir: Path, manifest: dict[str, Any],
                      started: float) -> dict[str, Any]:
    """A run on the parallel-paths topology (experiments/traffic/paths_session.py): one
    measured fetch beside the paths' background flows; its measurements go to paths.json,
    which the analysis reads in place of transfers.csv and the fat tree's captures."""
    timings = manifest["timings"]
    try:
        t0 = time.monotonic()
        result = run_paths(run.config, run.flow_type, run_dir / "captures")
        # build and teardown are inside the run's own time here, not apart
        timings.update(build_s=0.0, traffic_s=round(time.monotonic() - t0, 3),
                       teardown_s=0.0)
        write_text_atomic(run_dir / PATHS_RESULT, json.dumps(result))
        manifest["transfers"] = {"total": 1, "ok": int(bool(result["complete"])),
                                 "failed": int(not result["complete"]), "rounds": 1}
        manifest["events"] = result["events"]
        manifest["status"] = "complete"
    except KeyboardInterrupt:
        manifest["error"] = ("interrupted (SIGINT); the namespaces were removed. Resume the "
                             "folder with `pathdiv run CONFIG --out DIR` to redo this run")
        finish_manifest(manifest, run_dir, started)
        raise
    except Exception as exc:
        manifest["error"] = f"{type(exc).__name__}: {exc}"
        log.debug("run %s failed:\n%s", run.run_id, traceback.format_exc())
    finish_manifest(manifest, run_dir, started)
    return manifest


def _counters(net: RunningNetwork, ports: list[tuple[str, str]],
              manifest: dict[str, Any]) -> dict[str, Any]:
    """A counter snapshot, or {} with the reason in the manifest (never fails the run)."""
    try:
        return counter_snapshot(net, ports)
    except Exception as exc:
        manifest["interface_counters_error"] = f"{type(exc).__name__}: {exc}"
        return {}


def run_plan(cfg: Config, runs: list[Run], folder: Path, quiet: bool = False,
             options: dict[str, Any] | None = None, plan_runs: list[Run] | None = None,
             shard: Shard | None = None,
             progress: Callable[[RunProgress], None] | None = None, jobs: int = 1,
             estimator: Estimator | None = None) -> PlanOutcome:
    """Execute the runs not yet complete in `folder`: host-kernel runs here, in plan order,
    then the lab-kernel runs, per clock, virtual-clock ones spread over `jobs` lab kernels
    at once (see pathdiv.experiments.execute.lab_kernel). `estimator` gives the ETA
    (default: calibrated from this machine's history).

    With `shard`, `runs` is that shard's part of `plan_runs` (the whole plan): plan.json
    lists the whole plan and this process sets only its runs' statuses, under a lock, so
    shards can share the folder (experiments.cluster.planfile). `progress` is called once
    per finished run (`RunProgress`).

    Refused (ResultsError, nothing touched) while a live process holds the running
    marker of one of `runs`."""
    busy = busy_runs(folder, [r.run_id for r in runs])
    if busy:
        more = f" and {len(busy) - 5} more" if len(busy) > 5 else ""
        raise ResultsError(
            f"{folder}: another pathdiv is executing run(s) {'; '.join(busy[:5])}{more}; "
            "nothing was started: wait for it to finish, or stop it (it tears down what it "
            "started), then run this again")
    if estimator is None:
        estimator = history.estimator()
    execution = PlanExecution(cfg, runs, folder, quiet, options or {}, plan_runs, shard,
                              jobs=jobs, estimator=estimator)
    execution.progress = progress
    return execution.execute()


@dataclass(frozen=True)
class RunProgress:
    """What a plan's progress callback gets when a run ends."""

    run_id: str
    status: str  # complete, failed, skipped
    done: int  # runs of this plan ended so far (those complete before it included)
    total: int
    manifest: dict[str, Any]


class PlanExecution:
    """One `run_plan`: what is left to do, the statuses plan.json gets, the progress shown.

    Lab kernels of one phase run in threads, one each (`lab_phase`); everything they
    report (`show`, `finished`) goes through one lock, so plan.json, the progress bar and
    the markers see one run at a time."""

    def __init__(self, cfg: Config, runs: list[Run], folder: Path, quiet: bool,
                 options: dict[str, Any], plan_runs: list[Run] | None,
                 shard: Shard | None, jobs: int = 1,
                 estimator: Estimator | None = None) -> None:
        self.cfg, self.folder, self.quiet, self.options, self.shard = (
            cfg, folder, quiet, options, shard)
        todo, self.done = split_resume(runs, folder)
        self.todo = todo
        self.planned = plan_runs if plan_runs is not None else runs
        self.mine = {r.run_id for r in runs}
        self.shard_index = shard_of(self.planned, shard.count) if shard else {}
        self.statuses: dict[str, dict[str, Any]] = {
            r.run_id: {"status": "complete", "reason": ""} for r in self.done}
        self.outcome = PlanOutcome(folder, {r.run_id: "complete" for r in self.done})
        self.host_todo = [r for r in todo if r.config.host_kernel != "lab"]
        self.lab_todo = [r for r in todo if r.config.host_kernel == "lab"]
        self.image: Path | None = None  # the lab kernel, once found or built
        self.tracker = RunTracker(folder, runs, shard, complete_before=len(self.done))
        # the data plane each run will use, for its expected time and its history line
        self.plane = {rid: c.plane for rid, c in choose_runs(todo).items()}
        self.estimator = estimator or Estimator()
        self.expected = {r.run_id: self.estimator.run_s(r, self.plane[r.run_id])
                         for r in todo}
        self.phases = phases(todo, max(1, jobs), lambda r: self.expected[r.run_id])
        self.eta = PlanClock([lanes for _, lanes in self.phases], self.expected,
                             self.estimator.short_source(
                                 (key_of(r, self.plane[r.run_id]) for r in todo),
                                 todo[0].config.name if todo else None),
                             boot=lambda r: boot_of(r, self.plane.get(r.run_id)))
        # tqdm's own remaining time counts runs; the clock weighs them by expected traffic
        self.bar = tqdm(total=len(runs), initial=len(self.done), unit="run", file=sys.stderr,
                        disable=quiet, dynamic_ncols=True, desc=cfg.name,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                                   "[{elapsed}{postfix}]")
        self.since: dict[str, float] = {}  # run id -> when it started (the lane's boot
        # counts towards its first run)
        self.following: dict[str, Run] = {}  # run id -> the next run of its lab kernel
        self.labels: dict[int, str] = {}  # what the bar shows of each lane's current run
        self.lanes_now = 1  # lab kernels running at once in the current phase
        self.lock = threading.RLock()
        self.progress: Callable[[RunProgress], None] | None = None
        self.keeper = NetworkKeeper()  # one network for consecutive host-kernel runs

    # ---- plan.json and progress ------------------------------------------------------
    def save_plan(self) -> None:
        update_plan(self.folder, lambda previous: annotate_shards(plan_document(
            self.cfg, self.planned, merged_statuses(previous, self.mine, self.statuses),
            previous, self.options), self.shard_index))

    def show(self, label: str, lane: int = 0) -> None:
        with self.lock:
            self.labels[lane] = label
            shown = " | ".join(t for _, t in sorted(self.labels.items()) if t)
            eta = self.eta.text(time.monotonic())
            self.bar.set_postfix_str(f"{shown} | {eta}" if shown else eta)

    def say(self, text: str) -> None:
        if not self.quiet:
            with self.lock:
                self.bar.write(text, file=sys.stderr)

    def start(self, run: Run) -> None:
        now = time.monotonic()
        self.since[run.run_id] = now
        self.eta.started(run.run_id, now)
        self.tracker.started(run)

    def finished(self, run: Run, manifest: dict[str, Any]) -> None:
        with self.lock:
            self._finished(run, manifest)

    def _finished(self, run: Run, manifest: dict[str, Any]) -> None:
        status = manifest.get("status", "failed")
        now = time.monotonic()
        wall = now - self.since.pop(run.run_id, now)
        self.eta.finished(run.run_id, wall if status == "complete" else None)
        # the host's wall time of the run (a lab kernel's boot counts towards its first
        # run): what plans take on this machine, where manifests of lab runs hold guest time
        self.statuses[run.run_id] = {"status": status, "reason": manifest.get("error", ""),
                                     "wall_s": round(wall, 1)}
        self.outcome.statuses[run.run_id] = status
        self.save_plan()
        self.tracker.finished(run, status)
        if status == "complete" and wall > 0:
            history.append(history.record(
                run, wall, self.plane.get(run.run_id), self.lanes_now, _load(),
                git=str(manifest.get("git_revision") or ""),
                built=not (manifest.get("network") or {}).get("reused")))
        following = self.following.pop(run.run_id, None)
        if following is not None:  # its lab kernel runs them in order
            self.start(following)
        self.say(_run_line(run, manifest))
        self.bar.update(1)
        self.show(self.labels.get(0, ""))
        if self.progress is not None:
            self.progress(RunProgress(run.run_id, status, len(self.outcome.statuses),
                                      len(self.mine), manifest))

    # ---- the runs --------------------------------------------------------------------
    def execute(self) -> PlanOutcome:
        self.save_plan()
        self.show("")
        if self.done:
            self.say(f"resuming {self.folder}: {len(self.done)} run(s) complete, "
                     f"{len(self.todo)} to do")
        state = "stopped"  # what the shard's progress file says if an error ends the plan
        if self.lab_todo:  # before any host run: a kernel build or a missing tool shows up
            self.find_lab_kernel()
        try:
            for what, lanes in self.phases:
                if what == "host":
                    for run in lanes[0]:
                        self.host_run(run)
                    self.keeper.close()
                elif self.image is not None:
                    self.lab_phase(what, lanes)
            state = "done"
        except KeyboardInterrupt:
            state = "interrupted"
            self.save_plan()  # the interrupted run stays pending; its manifest says failed
            raise
        finally:
            self.keeper.close()
            self.bar.close()
            self.tracker.close(state)
        return self.outcome

    def find_lab_kernel(self) -> None:
        """The lab kernel's image; without one every lab run is skipped, saying why."""
        try:
            self.image = lab_kernel_image(self.say)
        except LabKernelUnavailable as exc:
            reason = lab_skip_reason(str(exc))
            for run in self.lab_todo:
                run_dir = self.folder / "runs" / run.run_id
                if run_dir.exists():
                    shutil.rmtree(run_dir)
                self.finished(run, write_status(run, run_dir, "skipped", reason))
            self.lab_todo = []

    def host_run(self, run: Run) -> None:
        run_dir = self.folder / "runs" / run.run_id
        if run_dir.exists():
            shutil.rmtree(run_dir)  # partial, failed or skipped: redo from scratch
        run_dir.mkdir(parents=True)
        label = " ".join([run.flow_type, *run.factors.values(), f"rep{run.repetition}"])
        self.start(run)
        self.show(label)

        def on_round(n: int, total: int) -> None:
            self.show(f"{label} round {n}/{total}")

        self.finished(run, execute_attempts(run, run_dir, on_round, self.say, self.keeper))

    def lab_phase(self, clock: str, lanes: list[list[Run]]) -> None:
        """The lab runs on `clock`: each lane in its own boot of the lab kernel, all lanes
        at once (threads). Ctrl-C, or an error in one lane, stops every lab kernel: each
        gives its unfinished run a failed manifest, and runs not started stay pending."""
        self.lanes_now = len(lanes)
        if len(lanes) == 1:
            self.lab_lane(clock, lanes[0])
            return
        self.say(f"running {sum(map(len, lanes))} run(s) in {len(lanes)} lab kernels at "
                 f"once ({clock} clock; --jobs sets how many)")
        stop = threading.Event()
        errors: list[BaseException] = []
        ended = [threading.Event() for _ in lanes]

        def lane_main(index: int, lane: list[Run]) -> None:
            try:
                self.lab_lane(clock, lane, index, stop)
            except KeyboardInterrupt:
                pass  # stopped because another lane or the user stopped the plan
            except BaseException as exc:
                errors.append(exc)
                stop.set()
            finally:
                ended[index].set()

        threads = [threading.Thread(target=lane_main, args=(i, lane), daemon=True,
                                    name=f"lab-kernel-{i}") for i, lane in enumerate(lanes)]
        # waits on events, not Thread.join: a join interrupted by Ctrl-C may later return
        # before its thread has ended, and the lanes' teardown must finish first
        try:
            for thread in threads:
                thread.start()
            for event in ended:
                while not event.wait(0.5):
                    pass
        except KeyboardInterrupt:
            stop.set()
            for thread, event in zip(threads, ended, strict=True):
                if thread.ident is not None:  # started: it ends once its kernel stopped
                    event.wait()
            raise
        if errors:
            raise errors[0]
        if stop.is_set():  # a lane saw a stop nobody asked for: treat as an interruption
            raise KeyboardInterrupt("SIGINT")

    def lab_lane(self, clock: str, lane: list[Run], index: int | None = None,
                 stop: threading.Event | None = None) -> None:
        """One lane's runs in order, in as many boots of the lab kernel as `boots` says
        (a run with transfers larger than lab.own_boot_above_kb starts its own)."""
        for group in boots(lane):
            if stop is not None and stop.is_set():  # another lane was stopped
                raise KeyboardInterrupt("SIGINT")
            self.lab_boot(clock, group, index, stop)

    def lab_boot(self, clock: str, group: list[Run], lane: int | None = None,
                 stop: threading.Event | None = None) -> None:
        """One boot of the lab kernel on `clock` runs `group` in order."""
        assert self.image is not None
        which = f" #{lane + 1}" if lane is not None else ""
        self.say(f"booting the lab kernel{which} ({self.image.parent.name}, {clock} clock) "
                 f"for {len(group)} run(s)")
        with self.lock:
            for run in group:  # no earlier manifest beside the running marker
                shutil.rmtree(self.folder / "runs" / run.run_id, ignore_errors=True)
            for run, after in itertools.pairwise(group):
                self.following[run.run_id] = after
            self.start(group[0])  # the boot counts towards the first lab run
        name = self.shard.name if self.shard else None
        if lane is not None:
            name = f"{name}-job-{lane}" if name else f"job-{lane}"
        LabSession(self.folder, group, self.image,
                   lambda text: self.show(text, lane or 0), self.finished,
                   progress=progress_file(name), clock=clock,
                   memory_mb=int(group[0].config.data["lab"]["memory_mb"]),
                   log=self.say, stop=stop, cpu=lane_cpu(lane, host_cpus())
                   ).execute()


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def execute_attempts(run: Run, run_dir: Path,
                     on_round: Callable[[int, int], None] | None = None,
                     say: Callable[[str], None] | None = None,
                     keeper: NetworkKeeper | None = None) -> dict[str, Any]:
    """`execute_run`, repeated while its fidelity verdict is invalid (at most
    fidelity.max_repeats more times); earlier attempts move to attempt-<n>/ beside the
    last one, and the last manifest lists them all (experiments.fidelity.attempts)."""
    max_repeats = int(run.config.data.get("fidelity", {}).get("max_repeats", 0))
    attempts: list[dict[str, Any]] = []
    attempt = 1
    while True:
        manifest = execute_run(run, run_dir, on_round, keeper)
        if not should_repeat(manifest, attempt, max_repeats):
            break
        kept = shelve(run_dir, attempt)
        attempts.append(attempt_entry(manifest, attempt, kept.name))
        if say is not None:
            reasons = "; ".join(manifest["fidelity"].get("reasons", []))
            say(f"run {run.order + 1} {run.run_id}: attempt {attempt} invalid ({reasons}); "
                f"kept in {kept}; repeating (attempt {attempt + 1} of at most "
                f"{max_repeats + 1})")
        attempt += 1
    if attempts or "fidelity" in manifest:
        manifest["attempts"] = [*attempts, attempt_entry(manifest, attempt, ".")]
        write_json_atomic(run_dir / "manifest.json", manifest)
    return manifest


def _run_line(run: Run, manifest: dict[str, Any]) -> str:
    status = manifest["status"]
    head = f"run {run.order + 1} {run.run_id}: {status}"
    if status == "complete":
        t = manifest["transfers"]
        tm = manifest["timings"]
        fid = manifest.get("fidelity") or {}
        verdict = (f", fidelity {fid['verdict']}"
                   + (f" ({'; '.join(fid['reasons'])})" if fid.get("reasons") else "")
                   if fid else "")
        tries = len(manifest.get("attempts", []))
        tries_text = f", {tries} attempts" if tries > 1 else ""
        built = (f"network reused (reset {tm.get('reset_s', 0):.1f} s)"
                 if (manifest.get("network") or {}).get("reused")
                 else f"build {tm['build_s']:.1f} s")
        return (f"{head} ({t['ok']}/{t['total']} transfers ok, {built}, "
                f"traffic {tm['traffic_s']:.1f} s, teardown {tm['teardown_s']:.1f} s"
                f"{verdict}{tries_text})")
    return f"{head}: {manifest['error'][:300]}"


# ---- one run by id (what the lab kernel executes) ------------------------------------
def find_run(folder: Path, run_id: str) -> tuple[Config, Run]:
    """The run `run_id` of the experiment in `folder` (its config.yaml and plan.json)."""

    try:
        cfg = validate(yaml.safe_load((folder / "config.yaml").read_text()),
                       str(folder / "config.yaml"))
        plan = json.loads((folder / "plan.json").read_text())
    except OSError as exc:
        raise ResultsError(f"{folder} is not a results folder of `pathdiv run` ({exc})") \
            from None
    entry = next((e for e in plan.get("runs", []) if e.get("run_id") == run_id), None)
    if entry is None:
        ids = ", ".join(e.get("run_id", "?") for e in plan.get("runs", [])[:5])
        raise ResultsError(f"run {run_id!r} is not in {folder / 'plan.json'} (e.g. {ids})")
    for run in expand(cfg, repetitions=int(entry["repetition"]),
                      flow_types=[entry["flow_type"]], only=dict(entry["factors"])):
        if run.run_id == run_id:
            return cfg, dataclasses.replace(run, order=int(entry["order"]))
    raise ResultsError(f"run {run_id!r} of {folder / 'plan.json'} does not follow from "
                       f"{folder / 'config.yaml'}; the folder was edited by hand")


class Heartbeat:
    """The guest's clock, written every 2.56 guest seconds while runs execute, so
    the host can tell a slow run (its clock moves) from a frozen guest (it does not).
    A daemon thread that sleeps: in virtual time, sleeping is what moves the clock. It
    wakes on multiples of HEARTBEAT_NS, a divisor of the grid every run's traffic starts
    on (traffic/clockgrid.py), so at the same distances from every run's start."""

    HEARTBEAT_NS = clockgrid.GRID_NS // 2

    def __init__(self, path: Path | None) -> None:
        self.path, self.run_id = path, ""
        if path is not None:
            threading.Thread(target=self._beat, daemon=True, name="heartbeat").start()

    def _beat(self) -> None:
        assert self.path is not None
        with clockgrid.exact_timers():
            while True:
                write_json_atomic(self.path, {"guest_s": round(time.monotonic(), 3),
                                              "run_id": self.run_id})
                clockgrid.sleep_until_ns(clockgrid.next_point(time.monotonic_ns(),
                                                              self.HEARTBEAT_NS))


def main(argv: list[str] | None = None) -> int:
    """`python -m pathdiv.experiments.runner execute FOLDER RUN_ID...`: planned runs, in order.

    This is the command the lab kernel runs (execute.lab_kernel, FOLDER writable): each run
    writes its own manifest.json into the folder. Exit 0 when all are complete, 1 when
    some failed, 2 when the folder or a run id is wrong.
    """

    ap = argparse.ArgumentParser(prog="python -m pathdiv.experiments.runner")
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("execute", help="execute planned runs of a results folder")
    e.add_argument("--progress", type=Path, default=None,
                   help="JSON file kept up to date with the current run and round")
    e.add_argument("folder", type=Path)
    e.add_argument("run_ids", nargs="+", metavar="RUN_ID")
    args = ap.parse_args(argv)
    try:
        found = [find_run(args.folder, run_id)[1] for run_id in args.run_ids]
    except (ResultsError, ValueError) as exc:
        print(f"runner: {exc}", file=sys.stderr)
        return 2
    failed = 0
    keeper = NetworkKeeper()  # consecutive runs share a network (execute.keeper)
    beat = Heartbeat(heartbeat_path(args.progress) if args.progress is not None else None)
    for run in found:
        beat.run_id = run.run_id
        run_dir = args.folder / "runs" / run.run_id
        if run_dir.exists():
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True)

        def on_round(n: int, total: int, run_id: str = run.run_id) -> None:
            if args.progress is not None:
                write_json_atomic(args.progress, {"run_id": run_id, "round": n,
                                                  "rounds": total})

        on_round(0, 0)
        try:
            manifest = execute_attempts(run, run_dir, on_round,
                                        lambda text: print(text, flush=True), keeper)
        except KeyboardInterrupt:
            keeper.close()
            return 130
        print(_run_line(run, manifest), flush=True)
        failed += manifest["status"] != "complete"
    keeper.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
