"""Runs with hosts.kernel: lab, executed in one boot of the lab kernel per lane and clock.

The host boots the lab kernel (execute/boot.py) with the results folder as its share,
and the guest runs `python -m pathdiv.experiments.execute.guest_runs execute FOLDER
RUN_ID...` for the lane's runs, in order. Each run writes its own manifest into the
folder, recording the kernel it ran on (`uname -r` in the guest) and how (`lab_kernel`:
runner, clock, image, recipe digest, memory). The host watches the folder while the
guest runs: progress, plan.json, and two watchdogs, fed by the guest's heartbeat (its
own clock, written every few guest seconds) and by what it writes into the run's
folder: a run that takes longer in guest time than any run of the plan may take, and a
guest that shows no sign of life (`Signs`: its clock, its progress, what it writes into
the run's folder, the node scripts' state files among it) for FROZEN_WALL_S wall
seconds (in virtual time, a process that polls the clock without sleeping freezes it).

Pure parts (the guest command, the watchdog bound, what the guest shows) come first;
`LabRuns` holds the side effects.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pathdiv.analysis import safefiles
from pathdiv.experiments.config.load import Config
from pathdiv.experiments.dataplane.base import DataPlaneError
from pathdiv.experiments.execute.boot import LabBoot, prepare
from pathdiv.experiments.execute.runstate import run_state, set_aside, write_failed
from pathdiv.experiments.fabric.nodescript import script_ended
from pathdiv.experiments.manifest import read_json_dict
from pathdiv.experiments.plan.designations import rounds
from pathdiv.experiments.plan.runs import Run
from pathdiv.kernels import uml
from pathdiv.kernels.build import LabKernelError

GUEST_MODULE = "pathdiv.experiments.execute.guest_runs"  # the guest's side of lab runs
PROGRESS_FILE = Path(".labkernel") / "progress.json"  # inside the results folder
BUILD_ALLOWANCE_S = 120.0  # guest seconds for a network build, capture drain, teardown
# Wall seconds the guest may show no sign of life (`Signs`; boot included) before it is
# taken for frozen. CPU work costs no guest time, so a busy guest's clock stands still
# too: once, on a loaded host, the start of a run (between two runs' heartbeats) took
# 182 s of wall and tripped a 180 s bound on the clock alone; a k=16 build (1,344 node
# scripts running at once, its lab kernel at 15-19 % of a core) stood still for 600 s
# after its last script was written, when nothing but the scripts' end was counted. Its
# scripts now write each step's end into their state files, so the bound stays the same
# whatever the network's size; FROZEN_ENV sets another (a host loaded past that).
FROZEN_WALL_S = 600.0
FROZEN_ENV = "PATHDIV_FROZEN_S"
FROZEN_ALLOWED = (10.0, 86400.0)


# ---- pure ------------------------------------------------------------------------------
def frozen_bound_s(environ: Mapping[str, str]) -> float:
    """Wall seconds a guest may show no sign of life: FROZEN_ENV when set, else
    FROZEN_WALL_S. LabKernelError naming the variable, its value and what is allowed."""
    text = environ.get(FROZEN_ENV, "").strip()
    if not text:
        return FROZEN_WALL_S
    low, high = FROZEN_ALLOWED
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not low <= value <= high:
        raise LabKernelError(f"{FROZEN_ENV}={text!r} is not allowed: wall seconds from "
                             f"{low:.0f} to {high:.0f} (unset: {FROZEN_WALL_S:.0f})")
    return value


@dataclass(frozen=True)
class Signs:
    """What the host sees of a guest at one poll, from files the guest writes anyway:
    any change from the poll before is a sign of life. A frozen guest (a process polls
    the clock) changes none of them; a busy one changes one at least every few steps."""

    clock: Any  # the heartbeat (the guest's clock and run), None before the first
    progress: Any  # the progress file (run and round), None before the first
    run_folder: tuple[int, int, int]  # `folder_activity` of the current run's folder:
    # node scripts (written, then their state files' steps), captures, logs, manifest

    def alive_since(self, before: Signs | None) -> bool:
        return before is None or self != before


def guest_args(folder: Path, run_ids: list[str], progress: Path = PROGRESS_FILE) -> list[str]:
    """The guest's arguments (to GUEST_MODULE): the lane's runs, in order, in one boot."""
    return ["execute", "--progress", str(folder / progress), str(folder), *run_ids]


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


def stall(heartbeat: dict[str, Any] | None, started_guest_s: float | None, bound_s: float,
          quiet_s: float, run_id: str, frozen_s: float | None = None) -> str | None:
    """Why the guest is to be stopped, or None: it showed no sign of life (`Signs`) for
    more than `frozen_s` wall seconds (FROZEN_WALL_S unless given), or the run outlasted
    its bound in guest time (pure; `poll` feeds it what it read)."""
    frozen = FROZEN_WALL_S if frozen_s is None else frozen_s
    if quiet_s > frozen:
        where = "before its first heartbeat" if heartbeat is None else f"during {run_id}"
        return (f"the lab kernel showed no sign of life for {quiet_s:.0f} s of wall time "
                f"{where}: its clock stood still and it wrote nothing (no heartbeat, "
                "progress, node-script step or other file in the run's folder); a process "
                "in the guest polls the clock without sleeping (in virtual time every wait "
                f"must sleep or block); the guest was stopped. The bound is {frozen:.0f} s: "
                f"set {FROZEN_ENV}=SECONDS to wait longer on a host this loaded")
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


STATE_TAIL_BYTES = 64  # the end of a node script's state file: its last step line
TALLY_EVERY_S = 15.0  # a k=16 build has 1,664 state files: read them this seldom


def build_tally(network: Path) -> tuple[int, int] | None:
    """(ended, written) node scripts of a build under `network` (a run's `network`
    folder, which the guest writes): state files whose last line is their last step,
    and scripts written so far; None before the first. Read as hostile: through no link,
    a bounded tail of each."""
    try:
        top = safefiles.open_dir(network if network.is_absolute() else Path.cwd() / network)
    except OSError:
        return None
    ended = written = 0
    try:
        for sub in ("nodes", "switches"):
            try:
                dirfd = safefiles.open_subdir(top, sub)
            except OSError:
                continue
            try:
                for name, info in safefiles.iter_names(dirfd):
                    if not name.endswith(".state") or not stat.S_ISREG(info.st_mode):
                        continue
                    written += 1
                    try:
                        tail, _ = safefiles.read_tail_beneath(dirfd, name, STATE_TAIL_BYTES)
                    except OSError:
                        continue
                    ended += script_ended(tail.decode("ascii", errors="replace"))
            finally:
                os.close(dirfd)
    finally:
        os.close(top)
    return (ended, written) if written else None


def format_progress(doc: dict[str, Any], tally: tuple[int, int] | None = None) -> str:
    """Progress postfix from the guest's progress file: 'run_id round n/N in the lab
    kernel'; while the network is built, how many node scripts have ended (`tally`)."""
    head = str(doc.get("run_id", "?"))
    if doc.get("rounds"):
        head += f" round {doc.get('round', 0)}/{doc['rounds']}"
    else:
        head += " building the network"
        if tally is not None:
            head += f" ({tally[0]:,} of {tally[1]:,} node scripts ended)"
    return f"{head} in the lab kernel"


# ---- side effects ----------------------------------------------------------------------
@dataclass
class LabRuns:
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
    cpu: int | None = None  # the host CPU UML and its processes run on (`boot.lane_cpu`)

    def __post_init__(self) -> None:
        self.reported: set[str] = set()
        self.result: Any = None
        self.bounds: dict[str, float] = {}
        self.frozen_s = FROZEN_WALL_S  # wall seconds the guest may show no sign of life
        self.desc: dict[str, Any] = {}
        self.heartbeat: dict[str, Any] | None = None  # the last the guest wrote
        self.progress_doc: dict[str, Any] | None = None  # likewise
        self.changed_at = time.monotonic()  # wall time the guest last showed life
        self.signs: Signs | None = None  # what it showed at the last poll
        self.run_started: dict[str, float] = {}  # guest seconds each run was first seen
        self.tally: tuple[int, int] | None = None  # node scripts of the build (`_tally`)
        self.tally_at = -TALLY_EVERY_S
        self.tally_of: Any = None

    @property
    def heartbeat_file(self) -> Path:
        return self.folder / heartbeat_path(self.progress)

    def execute(self) -> None:
        """Boot, run everything, then give every run not finished a failed manifest.

        Ctrl-C stops the guest; the run it was in gets a failed manifest, runs not started
        stay pending (no folder), as on the host.
        """
        boot = LabBoot(self.image, self.clock, self.memory_mb, self.cpu,
                       self.stop or threading.Event())
        self.desc = boot.description
        for run in self.runs:
            w = run.config.data["workload"]
            n = len(rounds(str(w["pattern"]), run.config.topology().hosts, run.workload_seed,
                           int(w["iterations"]), int(w["requests"])))
            self.bounds[run.run_id] = run_bound_s(run.config, n)
        for run in self.runs:  # an earlier attempt kept in earlier/, never beside this one
            set_aside(self.folder, run.run_id)
        (self.folder / self.progress).unlink(missing_ok=True)
        self.heartbeat_file.unlink(missing_ok=True)
        args = guest_args(self.folder.resolve(), [r.run_id for r in self.runs], self.progress)
        why = ""
        try:
            self.frozen_s = frozen_bound_s(os.environ)
            for line in prepare({r.config.dataplane for r in self.runs}):
                if self.log is not None:
                    self.log(f"pathdiv: {line}")
        except (DataPlaneError, LabKernelError) as exc:  # every run fails, nothing boots
            self.close_unfinished(str(exc), started_only=False)
            return
        self.changed_at = time.monotonic()
        try:
            self.result = boot.run(GUEST_MODULE, args, self.folder, watch=self.poll)
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
        """Called every few wall seconds while the guest runs: report runs, watch for a
        stall."""
        self.collect()
        doc = read_json_dict(self.folder / self.progress)
        if doc:
            self.progress_doc = doc
            self.on_progress(format_progress(doc, self._tally(doc)))
        beat = read_json_dict(self.heartbeat_file)
        if beat is not None:
            self.heartbeat = beat
        current = next((r for r in self.runs if r.run_id not in self.reported), None)
        if current is None:
            return
        signs = Signs(self.heartbeat, self.progress_doc,
                      folder_activity(self.folder / "runs" / current.run_id))
        if signs.alive_since(self.signs):
            self.signs, self.changed_at = signs, time.monotonic()
        if self.heartbeat is not None and self.heartbeat.get("run_id") == current.run_id:
            self.run_started.setdefault(current.run_id, float(self.heartbeat["guest_s"]))
        why = stall(self.heartbeat, self.run_started.get(current.run_id),
                    self.bounds[current.run_id], time.monotonic() - self.changed_at,
                    current.run_id, self.frozen_s)
        if why:
            raise LabKernelError(why)

    def _tally(self, doc: dict[str, Any]) -> tuple[int, int] | None:
        """The node scripts of the run being built (`build_tally`), read at most every
        TALLY_EVERY_S; None once its traffic runs."""
        if doc.get("rounds"):
            return None
        now = time.monotonic()
        if now - self.tally_at >= TALLY_EVERY_S or self.tally_of != doc.get("run_id"):
            self.tally_at, self.tally_of = now, doc.get("run_id")
            self.tally = build_tally(self.folder / "runs" / str(doc.get("run_id", "?"))
                                     / "network")
        return self.tally

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


def in_parallel(lanes: list[list[Run]],
                work: Callable[[int, list[Run], threading.Event], None]) -> None:
    """`work(index, lane, stop)` for every lane at once, a thread each. Ctrl-C, or an
    error in one lane, sets `stop` (on which each lane stops its lab kernel); returns
    once every started lane has ended, raising the first error, or KeyboardInterrupt
    when a lane saw a stop nobody asked for."""
    stop = threading.Event()
    errors: list[BaseException] = []
    ended = [threading.Event() for _ in lanes]

    def lane_main(index: int, lane: list[Run]) -> None:
        try:
            work(index, lane, stop)
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
