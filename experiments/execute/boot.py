"""One boot of the lab kernel: every command pathdiv runs in it goes through `LabBoot`.

The lab kernel is User-Mode Linux (kernels/uml.py boots it, jailed). A boot here is: the
image (built first when it is not cached: `lab_kernel_image`), the P4 programs the
guest will need compiled on the host (`prepare`: the guest cannot write the cache),
the guest's command (`guest_argv`: this Python, `-m` a pathdiv module), what the guest
is told of its kernel (GUEST_ENV: `kernel_description`, which also tells `preflight` it
is in the right kernel), the share (the one host folder the guest may write), the host
CPU it is bound to, and a watchdog (`watch`, called every few wall seconds; what it
raises stops the guest).

What host and guest say to each other depends on who waits for whom, one way each:
- the runs of a plan (`lab_runs.py`, guest side `guest_runs.py`): files in the share,
  which is the results folder: each run's manifest, a progress file and a heartbeat
  (the host reads what the guest would write anyway, and the watchdog needs nothing
  from a guest that may be frozen);
- `pathdiv net` (`lab_command.py`): the guest's console is the user's terminal;
  `pathdiv probe`: the command's output, printed when the guest ends;
- `api.network` (experiments/api/lab.py): requests and answers, one JSON line each, on
  the guest's console (experiments/api/wire.py).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pathdiv.experiments.dataplane.select import guest_env, prepare_for_lab_kernel
from pathdiv.experiments.fabric.environment import LAB_KERNEL_ENV
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


class LabKernelUnavailable(RuntimeError):
    """The lab kernel cannot run on this machine (the reason says what is missing)."""


# ---- pure ------------------------------------------------------------------------------
def guest_argv(python: str, module: str, args: Iterable[str]) -> list[str]:
    """The command a guest runs: `python -m module args...` (pathdiv's own code, read
    from the host's file system)."""
    return [python, "-m", module, *args]


def kernel_description(clock: str, image: Path, digest: str, release: str,
                       memory_mb: int) -> dict[str, Any]:
    """What each manifest records under `lab_kernel` (the guest reads it from GUEST_ENV)."""
    return {"runner": "uml", "clock": clock, "image": str(image), "recipe_digest": digest,
            "image_release": release, "cpus": 1, "memory_mb": memory_mb}


def lane_cpu(lane: int | None, cpus: list[int]) -> int | None:
    """The host CPU lab kernel `lane` (0, 1, ...; None: the only one) runs on: lanes
    take the CPUs this process may use in turn, so two lab kernels on two cores never
    share one; a single lab kernel takes the last (kernels/uml.py `pinned` says why
    binding helps: a noisy long run took 1.56x the wall time unbound, docs/benchmarks.md).
    A process that may use one CPU only (`taskset -c 0 pathdiv run ...`) gets that CPU:
    binding there changes nothing for it, and its slot claim (execute/cpuslots.py) tells
    the other pathdiv processes that the CPU holds a lab kernel. None: no CPU to use."""
    if not cpus:
        return None
    return sorted(cpus)[-1 if lane is None else lane % len(cpus)]


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


# ---- side effects ----------------------------------------------------------------------
def say(message: str) -> None:
    """What the host says while it prepares a boot, on standard error."""
    print(message, file=sys.stderr, flush=True)


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


def prepare(planes: Iterable[str]) -> list[str]:
    """Compile, on the host, what the guest's data planes will read from the cache (the
    P4 programs of a bmv2 or p4-ebpf plane); what was done, a line each. DataPlaneError
    when a plane cannot be prepared."""
    return prepare_for_lab_kernel(planes)


@dataclass
class LabBoot:
    """How to boot the lab kernel `image`: its clock, memory and host CPU. `run` boots
    it for one command (as many times as called)."""

    image: Path
    clock: str = "virtual"
    memory_mb: int = uml.MEMORY_MB
    cpu: int | None = None  # the host CPU UML and its processes run on (`lane_cpu`)
    stop: threading.Event = field(default_factory=threading.Event)  # set: stop the guest

    def __post_init__(self) -> None:
        self.description = kernel_description(self.clock, self.image, self.image.parent.name,
                                              kernel_release(self.image), self.memory_mb)

    def run(self, module: str, args: Iterable[str], share: Path,
            timeout_s: float | None = None, watch: Callable[[], None] | None = None,
            watch_s: float = 2.0, terminal: bool = False,
            channel: tuple[int, int] | None = None) -> uml.UMLResult:
        """Boot, run `python -m module args...` in the guest (cwd: the checkout) with
        `share` writable, and return its result once the guest powered off.

        `watch` is called every `watch_s` wall seconds while the guest runs; whatever it
        raises stops the guest and propagates, as does `stop` being set (as
        KeyboardInterrupt) and `timeout_s` wall seconds passing (LabKernelError).
        `terminal`/`channel`: the guest's console (kernels/uml.py `run_in_uml`)."""

        def poll() -> None:
            if self.stop.is_set():
                raise KeyboardInterrupt("SIGINT")
            if watch is not None:
                watch()

        return uml.run_in_uml(
            guest_argv(sys.executable, module, args), share, self.image, timeout_s,
            clock=self.clock, memory_mb=self.memory_mb, cwd=REPO_DIR,
            env={GUEST_ENV: json.dumps(self.description), **guest_env()}, poll=poll, poll_s=watch_s,
            terminal=terminal, channel=channel, cpu=self.cpu)


# ---- the host the boots share ----------------------------------------------------------
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
