"""Execute a run plan into a results folder, resumably: the results folder and the plan.

Layout (every file written atomically):

    results/<name>-<YYYYmmdd-HHMMSS>/
        config.yaml                 the resolved config as run
        plan.json                   every planned run with its status and reason
        runs/<run_id>/manifest.json written last: a run is complete only when it says so
        runs/<run_id>/transfers.csv one row per transfer
        runs/<run_id>/captures/     one pcap per link (headers only)
        runs/<run_id>/network/      node scripts and server logs of the run's network
        runs/<run_id>/fidelity.json the fidelity monitor's record and verdict
        runs/<run_id>/attempt-<n>/  an earlier attempt judged invalid, kept whole
        earlier/<run_id>/<n>/       a failed or cut-off attempt, set aside when resumed
        running/plan.lock           held by the `pathdiv run` executing the plan (shard)

A run's status is `complete`, `failed` (the network or the workload broke; the reason is
in `error`) or `skipped` (this machine cannot run it as configured, e.g. hosts.kernel:
lab where the lab kernel cannot run; never relabelled as something else). Resuming a folder
skips complete runs and redoes every other run from scratch (a failed or cut-off run's
folder is set aside in earlier/ first, the evidence of why it failed). One process
executes a plan (or one shard of it) in a folder at a time: it holds running/plan.lock
from its first run to its last, between runs and lab boots too, and a second `pathdiv
run` is refused, told which process holds it.

`--out` is resolved once, physically, after `out_problem` found no link or `..` that
would take it elsewhere; root uses only the resolved path, and creates the folder, its
marker and config.yaml through folder descriptors, following no link.

Runs with hosts.kernel: host execute here, in plan order (one run from start to end:
execute/run.py); then the runs with hosts.kernel: lab, per clock (execute/lab_runs.py):
on the virtual clock spread over `jobs` lab kernels at once (one boot each, its runs in
plan order; plan.lanes deals them by expected time), on the real clock in one boot, one
run at a time. Every complete run's wall time goes into this machine's history
(plan.history), which calibrates the next estimates.

Pure parts (folder naming, what to resume) are kept apart from `run_plan`.
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

import pathdiv.analysis.safefiles as safefiles
from pathdiv.experiments.cluster.planfile import (
    annotate_shards,
    merged_statuses,
    plan_document,
    update_plan,
)
from pathdiv.experiments.cluster.shards import Shard, shard_of
from pathdiv.experiments.cluster.tracking import RunTracker, busy_runs, execution_lock
from pathdiv.experiments.config.load import Config, ConfigError, read_config_text
from pathdiv.experiments.config.results_folder import MARKER, out_problem, resolved_out
from pathdiv.experiments.config.safe_yaml import YamlRefused, load_text, shorten_text
from pathdiv.experiments.dataplane.select import choose_runs
from pathdiv.experiments.execute.boot import (
    LabKernelUnavailable,
    host_cpus,
    lab_kernel_image,
    lane_cpu,
)
from pathdiv.experiments.execute.cpuslots import claimed_cpu
from pathdiv.experiments.execute.keeper import NetworkKeeper
from pathdiv.experiments.execute.lab_runs import LabRuns, in_parallel, progress_file
from pathdiv.experiments.execute.run import execute_attempts, run_line
from pathdiv.experiments.execute.runstate import (
    STATUSES,
    ResultsError,
    run_state,
    set_aside,
    write_status,
)
from pathdiv.experiments.plan import history
from pathdiv.experiments.plan.estimate import Estimator, PlanClock, boot_of, key_of
from pathdiv.experiments.plan.lanes import boots, phases
from pathdiv.experiments.plan.memory import boot_mb
from pathdiv.experiments.plan.runs import Run

log = logging.getLogger("pathdiv")


# ---- pure: options, folders, states ----------------------------------------------------
def new_folder_name(name: str, now: datetime) -> str:
    return f"{name}-{now:%Y%m%d-%H%M%S}"


def split_resume(runs: list[Run], folder: Path) -> tuple[list[Run], list[Run]]:
    """(runs still to do, runs already complete); failed/skipped/partial ones are redone."""
    todo: list[Run] = []
    done: list[Run] = []
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
    try:  # within bounds: a lab kernel's guest may write into the folder, config.yaml included
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


# ---- side effects ----------------------------------------------------------------------
def prepare_folder(cfg: Config, out: Path | None, root: Path = Path("results")) -> Path:
    """The results folder: `out` (new or resumed) or a new timestamped one under `root`,
    resolved once, physically (the path every later step uses). Made, marked and given
    config.yaml through folder descriptors: no link followed, none created through."""
    if out is None:
        out = root / new_folder_name(cfg.name, datetime.now())
        if out.exists():
            raise ResultsError(f"{out} already exists; wait a second or pass --out")
    problem = out_problem(out)
    if problem:
        raise ResultsError(problem)
    folder = resolved_out(out)
    check_resumable(folder, cfg)
    try:
        fd = safefiles.open_dir(folder, create=True)
    except OSError as exc:
        raise ResultsError(f"{out}: cannot make the results folder ({exc.strerror or exc})"
                           ) from None
    try:
        marker = os.open(MARKER, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                         | os.O_CLOEXEC, 0o644, dir_fd=fd)
        os.close(marker)
        safefiles.write_atomic(fd, "config.yaml", cfg.to_yaml().encode())
    except OSError as exc:
        raise ResultsError(f"{out}: {exc.strerror or exc}; pathdiv follows no link in a "
                           "results folder") from None
    finally:
        os.close(fd)
    return folder


def run_plan(cfg: Config, runs: list[Run], folder: Path, quiet: bool = False,
             options: dict[str, Any] | None = None, plan_runs: list[Run] | None = None,
             shard: Shard | None = None,
             progress: Callable[[RunProgress], None] | None = None, jobs: int = 1,
             estimator: Estimator | None = None) -> PlanOutcome:
    """Execute the runs not yet complete in `folder`: host-kernel runs here, in plan order,
    then the lab-kernel runs, per clock, virtual-clock ones spread over `jobs` lab kernels
    at once (see pathdiv.experiments.execute.lab_runs). `estimator` gives the ETA
    (default: calibrated from this machine's history).

    With `shard`, `runs` is that shard's part of `plan_runs` (the whole plan): plan.json
    lists the whole plan and this process sets only its runs' statuses, under a lock, so
    shards can share the folder (experiments.cluster.planfile). `progress` is called once
    per finished run (`RunProgress`).

    Refused (ResultsError, nothing touched) while another process executes this plan
    (or shard) in `folder` (it holds running/plan.lock for its whole execution:
    tracking.FolderBusy names it), or a live process holds the running marker of one
    of `runs`."""
    with execution_lock(folder, shard):
        busy = busy_runs(folder, [r.run_id for r in runs])
        if busy:
            more = f" and {len(busy) - 5} more" if len(busy) > 5 else ""
            raise ResultsError(
                f"{folder}: another pathdiv is executing run(s) {'; '.join(busy[:5])}{more}; "
                "nothing was started: wait for it to finish, or stop it (it tears down what "
                "it started), then run this again")
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
        self.say(run_line(run, manifest))
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
                    for index, run in enumerate(lanes[0]):
                        self.keeper.runs_after = len(lanes[0]) - index - 1
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
                self.set_aside(run)
                self.finished(run, write_status(run, run_dir, "skipped", reason))
            self.lab_todo = []

    def set_aside(self, run: Run) -> None:
        """An earlier attempt of `run` out of the way, kept in earlier/ when it failed."""
        kept = set_aside(self.folder, run.run_id)
        if kept is not None:
            self.say(f"run {run.order + 1} {run.run_id}: the earlier attempt is kept in "
                     f"{kept}")

    def host_run(self, run: Run) -> None:
        run_dir = self.folder / "runs" / run.run_id
        self.set_aside(run)  # partial, failed or skipped: redo from scratch
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
        in_parallel(lanes, lambda index, lane, stop: self.lab_lane(clock, lane, index, stop))

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
        with self.lock:
            for run in group:  # no earlier manifest beside the running marker
                self.set_aside(run)
            for run, after in itertools.pairwise(group):
                self.following[run.run_id] = after
            self.start(group[0])  # the boot counts towards the first lab run
        name = self.shard.name if self.shard else None
        if lane is not None:
            name = f"{name}-job-{lane}" if name else f"job-{lane}"
        cpus = host_cpus()
        with claimed_cpu(lane_cpu(lane, cpus), cpus) as (cpu, how):
            self.say(f"booting the lab kernel{which} ({self.image.parent.name}, {clock} "
                     f"clock) for {len(group)} run(s), on host {how}")
            LabRuns(self.folder, group, self.image,
                    lambda text: self.show(text, lane or 0), self.finished,
                    progress=progress_file(name), clock=clock,
                    memory_mb=boot_mb(group, self.planned),
                    log=self.say, stop=stop, cpu=cpu
                    ).execute()


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None
