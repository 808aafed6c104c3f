"""Runs with hosts.kernel: lab, executed in one boot of the lab kernel per plan and clock.

The host boots the lab kernel (User-Mode Linux, kernels/uml.py) once with the results
folder writable, and the guest runs `python -m pathdiv.experiments.runner execute
FOLDER RUN_ID...` for the plan's lab runs, in plan order. Each run writes its own
manifest into the folder, recording the kernel it ran on (`uname -r` in the guest) and
how (`lab_kernel`: runner, clock, image, recipe digest, memory). The host watches the
folder while the guest runs: progress, plan.json, and two watchdogs, fed by the guest's
heartbeat (its own clock, written every few guest seconds) and by what it writes into the
run's folder: a run that takes longer in guest time than any run of the plan may take,
and a guest whose clock stands still while it writes nothing (in virtual time, a
process that polls the clock without sleeping freezes it).

Pure parts (the guest command, the watchdog bound, what the guest is told) come first;
`LabSession` holds the side effects.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pathdiv.experiments.config.load import Config
from pathdiv.experiments.dataplane.base import DataPlaneError
from pathdiv.experiments.dataplane.select import guest_env, prepare_for_lab_kernel
from pathdiv.experiments.execute.runstate import run_state, write_failed
from pathdiv.experiments.fabric.environment import LAB_KERNEL_ENV
from pathdiv.experiments.manifest import read_json_dict
from pathdiv.experiments.plan.designations import rounds
from pathdiv.experiments.plan.runs import Run
from pathdiv.kernels import uml
from pathdiv.kernels.abilities import REPO_DIR
from pathdiv.kernels.build import (
    BUILD_DIR,
    LabKernelError,
    build_lab_kernel,
    find_lab_kernel,
    kernel_release,
)

GUEST_ENV = LAB_KERNEL_ENV  # JSON describing the lab kernel, exported to the guest
PROGRESS_FILE = Path(".labkernel") / "progress.json"  # inside the results folder
BUILD_ALLOWANCE_S = 120.0  # guest seconds for a network build, capture drain, teardown
# Wall seconds the guest may stand still: its clock does not move and it writes nothing
# into the run's folder (boot included). CPU work costs no guest time, so a busy guest's
# clock stands still too: once, on a loaded host, the start of a run (between two runs'
# heartbeats) took 182 s of wall and tripped a 180 s bound on the clock alone. Its
# network build was writing node scripts all along, which is why writes count as life.
FROZEN_WALL_S = 600.0


class LabKernelUnavailable(RuntimeError):
    """The lab kernel cannot run on this machine (the reason says what is missing)."""


# ---- pure ------------------------------------------------------------------------------
def guest_argv(python: str, folder: Path, run_ids: list[str],
               progress: Path = PROGRESS_FILE) -> list[str]:
    """The command the guest runs: every lab run of the plan, in order, in one boot."""
    return [python, "-m", "pathdiv.experiments.runner", "execute",
            "--progress", str(folder / progress), str(folder), *run_ids]


def lane_cpu(lane: int | None, cpus: list[int]) -> int | None:
    """The host CPU lab kernel `lane` (0, 1, ...; None: the only one) runs on: lanes
    take the CPUs this process may use in turn, so two lab kernels on two cores never
    share one; a single lab kernel takes the last (kernels/uml.py `pinned` says why
    binding helps: a noisy long run took 1.56x the wall time unbound, docs/benchmarks.md).
    None (unbound) when this process may use one CPU only."""
    if len(cpus) < 2:
        return None
    return sorted(cpus)[-1 if lane is None else lane % len(cpus)]


def heartbeat_path(progress: Path) -> Path:
    """Where the guest writes its heartbeat, beside its progress file."""
    return progress.with_name(progress.stem + ".heartbeat.json")


def progress_file(shard_name: str | None) -> Path:
    """The guest's progress file in the results folder: one per shard or lab kernel
    sharing it (`shard_name`: e.g. shard-0-of-2, job-1, shard-0-of-2-job-1)."""
    if shard_name is None:
        return PROGRESS_FILE
    return PROGRESS_FILE.with_name(f"progress-{shard_name}.json")


def run_bound_s(cfg: Config, rounds: int) -> float:
    """Longest a run of `cfg` may take, in guest seconds, before the watchdog stops it.

    Every round of transfers is bounded by workload.timeout_s (the transfers time out),
    and the network build, capture drain and teardown by the build allowance.
    """
    return rounds * float(cfg.data["workload"]["timeout_s"]) + BUILD_ALLOWANCE_S


def kernel_description(clock: str, image: Path, digest: str, release: str,
                       memory_mb: int) -> dict[str, Any]:
    """What each manifest records under `lab_kernel` (the guest reads it from GUEST_ENV)."""
    return {"runner": "uml", "clock": clock, "image": str(image), "recipe_digest": digest,
            "image_release": release, "cpus": 1, "memory_mb": memory_mb}


def stall(heartbeat: dict[str, Any] | None, started_guest_s: float | None, bound_s: float,
          wall_since_change_s: float, run_id: str) -> str | None:
    """Why the guest is to be stopped, or None: its clock stood still, or the run outlasted
    its bound in guest time (pure; `poll` feeds it what it read)."""
    if wall_since_change_s > FROZEN_WALL_S:
        where = "before its first heartbeat" if heartbeat is None else f"during {run_id}"
        return (f"the lab kernel's clock stood still and it wrote nothing for "
                f"{wall_since_change_s:.0f} s of wall time {where}: a process in the "
                "guest polls the clock without sleeping "
                "(in virtual time every wait must sleep or block); the guest was stopped")
    if heartbeat is not None and started_guest_s is not None:
        spent = float(heartbeat["guest_s"]) - started_guest_s
        if spent > bound_s:
            return (f"{run_id} did not finish in {spent:.0f} s of guest time (its rounds may "
                    f"take {bound_s:.0f} s); the guest was stopped")
    return None


def folder_activity(folder: Path) -> tuple[int, int, int]:
    """What the guest has written under `folder` so far: (files, bytes, newest mtime in
    ns). A guest frozen by a polling process writes nothing, a busy one keeps writing
    (node scripts, captures, logs), so a change tells the two apart."""
    files = size = newest = 0
    for root, _, names in os.walk(folder):
        for name in names:
            try:
                st = os.stat(os.path.join(root, name))
            except OSError:  # written and renamed meanwhile
                continue
            files, size, newest = files + 1, size + st.st_size, max(newest, st.st_mtime_ns)
    return files, size, newest


def guest_kernel_description() -> dict[str, Any] | None:
    """Inside the lab kernel: the host's description of it; None anywhere else."""
    text = os.environ.get(GUEST_ENV)
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def format_progress(doc: dict[str, Any]) -> str:
    """Progress postfix from the guest's progress file: 'run_id round n/N in the lab kernel'."""
    head = str(doc.get("run_id", "?"))
    if doc.get("rounds"):
        head += f" round {doc.get('round', 0)}/{doc['rounds']}"
    else:
        head += " building the network"
    return f"{head} in the lab kernel"


# ---- side effects ----------------------------------------------------------------------
def describe_lab_kernel() -> str:
    """Whether the lab kernel is built, for `pathdiv check` (never builds anything)."""
    try:
        image = find_lab_kernel()
    except LabKernelError as exc:
        return f"cannot run here: {exc}"
    if image is None:
        return "not built yet: `pathdiv run` builds it first (`make kernel`, ~15 min once)"
    return f"{kernel_release(image)} cached ({image}); User-Mode Linux"


def lab_kernel_image(log: Callable[[str], None]) -> Path:
    """The cached lab kernel, built first when it is not (once per patch/config change)."""
    try:
        image = find_lab_kernel()
        if image is None:
            log("pathdiv: building the lab kernel first (about 15 min on an idle 2-core "
                f"machine, once; log in {BUILD_DIR / 'build.log'})")
            image = build_lab_kernel(log=log)
    except LabKernelError as exc:
        raise LabKernelUnavailable(str(exc)) from exc
    return image


@dataclass
class LabSession:
    """One boot of the lab kernel executing `runs` (all hosts.kernel: lab, one clock) into
    `folder`.

    `on_progress(text)` gets the guest's progress; `on_finished(run, manifest)` is called
    once per run as soon as its manifest is final (complete or failed), in the host.
    """

    folder: Path
    runs: list[Run]
    image: Path
    on_progress: Callable[[str], None]
    on_finished: Callable[[Run, dict[str, Any]], None]
    progress: Path = PROGRESS_FILE  # relative to folder
    clock: str = "virtual"
    memory_mb: int = uml.MEMORY_MB
    log: Callable[[str], None] | None = None  # lines about what the host did first
    stop: threading.Event | None = None  # set: stop the guest as Ctrl-C would (lanes)
    cpu: int | None = None  # the host CPU UML and its processes run on (`lane_cpu`)

    def __post_init__(self) -> None:
        self.reported: set[str] = set()
        self.result: Any = None
        self.bounds: dict[str, float] = {}
        self.desc: dict[str, Any] = {}
        self.heartbeat: dict[str, Any] | None = None
        self.changed_at = time.monotonic()  # wall time the guest last showed life
        self.activity: tuple[int, int, int] | None = None  # of the current run's folder
        self.run_started: dict[str, float] = {}  # guest seconds each run was first seen

    @property
    def heartbeat_file(self) -> Path:
        return self.folder / heartbeat_path(self.progress)

    def execute(self) -> None:
        """Boot, run everything, then give every run not finished a failed manifest.

        Ctrl-C stops the guest; the run it was in gets a failed manifest, runs not started
        stay pending (no folder), as on the host.
        """
        release = kernel_release(self.image)
        self.desc = desc = kernel_description(self.clock, self.image, self.image.parent.name,
                                              release, self.memory_mb)
        for run in self.runs:
            w = run.config.data["workload"]
            n = len(rounds(str(w["pattern"]), run.config.topology().hosts, run.workload_seed,
                           int(w["iterations"]), int(w["requests"])))
            self.bounds[run.run_id] = run_bound_s(run.config, n)
        for run in self.runs:
            run_dir = self.folder / "runs" / run.run_id
            if run_dir.exists():
                shutil.rmtree(run_dir)
        (self.folder / self.progress).unlink(missing_ok=True)
        self.heartbeat_file.unlink(missing_ok=True)
        argv = guest_argv(sys.executable, self.folder.resolve(), [r.run_id for r in self.runs],
                          self.progress)
        why = ""
        try:
            for line in prepare_for_lab_kernel({r.config.dataplane for r in self.runs}):
                if self.log is not None:
                    self.log(f"pathdiv: {line}")
        except DataPlaneError as exc:  # every run fails with the reason, nothing boots
            self.close_unfinished(str(exc), started_only=False)
            return
        self.changed_at = time.monotonic()
        try:
            self.result = uml.run_in_uml(
                argv, share=self.folder, kernel=self.image, timeout_s=None, clock=self.clock,
                memory_mb=self.memory_mb, cwd=REPO_DIR,
                env={GUEST_ENV: json.dumps(desc), **guest_env()}, poll=self.poll, cpu=self.cpu)
            if self.result.returncode not in (0, 1):  # 1: some run failed, said in manifest
                why = (f"the guest command exited {self.result.returncode}: "
                       f"{self.result.stderr.strip()[-600:]}")
        except KeyboardInterrupt:
            self.collect()
            self.close_unfinished("interrupted (SIGINT); the lab kernel was stopped. Resume the "
                                  "folder with `pathdiv run CONFIG --out DIR` to redo this run",
                                  started_only=True)
            raise
        except LabKernelError as exc:
            why = str(exc)
        self.collect()
        self.close_unfinished(f"the lab kernel stopped before this run finished: "
                              f"{why or 'no reason'}", started_only=False)

    def poll(self) -> None:
        """Called by run_in_uml every few wall seconds: report runs, watch for a stall."""
        self.collect()
        if self.stop is not None and self.stop.is_set():  # another lab kernel was stopped
            raise KeyboardInterrupt("SIGINT")
        doc = read_json_dict(self.folder / self.progress)
        if doc:
            self.on_progress(format_progress(doc))
        beat = read_json_dict(self.heartbeat_file)
        if beat is not None and beat != self.heartbeat:
            self.heartbeat, self.changed_at = beat, time.monotonic()
        current = next((r for r in self.runs if r.run_id not in self.reported), None)
        if current is None:
            return
        activity = folder_activity(self.folder / "runs" / current.run_id)
        if activity != self.activity:
            self.activity, self.changed_at = activity, time.monotonic()
        if self.heartbeat is not None and self.heartbeat.get("run_id") == current.run_id:
            self.run_started.setdefault(current.run_id, float(self.heartbeat["guest_s"]))
        why = stall(self.heartbeat, self.run_started.get(current.run_id),
                    self.bounds[current.run_id], time.monotonic() - self.changed_at,
                    current.run_id)
        if why:
            raise LabKernelError(why)

    def collect(self) -> None:
        for run in self.runs:
            if run.run_id in self.reported:
                continue
            if run_state(self.folder / "runs" / run.run_id) in ("complete", "failed"):
                self.reported.add(run.run_id)
                manifest = read_json_dict(self.folder / "runs" / run.run_id / "manifest.json")
                self.on_finished(run, manifest or {})

    def close_unfinished(self, reason: str, started_only: bool) -> None:
        for run in self.runs:
            if run.run_id in self.reported:
                continue
            run_dir = self.folder / "runs" / run.run_id
            if started_only and not run_dir.exists():
                continue
            manifest = write_failed(run, run_dir, reason, lab_kernel=self.desc,
                                    kernel_release=self.desc.get("image_release", ""))
            self.reported.add(run.run_id)
            self.on_finished(run, manifest)




def host_cpus() -> list[int]:
    """The host CPUs this process may run on."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def host_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def host_ram_mb() -> int:
    """This machine's RAM in MB (MemTotal), 0 when unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0
