"""Runs with hosts.kernel: net, executed in one lab-VM boot per plan.

The host boots the pathdiv kernel once (pathdiv.kernels.vm.run_in_lab) with the results
folder shared read-write, and the guest runs `python -m pathdiv.experiments.runner execute
FOLDER RUN_ID...` for all of the plan's lab runs, in plan order. Each run writes its own
manifest into the shared folder, recording the kernel it ran on (`uname -r` in the guest)
and the VM it ran in (`lab_vm`: accelerator, image, recipe digest, size). The host
watches the folder while the VM runs: progress, plan.json, and a watchdog that stops a
VM in which no run finished for longer than any run of the plan may take.

Pure parts (the guest command, the watchdog bound, what the guest is told) come first;
`LabSession` holds the side effects.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pathdiv.experiments.config.load import Config
from pathdiv.experiments.config.plan import Run
from pathdiv.experiments.fabric.environment import LAB_VM_ENV
from pathdiv.experiments.manifest import read_json_dict
from pathdiv.experiments.runstate import run_state, write_failed
from pathdiv.experiments.traffic.workloads import rounds
from pathdiv.kernels import vm as labvm
from pathdiv.kernels.vm import LabKernelError

GUEST_ENV = LAB_VM_ENV  # JSON describing the VM, exported to the guest's command
PROGRESS_FILE = Path(".labvm") / "progress.json"  # inside the results folder
BOOT_ALLOWANCE_S = 300.0  # boot + a network build under TCG (measured ~130 s)
VM_MEMORY_MB = 4096


class LabVMUnavailable(RuntimeError):
    """The lab VM cannot be started on this machine (the reason says what is missing)."""


# ---- pure ------------------------------------------------------------------------------
def guest_argv(python: str, folder: Path, run_ids: list[str],
               progress: Path = PROGRESS_FILE) -> list[str]:
    """The command the guest runs: every lab run of the plan, in order, in one boot."""
    return [python, "-m", "pathdiv.experiments.runner", "execute",
            "--progress", str(folder / progress), str(folder), *run_ids]


def progress_file(shard_name: str | None) -> Path:
    """The guest's progress file in the results folder: one per shard sharing it."""
    if shard_name is None:
        return PROGRESS_FILE
    return PROGRESS_FILE.with_name(f"progress-{shard_name}.json")


def run_bound_s(cfg: Config, rounds: int) -> float:
    """Longest a run of `cfg` may take in the VM before the watchdog gives up on it.

    Every round of transfers is bounded by workload.timeout_s (the transfers time out),
    and the network build, capture drain and teardown by the boot allowance.
    """
    return rounds * float(cfg.data["workload"]["timeout_s"]) + BOOT_ALLOWANCE_S


def vm_description(accel: str, accel_reason: str, image: Path, digest: str,
                   release: str, cpus: int, memory_mb: int) -> dict[str, Any]:
    """What each manifest records under `lab_vm` (the guest reads it from GUEST_ENV)."""
    return {"accel": accel, "accel_reason": accel_reason, "image": str(image),
            "recipe_digest": digest, "image_release": release, "cpus": cpus,
            "memory_mb": memory_mb}


def guest_vm_description() -> dict[str, Any] | None:
    """Inside the lab VM: the host's description of it; None anywhere else."""
    text = os.environ.get(GUEST_ENV)
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def format_progress(doc: dict[str, Any]) -> str:
    """Progress postfix from the guest's progress file: 'run_id round n/N in lab VM'."""
    head = str(doc.get("run_id", "?"))
    if doc.get("rounds"):
        head += f" round {doc.get('round', 0)}/{doc['rounds']}"
    else:
        head += " building the network"
    return f"{head} in lab VM"


# ---- side effects ----------------------------------------------------------------------
def describe_lab_vm() -> str:
    """Whether the lab VM can start here, for `pathdiv check` (never builds anything)."""

    missing = labvm.missing_vm_tools()
    if missing:
        return f"cannot start here: missing {', '.join(missing)}"
    try:
        image = labvm.find_lab_kernel()
    except labvm.LabKernelError as exc:
        return f"cannot start here: {exc}"
    accel = labvm.detect_accel()
    kernel = (f"kernel {labvm.kernel_release(image)} cached ({image})" if image else
              "kernel not built yet: `pathdiv run` builds it first (`make kernel`)")
    return f"{kernel}; accelerator {accel.name} ({accel.reason})"


def lab_kernel_image(log: Callable[[str], None]) -> Path:
    """The cached lab kernel, built first when it is not (once per patch/config change)."""

    missing = labvm.missing_vm_tools()
    if missing:
        raise LabVMUnavailable(f"missing {', '.join(missing)}; run `make setup`")
    try:
        image = labvm.find_lab_kernel()
        if image is None:
            log("pathdiv: building the lab kernel first (about 12 min on an idle 2-core "
                f"machine, once; log in {labvm.BUILD_DIR / 'build.log'})")
            image = labvm.build_lab_kernel(log=log)
    except labvm.LabKernelError as exc:
        raise LabVMUnavailable(str(exc)) from exc
    return image


@dataclass
class LabSession:
    """One VM boot executing `runs` (all hosts.kernel: net) into `folder`.

    `on_progress(text)` gets the guest's progress; `on_finished(run, manifest)` is called
    once per run as soon as its manifest is final (complete or failed), in the host.
    """

    folder: Path
    runs: list[Run]
    image: Path
    on_progress: Callable[[str], None]
    on_finished: Callable[[Run, dict[str, Any]], None]
    progress: Path = PROGRESS_FILE  # relative to folder

    def __post_init__(self) -> None:
        self.reported: set[str] = set()
        self.last_finish = time.monotonic()
        self.result: Any = None
        self.bounds: dict[str, float] = {}
        self.desc: dict[str, Any] = {}

    def execute(self) -> None:
        """Boot, run everything, then give every run not finished a failed manifest.

        Ctrl-C stops the VM; the run it was in gets a failed manifest, runs not started
        stay pending (no folder), as on the host.
        """

        accel = labvm.detect_accel()
        cpus = os.cpu_count() or 1
        release = labvm.kernel_release(self.image)
        self.desc = desc = vm_description(accel.name, accel.reason, self.image,
                                          self.image.parent.name, release, cpus,
                                          VM_MEMORY_MB)
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
        argv = guest_argv(sys.executable, self.folder.resolve(), [r.run_id for r in self.runs],
                          self.progress)
        self.last_finish = time.monotonic()
        why = ""
        try:
            self.result = labvm.run_in_lab(
                argv, share=self.folder, kernel=self.image, timeout_s=None, cpus=cpus,
                memory_mb=VM_MEMORY_MB, cwd=labvm.REPO_DIR, accel=accel,
                env={GUEST_ENV: json.dumps(desc)}, poll=self.poll)
            if self.result.returncode not in (0, 1):  # 1: some run failed, said in manifest
                why = (f"the guest command exited {self.result.returncode}: "
                       f"{self.result.stderr.strip()[-600:]}")
        except KeyboardInterrupt:
            self.collect()
            self.close_unfinished("interrupted (SIGINT); the lab VM was stopped. Resume the "
                                  "folder with `pathdiv run CONFIG --out DIR` to redo this run",
                                  started_only=True)
            raise
        except labvm.LabKernelError as exc:
            why = str(exc)
        self.collect()
        self.close_unfinished(f"the lab VM ended before this run finished: {why or 'no reason'}",
                              started_only=False)

    def poll(self) -> None:
        """Called by run_in_lab every few seconds: report runs, watch for a stall."""
        self.collect()
        doc = read_json_dict(self.folder / self.progress)
        if doc:
            self.on_progress(format_progress(doc))
        current = next((r for r in self.runs if r.run_id not in self.reported), None)
        if current is None:
            return
        bound = self.bounds[current.run_id]
        if time.monotonic() - self.last_finish > bound:

            raise LabKernelError(f"no run finished in the lab VM for {bound:.0f} s (the longest "
                           f"run {current.run_id} may take); the VM was stopped")

    def collect(self) -> None:

        for run in self.runs:
            if run.run_id in self.reported:
                continue
            if run_state(self.folder / "runs" / run.run_id) in ("complete", "failed"):
                self.reported.add(run.run_id)
                self.last_finish = time.monotonic()
                manifest = read_json_dict(self.folder / "runs" / run.run_id / "manifest.json")
                self.on_finished(run, manifest or {})

    def close_unfinished(self, reason: str, started_only: bool) -> None:

        for run in self.runs:
            if run.run_id in self.reported:
                continue
            run_dir = self.folder / "runs" / run.run_id
            if started_only and not run_dir.exists():
                continue
            manifest = write_failed(run, run_dir, reason, lab_vm=self.desc,
                                    kernel_release=self.desc.get("image_release", ""))
            self.reported.add(run.run_id)
            self.on_finished(run, manifest)


