"""What this machine can do, checked before anything is started.

`preflight(cfg)` returns every problem at once (missing root, tools, kernel features a
config needs), so a run fails before the first namespace exists, with the next step.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pathdiv.analysis.safefiles as safefiles
from pathdiv.experiments.config.load import Config
from pathdiv.experiments.config.planes import AUTO, PLANES, lookup
from pathdiv.experiments.fabric.conditions import netem_keys
from pathdiv.experiments.plan.runs import Run
from pathdiv.kernels.abilities import LAB_ONLY_CCS, KernelAbilities, lab_kernel_abilities
from pathdiv.kernels.processes import owner_alive, owner_mark, parse_owner

# Every process a network starts carries PATHDIV_OWNER (kernels/processes.py).
LAB_KERNEL_ENV = "PATHDIV_LAB_KERNEL"  # set in the guest by experiments/execute/boot.py
TOOLS = ("ip", "tc", "nft", "ethtool", "tcpdump", "sysctl", "ping", "mnexec")


class EnvironmentProblem(RuntimeError):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"this machine cannot run the config, nothing was started:\n{lines}")


# A named network namespace pathdiv makes carries its owner on its loopback's alias
# (`ip link set lo alias ...`): the mark lives and dies with the namespace, and
# `pathdiv clean` deletes no namespace without it.
NS_ALIAS = "pathdiv-owner "


def mark_namespace_argv(ns: str, mark: str | None = None) -> list[str]:
    """The command marking namespace `ns` as this process's (pure but for the default)."""
    return ["ip", "-n", ns, "link", "set", "lo", "alias", NS_ALIAS + (mark or owner_mark())]


def namespace_owner(ns: str) -> str | None:
    """The owner mark of named namespace `ns`, None when it carries none (not pathdiv's)."""
    out = subprocess.run(["ip", "-n", ns, "-j", "link", "show", "dev", "lo"],
                         capture_output=True, text=True)
    try:
        alias = str(json.loads(out.stdout or "[]")[0].get("ifalias", ""))
    except (ValueError, IndexError, AttributeError):
        return None
    return alias[len(NS_ALIAS):] if alias.startswith(NS_ALIAS) else None


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
    return _qdisc_here("netem")


def red_available() -> bool:
    """RED (the nftables plane's ECN marking) on this kernel, found as netem is."""
    return _qdisc_here("red", "limit", "150000", "avpkt", "1500")


def _qdisc_here(kind: str, *args: str) -> bool:
    if os.geteuid() == 0:
        return qdisc_available(kind, *args)
    release = running_kernel_release()
    return Path(f"/sys/module/sch_{kind}").exists() or any(
        Path(f"/lib/modules/{release}/kernel/net/sched").glob(f"sch_{kind}.ko*"))


def virtual_clock(cmdline: str | None = None) -> bool:
    """Whether this kernel runs on a virtual clock (User-Mode Linux booted with
    time-travel: CPU work takes no time)."""
    text = _read("/proc/cmdline") if cmdline is None else cmdline
    return any(w.startswith("time-travel") for w in text.split())


def running_kernel_release() -> str:
    """`uname -r` of the kernel this process runs on (the lab kernel's inside its guest)."""
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
    in_lab_kernel = bool(os.environ.get(LAB_KERNEL_ENV))
    wrong_kernel = (cfg.host_kernel == "lab") != in_lab_kernel
    if cfg.host_kernel == "lab" and not in_lab_kernel:
        problems.append(f"hosts.kernel: lab, but this is kernel {running_kernel_release()}, "
                        "not the pathdiv lab kernel; `pathdiv run` boots it for such runs")
    if cfg.host_kernel == "host" and in_lab_kernel:
        problems.append("hosts.kernel: host, but this is the pathdiv lab kernel; run it with "
                        "`pathdiv run` on the machine itself")
    if not wrong_kernel:  # the kernel the config asks for: does it have what the config needs?
        problems += config_problems(cfg, this_kernel())
    if problems:
        raise EnvironmentProblem(problems)


def this_kernel() -> KernelAbilities:
    """What this machine's running kernel offers (read from /proc; netem tried)."""
    return KernelAbilities(
        name=f"this machine's kernel {running_kernel_release()}",
        ccs=frozenset(available_cc()),
        schedulers=frozenset(available_schedulers()),
        mptcp=Path("/proc/sys/net/mptcp").exists(),
        netem=netem_available(),
        reorder_hold=Path("/proc/sys/net/ipv4/tcp_reorder_hold_us").exists(),
        juggler=Path("/proc/sys/net/core/juggler").exists(),
        red=red_available(),
    )


def config_problems(cfg: Config, kernel: KernelAbilities, plane: str | None = None
                    ) -> list[str]:
    """What `cfg` needs that `kernel` lacks on data plane `plane` (None: the config's
    `dataplane:`), each naming the key and the fix (pure)."""
    problems = []
    lab = "; the pathdiv lab kernel has it: set hosts.kernel: lab"
    if cfg.cc not in kernel.ccs:
        problems.append(f"hosts.cc: {cfg.cc!r} is not in {kernel.name} (available: "
                        f"{', '.join(sorted(kernel.ccs)) or 'none'})"
                        + (lab if cfg.host_kernel == "host" and cfg.cc in LAB_ONLY_CCS else ""))
    if cfg.transport == "mptcp" and not kernel.mptcp:
        problems.append(f"hosts.transport: mptcp, but {kernel.name} has no MPTCP")
    if cfg.scheduler not in kernel.schedulers | {"default"}:
        problems.append(
            f"hosts.scheduler: {cfg.scheduler!r} is not in {kernel.name} (available: "
            f"{', '.join(sorted(kernel.schedulers | {'default'}))})"
            + (lab if cfg.host_kernel == "host" else "; rebuild it with `make kernel`"))
    if cfg.reordering == "gro" and not kernel.reorder_hold:
        problems.append(f"hosts.reordering: 'gro' needs the reorder hold, which {kernel.name} "
                        "lacks" + (lab if cfg.host_kernel == "host" else
                                   "; rebuild it with `make kernel`"))
    if cfg.reordering == "juggler" and not kernel.juggler:
        problems.append(f"hosts.reordering: 'juggler' needs Juggler in GRO (net.core.juggler), "
                        f"which {kernel.name} lacks" + (lab if cfg.host_kernel == "host" else
                                                        "; rebuild it with `make kernel`"))
    keys = netem_keys(cfg.data)
    if keys and not kernel.netem:
        problems.append(f"{', '.join(keys)}: delay and jitter need netem, which {kernel.name} "
                        "lacks; set them to 0" + (" or run on the lab kernel (hosts.kernel: "
                                                  "lab)" if cfg.host_kernel == "host" else ""))
    name = plane or cfg.dataplane
    name = name if name == AUTO else lookup(name).name
    marking = [p.name for p in PLANES.values() if p.marks_ecn_in_program]
    if cfg.ecn_threshold_pkts is not None and name not in marking and not kernel.red:
        on = "dataplane: auto" if name == AUTO else f"the {name} plane"
        problems.append(
            f"switching.ecn_threshold_pkts: {cfg.ecn_threshold_pkts}: {on} marks ECN with "
            f"RED (sch_red) in the switches' egress qdiscs, which {kernel.name} lacks"
            + (f"; run on the lab kernel (hosts.kernel: lab) or dataplane: "
               f"{' or '.join(marking)}" if cfg.host_kernel == "host" else "; set it to null"))
    return problems


def plan_problems(runs: list[Run], host: KernelAbilities | None = None,
                  lab: KernelAbilities | None = None,
                  planes: Mapping[str, str | None] | None = None) -> list[str]:
    """Every run held against the kernel it will run on (and the data plane it gets here:
    run id -> plane, from `dataplane/select.py`); one line per distinct problem, naming
    the factor levels of the runs it concerns. Nothing is started."""
    kernels: dict[str, KernelAbilities] = {}
    found: dict[str, list[str]] = {}
    for run in runs:
        kind = run.config.host_kernel
        if kind not in kernels:
            kernels[kind] = (lab or lab_kernel_abilities()) if kind == "lab" else (
                host or this_kernel())
        plane = (planes or {}).get(run.run_id)
        for problem in config_problems(run.config, kernels[kind], plane):
            levels = ", ".join(f"{k}={v}" for k, v in run.factors.items()) or "every run"
            where = found.setdefault(problem, [])
            if levels not in where:
                where.append(levels)
    return [f"{problem} [runs of {'; '.join(sorted(where))}]" for problem, where in found.items()]


ALLOWED_CC = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"
# A host setting pathdiv changes is recorded here first (one file per owner: the
# setting, its earlier value, the owner mark), so `pathdiv clean` restores it when the
# owner was killed before it could.
SETTINGS_DIR = Path("/run/pathdiv/settings")


def settings_record(directory: Path | None = None) -> Path:
    return (directory or SETTINGS_DIR) / f"{owner_mark().replace(':', '-')}.json"


def allow_cc(*ccs: str, records: Path | None = None) -> str | None:
    """Make every one of `ccs` settable inside namespaces; return the previous list to
    restore (`restore_allowed_cc`), if changed. The change is recorded first, so that
    `pathdiv clean` restores it when this process is killed before it could.

    A namespace may only pick a congestion control the initial namespace lists in
    net.ipv4.tcp_allowed_congestion_control (e.g. Debian cloud images allow reno bbr).
    """
    allowed = _read(ALLOWED_CC).split()
    missing = [cc for cc in dict.fromkeys(ccs) if cc not in allowed]
    if not missing:
        return None
    record = settings_record(records)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"path": ALLOWED_CC, "previous": " ".join(allowed),
                                  "owner": owner_mark()}))
    Path(ALLOWED_CC).write_text(" ".join([*allowed, *missing]))
    return " ".join(allowed)


def restore_allowed_cc(previous: str | None, records: Path | None = None) -> None:
    if previous is not None:
        Path(ALLOWED_CC).write_text(previous)
    settings_record(records).unlink(missing_ok=True)


# The host settings pathdiv changes (and so restores): a record naming another path, or
# a value that is not a list of congestion-control names, is dropped, never written
RESTORABLE = (ALLOWED_CC,)
RESTORED_VALUE = re.compile(r"[A-Za-z0-9_]+( [A-Za-z0-9_]+){0,63}")
RECORD_BYTES = 4096


def restore_orphaned_settings(records: Path | None = None,
                              settings: tuple[str, ...] = RESTORABLE) -> list[str]:
    """Put back the host settings recorded by owners that are gone (unless a live owner
    has changed the same setting since: its own teardown restores it). Only `settings`
    (those pathdiv sets) with a value of congestion-control names are written; records
    are read without following links, bounded. Returns what was restored, one
    'setting: value' each."""
    directory = records or SETTINGS_DIR
    docs = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            doc = json.loads(safefiles.read_file(path, RECORD_BYTES))
            docs.append((path, str(doc["path"]), str(doc["previous"]), str(doc["owner"])))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    docs.sort(key=lambda d: (parse_owner(d[3]) or (0, 0))[1] or 0)  # oldest owner first
    live = {setting for _, setting, _, owner in docs if owner_alive(owner)}
    restored = []
    for path, setting, previous, owner in docs:
        if owner_alive(owner):
            continue
        if setting not in live and setting in settings and \
                RESTORED_VALUE.fullmatch(previous.strip()):
            with contextlib.suppress(OSError):
                Path(setting).write_text(previous)
                name = Path(setting).name
                restored.append(f"{name}: {previous!r}")
                live.add(setting)  # the oldest record of a setting is its value before
        path.unlink(missing_ok=True)
    return restored


MPTCP_PARAMETERS = Path("/sys/module/mptcp/parameters")


def set_mptcp_d_parameters(alpha: float, beta: float) -> None:
    """hosts.mptcp_d_alpha/beta into the lab kernel's mptcp-d (module parameters in %;
    one kernel for every host of the network, so one setting)."""
    for name, value in (("mptcp_d_alpha_pct", alpha), ("mptcp_d_beta_pct", beta)):
        (MPTCP_PARAMETERS / name).write_text(f"{round(value * 100)}\n")
