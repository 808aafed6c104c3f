"""One run from start to end on this kernel (the host's, or the lab kernel's in its guest).

`execute_run` takes a run through its phases over one `RunContext`: the disk checked for
its captures, the network (built, or the previous run's reset: keeper.py) checked, the
clock's grid on the virtual clock, the captures started, the workload run under the
fidelity monitor, the captures stopped, the network kept or torn down, and what the run
measured written. Each phase records what it did in the run's manifest, written last
(runstate.py): a run is complete only when its manifest says so. `execute_attempts`
repeats a run whose fidelity verdict is invalid; `execute_paths_run` is a run on the
parallel-paths topology (traffic/paths_run.py).
"""

from __future__ import annotations

import functools
import gc
import itertools
import json
import logging
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pathdiv.analysis.metrics.paths_run import PATHS_RESULT
from pathdiv.experiments.config.load import Config
from pathdiv.experiments.dataplane.select import choose
from pathdiv.experiments.execute.boot import guest_kernel_description
from pathdiv.experiments.execute.guestcost import GuestCost, forks
from pathdiv.experiments.execute.keeper import NetworkKeeper
from pathdiv.experiments.execute.runstate import base_manifest, finish_manifest
from pathdiv.experiments.fabric.environment import preflight, running_kernel_release
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
from pathdiv.experiments.network.network import Network
from pathdiv.experiments.plan.budget import RunNeed, budget_of, disk_shortfall, run_need
from pathdiv.experiments.plan.runs import Run
from pathdiv.experiments.running import NetworkError, RunningNetwork
from pathdiv.experiments.traffic import clockgrid
from pathdiv.experiments.traffic.paths_run import run_paths
from pathdiv.experiments.traffic.rounds import (
    COLUMNS,
    Traffic,
    at_instant,
    row_dicts,
    with_placement,
)
from pathdiv.experiments.traffic.workload import WorkloadResult, run_traffic, workload_manifest

log = logging.getLogger("pathdiv")

OnRound = Callable[[int, int], None]


class DiskFull(OSError):
    """A run's captures may not fit the free space left: the run is not started."""


def free_mb(path: Path) -> float:
    """MB free on the file system that holds `path` (or its nearest existing parent)."""
    for place in (path, *path.parents):
        if place.exists():
            return shutil.disk_usage(place).free / 1_000_000
    return 0.0


@dataclass
class RunContext:
    """What the phases of one run share: the run, its folder and manifest, the network
    it got, its traffic, and what the phases measured for the later ones."""

    run: Run
    run_dir: Path
    manifest: dict[str, Any]
    keeper: NetworkKeeper
    on_round: OnRound | None = None
    net: Network | None = None
    traffic: Traffic | None = None
    need: RunNeed | None = None  # the captures' need; None when nothing is captured
    before: dict[str, Any] = field(default_factory=dict)  # interface counters at the start
    workload: WorkloadResult | None = None
    started_procs: list[int] = field(default_factory=list)  # processes started so far,
    # read before the traffic, after it and after the teardown

    @property
    def cfg(self) -> Config:
        return self.run.config

    @property
    def timings(self) -> dict[str, Any]:
        timings: dict[str, Any] = self.manifest["timings"]
        return timings

    @property
    def network(self) -> Network:
        assert self.net is not None, "the network phase has not run"
        return self.net

    @property
    def captured(self) -> list[tuple[str, str]]:
        """Where the captures listen: each link's upper end."""
        return [(link.b.node, link.b.intf) for link in self.network.topo.links]


# ---- the phases, in order --------------------------------------------------------------
def check_disk(ctx: RunContext) -> None:
    """The run's captures must fit the free disk with room to spare (plan/budget.py)."""
    cfg = ctx.cfg
    if cfg.data["capture"]["enabled"]:
        ctx.need = run_need(cfg, ctx.run.flow_type, ctx.run.workload_seed)
        short = disk_shortfall(budget_of(cfg, ctx.need), free_mb(ctx.run_dir),
                               str(ctx.run_dir.parent))
        if short:
            raise DiskFull(short)


def get_network(ctx: RunContext) -> None:
    """The run's network, built or the previous run's reset (keeper.py), reachable."""
    cfg, manifest, run = ctx.cfg, ctx.manifest, ctx.run
    preflight(cfg)
    choice = choose(run)  # the guest chooses as the host did (dataplane/select.py)
    manifest["dataplane"] = {"selected": choice.reason, "asked": choice.asked}
    cls = choice.switches()
    workload = cfg.data["workload"]
    traffic = Traffic(run.flow_type, cfg.flow_sizes()[run.flow_type], cfg.transport,
                      int(workload["server_port"]), float(workload["timeout_s"]),
                      join_first=cfg.subflows if cfg.data["hosts"]["join_before_data"]
                      else 0)
    net, manifest["network"] = ctx.keeper.acquire(cfg, cls, ctx.run_dir / "network")
    ctx.net = net
    reused = bool(manifest["network"]["reused"])
    ctx.traffic = with_placement(traffic, cfg.subflow_paths, cfg.subflows, net, run.seed)
    ctx.timings["build_s"] = 0.0 if reused else round(net.build_s, 3)
    ctx.timings["reset_s"] = float(manifest["network"].get("reset_s", 0.0))
    # memory this kernel uses (the guest's, in the lab kernel): what a topology
    # needs (docs/benchmarks.md, "Bigger fat trees"): built, capturing, after traffic
    info = memory_mb()
    manifest["memory_mb"] = {"total": info and info[0], "built": info and info[1]}
    manifest["dataplane"].update(net.plane.describe())
    # a reused network was verified equal to the state that passed this check
    failed = [] if reused else net.ping_all()
    if failed:
        raise NetworkError(f"the reachability check failed: {'; '.join(failed)}; the "
                           "network is broken")
    if not reused:
        manifest["network"]["reach"] = net.reach.to_dict()
    state = namespace_state(net, net.topo.hosts[0])
    manifest["sysctls"] = state.pop("sysctls")
    manifest["namespace"] = state  # which host was asked, its qdiscs


def align_to_grid(ctx: RunContext) -> None:
    """On the virtual clock the run starts on the clock's grid, its traffic a fixed time
    after that (traffic/clockgrid.py). Python's collector runs here only: left to its
    allocation counts, which the runs before set, it collected in some runs' traffic
    and not in others' (FCTs up to 4.3 ms apart)."""
    if ctx.manifest["clock"] != "virtual":
        return
    assert ctx.traffic is not None
    gc.disable()
    gc.collect()
    grid = clockgrid.align()
    ctx.traffic = traffic = at_instant(ctx.traffic, grid + clockgrid.FIRST_ROUND_NS)
    switch_threads = ctx.network.plane.first_in_first_out() if traffic.fifo else 0
    ctx.manifest["clock_grid"] = {
        "period_ns": clockgrid.GRID_NS, "start_ns": grid,
        "first_round_ns": traffic.start_ns, "sched_fifo": traffic.fifo,
        "sched_fifo_switch_threads": switch_threads}


def start_captures(ctx: RunContext) -> None:
    """Every link's capture, each capped by the plan's need (plan/budget.py)."""
    if ctx.need is None:
        return
    net, manifest, capture = ctx.network, ctx.manifest, ctx.cfg.data["capture"]
    budget = budget_of(ctx.cfg, ctx.need)
    manifest["capture"]["start"] = net.captures.start(
        ctx.run_dir / "captures", int(capture["snaplen"]), budget, ctx.need.caps(budget),
        str(capture["tool"]))
    manifest["capture"]["start"]["need_mb"] = round(ctx.need.total_mb, 1)
    manifest["memory_mb"]["capturing"] = memory_used_mb()
    ctx.before = _counters(net, ctx.captured, manifest)


def measure(ctx: RunContext) -> dict[str, Any] | None:
    """The workload under the fidelity monitor; the monitor's record, judged."""
    net, manifest, traffic = ctx.network, ctx.manifest, ctx.traffic
    assert traffic is not None
    pace = None if traffic.start_ns is None else \
        functools.partial(clockgrid.sleep_to_next, manifest["clock_grid"]["start_ns"])
    monitor = fidelity.start(net, ctx.cfg.data["fidelity"], manifest, pace)
    woken = GuestCost()
    woken.start()
    ctx.started_procs.append(forks())
    t0 = time.monotonic()
    try:
        ctx.workload = run_traffic(net, ctx.cfg, ctx.run.workload_seed, traffic,
                                  ctx.run_dir / "network" / "logs", ctx.on_round)
        # on the virtual clock from the first round's instant: the wait before it is
        # idle guest time (no traffic, no wall time)
        began = t0 if traffic.start_ns is None else traffic.start_ns / 1e9
        ctx.timings["traffic_s"] = round(time.monotonic() - began, 3)
        manifest["guest_cost"] = woken.stop()
        ctx.started_procs.append(forks())
        manifest["memory_mb"]["after_traffic"] = memory_used_mb()
    finally:
        samples = fidelity.stop(monitor)
    return fidelity.finish(monitor, samples, ctx.cfg.data["fidelity"], manifest)


def stop_captures(ctx: RunContext, record: dict[str, Any] | None) -> None:
    """The captures stopped once the network is quiet, their losses judged into the
    fidelity record, which is saved whatever happens."""
    net, manifest = ctx.network, ctx.manifest
    try:
        if ctx.need is not None:
            net.wait_quiet()  # the last FINs and ACKs belong in the captures
            after = _counters(net, ctx.captured, manifest)
            manifest["capture"]["stop"] = net.captures.stop()
            fidelity.captures(record, manifest["capture"]["stop"], manifest)
            if ctx.before and after:
                manifest["interface_counters"] = counter_deltas(ctx.before, after)
    finally:
        fidelity.save(record, ctx.run_dir)


def release_network(ctx: RunContext, own: bool) -> None:
    """The network kept for the next run (the keeper's), or torn down (`own`)."""
    t1 = time.monotonic()
    ctx.keeper.release(True)
    if own:
        ctx.keeper.close()
    ctx.timings["teardown_s"] = round(time.monotonic() - t1, 3)
    ctx.started_procs.append(forks())


def record_results(ctx: RunContext) -> None:
    """transfers.csv and the traffic's figures; the run is complete."""
    manifest, workload = ctx.manifest, ctx.workload
    assert workload is not None
    manifest["processes_started"] = dict(zip(
        ("before_traffic", "traffic", "after_traffic"),
        (b - a for a, b in itertools.pairwise(ctx.started_procs)), strict=True))
    rows = workload.rows
    write_csv_atomic(ctx.run_dir / "transfers.csv", COLUMNS, row_dicts(rows))
    manifest.update(workload_manifest(workload, ctx.run_dir))
    if workload.instants:  # the virtual clock's round instants (traffic/clockgrid.py)
        manifest["clock_grid"]["rounds"] = workload.instants
    ok = sum(1 for r in rows if r.ok)
    manifest["transfers"] = {"total": len(rows), "ok": ok, "failed": len(rows) - ok,
                             "rounds": workload.rounds}
    manifest["status"] = "complete"


# ---- a run ------------------------------------------------------------------------------
def start_manifest(run: Run) -> dict[str, Any]:
    """The manifest a run starts with: its plan entry and what it runs on."""
    manifest = base_manifest(run)
    manifest.update(kernel_release=running_kernel_release(), git_revision=git_revision(),
                    tools=tool_versions(), lab_kernel=guest_kernel_description())
    manifest["clock"] = machine_clock()  # the one place a run's clock is written
    return manifest


def execute_run(run: Run, run_dir: Path, on_round: OnRound | None = None,
                keeper: NetworkKeeper | None = None) -> dict[str, Any]:
    """Build the network (or, with a `keeper`, reuse the previous run's, reset and
    verified: execute.keeper), run the workload with captures, tear down (a keeper keeps
    it for the next run instead); return the manifest.

    Failures become status 'failed' with the reason; Ctrl-C writes a failed manifest
    (so nothing is marked complete) and propagates after the network is torn down.
    """
    manifest = start_manifest(run)
    started = time.monotonic()
    if run.config.topology_kind == "paths":
        return execute_paths_run(run, run_dir, manifest, started, on_round)
    own = keeper is None  # without a keeper the network lives for this run only
    ctx = RunContext(run, run_dir, manifest, keeper or NetworkKeeper(), on_round,
                     started_procs=[forks()])
    try:
        check_disk(ctx)
        get_network(ctx)
        align_to_grid(ctx)
        start_captures(ctx)
        record = measure(ctx)
        stop_captures(ctx, record)
        release_network(ctx, own)
        record_results(ctx)
    except KeyboardInterrupt:
        ctx.keeper.close()
        manifest["error"] = ("interrupted (SIGINT); the network was torn down. Resume the "
                             "folder with `pathdiv run CONFIG --out DIR` to redo this run")
        finish_manifest(manifest, run_dir, started)
        raise
    except Exception as exc:
        ctx.keeper.close()  # a run that failed may have left anything: never reused
        manifest["error"] = f"{type(exc).__name__}: {exc}"
        log.debug("run %s failed:\n%s", run.run_id, traceback.format_exc())
    finish_manifest(manifest, run_dir, started)
    return manifest


def execute_paths_run(run: Run, run_dir: Path, manifest: dict[str, Any],
                      started: float, on_round: OnRound | None = None) -> dict[str, Any]:
    """A run on the parallel-paths topology (experiments/traffic/paths_run.py): one
    measured fetch beside the paths' background flows; its measurements go to paths.json,
    which the analysis reads in place of transfers.csv and the fat tree's captures.
    `on_round(1, 1)` when the traffic starts (the progress said "building the network"
    for the whole of a 60-s fetch)."""
    timings = manifest["timings"]
    try:
        t0 = time.monotonic()
        result = run_paths(run.config, run.flow_type, run_dir / "captures", on_round)
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


def execute_attempts(run: Run, run_dir: Path, on_round: OnRound | None = None,
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


def run_line(run: Run, manifest: dict[str, Any]) -> str:
    """One line saying how a run ended, for the user."""
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


def _counters(net: RunningNetwork, ports: list[tuple[str, str]],
              manifest: dict[str, Any]) -> dict[str, Any]:
    """A counter snapshot, or {} with the reason in the manifest (never fails the run)."""
    try:
        return counter_snapshot(net, ports)
    except Exception as exc:
        manifest["interface_counters_error"] = f"{type(exc).__name__}: {exc}"
        return {}
