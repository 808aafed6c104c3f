"""What this machine can do, checked before anything is started.

`preflight(cfg)` returns every problem at once (missing root, tools, kernel features a
config needs), so a run fails before the first namespace exists, with the next step.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from pathdiv.experiments.config.load import Config

# Every process a lab starts (namespace shells, tools, the lab VM's QEMU) carries
# PATHDIV_OWNER=<pid of its pathdiv>, so `pathdiv clean` finds those whose owner died.
OWNER_ENV = "PATHDIV_OWNER"
LAB_VM_ENV = "PATHDIV_LAB_VM"  # set by pathdiv.kernels.runs in the lab VM's guest
TOOLS = ("ip", "tc", "nft", "ethtool", "tcpdump", "sysctl", "ping", "mnexec")


class EnvironmentProblem(RuntimeError):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"this machine cannot run the config, nothing was started:\n{lines}")


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def available_cc() -> list[str]:
    return _read("/proc/sys/net/ipv4/tcp_available_congestion_control").split()


def available_schedulers() -> list[str]:
    return _read("/proc/sys/net/mptcp/available_schedulers").split()


def qdisc_available(kind: str, *args: str) -> bool:
    """Try the qdisc on loopback in a throw-away namespace (no trace left)."""
    cmd = ["unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root", kind, *args]
    try:
        return subprocess.run(cmd, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def netem_available() -> bool:
    """netem on this kernel: tried in a throw-away namespace as root, else looked up."""
    if os.geteuid() == 0:
        return qdisc_available("netem")
    release = kernel_release()
    return Path("/sys/module/sch_netem").exists() or any(
        Path(f"/lib/modules/{release}/kernel/net/sched").glob("sch_netem.ko*"))


def netem_problem(cfg: Config) -> str | None:
    """What stops `cfg`'s delay and jitter keys here, naming them (None: nothing)."""
    from pathdiv.experiments.fabric.conditions import netem_keys

    keys = netem_keys(cfg.data)
    if not keys or netem_available():
        return None
    return (f"{', '.join(keys)}: delay and jitter need netem, which this kernel "
            f"({kernel_release()}) lacks; set them to 0 or run on the lab kernel "
            "(hosts.kernel: lab)")


TCG_START_SCALE = 10.0


def start_scale() -> float:
    """How many times longer processes take to start here than on the machine itself.

    1 on the machine and in a KVM guest; in the lab VM under TCG (QEMU emulating the CPU),
    where each exec costs 20-30x and 16 Python servers start on 2 emulated CPUs, readiness
    waits (servers, tcpdump) are stretched by this factor instead of failing the run.
    """
    try:
        vm = json.loads(os.environ.get(LAB_VM_ENV, "") or "{}")
    except ValueError:
        vm = {}
    return TCG_START_SCALE if isinstance(vm, dict) and vm.get("accel") == "tcg" else 1.0


def kernel_release() -> str:
    return os.uname().release


def preflight(cfg: Config) -> None:
    """Raise EnvironmentProblem listing everything that stops `cfg` from running here."""
    problems: list[str] = []
    if os.geteuid() != 0:
        problems.append("pathdiv needs root for network namespaces: run it as root or via "
                        "sudo (`make experiment` does this for you)")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        problems.append(f"missing tools: {', '.join(missing)}; run `make setup`")
    in_lab_vm = bool(os.environ.get(LAB_VM_ENV))
    wrong_kernel = (cfg.host_kernel == "lab") != in_lab_vm
    if cfg.host_kernel == "lab" and not in_lab_vm:
        problems.append(f"hosts.kernel: lab, but this is kernel {kernel_release()}, not the "
                        "pathdiv lab VM; `pathdiv run` boots the VM for such runs")
    if cfg.host_kernel == "host" and in_lab_vm:
        problems.append("hosts.kernel: host, but this is the pathdiv lab VM; run it with "
                        "`pathdiv run` on the machine itself")
    if not wrong_kernel:  # the kernel the config asks for: does it have what the config needs?
        if cfg.cc not in available_cc():
            problems.append(
                f"hosts.cc: {cfg.cc!r} is not available in this kernel; available: "
                f"{', '.join(available_cc()) or 'none'}"
            )
        if cfg.transport == "mptcp" and not Path("/proc/sys/net/mptcp").exists():
            problems.append("hosts.transport: mptcp, but this kernel has no MPTCP "
                            "(/proc/sys/net/mptcp missing)")
        if cfg.scheduler != "default" and cfg.scheduler not in available_schedulers():
            problems.append(
                f"hosts.scheduler: {cfg.scheduler!r} is not in this kernel (available: "
                f"{', '.join(available_schedulers()) or 'none'}); it ships in the pathdiv lab "
                "kernel: set hosts.kernel: lab" + (" (and rebuild it: `make kernel`)"
                                                   if in_lab_vm else "")
            )
        problem = netem_problem(cfg)
        if problem:
            problems.append(problem)
    if problems:
        raise EnvironmentProblem(problems)


ALLOWED_CC = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"


def allow_cc(cc: str) -> str | None:
    """Make `cc` settable inside namespaces; return the previous list to restore, if changed.

    A namespace may only pick a congestion control the initial namespace lists in
    net.ipv4.tcp_allowed_congestion_control (e.g. Debian cloud images allow reno bbr).
    """
    allowed = _read(ALLOWED_CC).split()
    if cc in allowed:
        return None
    Path(ALLOWED_CC).write_text(" ".join([*allowed, cc]))
    return " ".join(allowed)


def restore_allowed_cc(previous: str | None) -> None:
    if previous is not None:
        Path(ALLOWED_CC).write_text(previous)
