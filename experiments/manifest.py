"""Provenance of a run and atomic result files.

What a manifest records besides the run's own identity: the git revision of this
checkout, the kernel release, the `net.mptcp.*` / `net.ipv4.tcp_*` sysctls and the
qdiscs as a host namespace sees them, and tool versions. Parsing is pure; the
functions that ask the system are small and never raise (a missing tool is recorded
as such, it does not fail the run).

Every result file is written atomically: a temporary file in the same folder, then
`os.replace`, so a reader (or a resumed run) never sees half a file.
"""

from __future__ import annotations

import csv
import functools
import io
import itertools
import json
import platform
import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pathdiv.analysis.safefiles as safefiles
from pathdiv.analysis.atomic import write_text_atomic
from pathdiv.experiments.running import RunningNetwork
from pathdiv.kernels.abilities import REPO_DIR

SYSCTL_PREFIXES = ("net.mptcp.", "net.ipv4.tcp_")
# A record read back from a results folder (a manifest, plan.json, the guest's progress
# and heartbeat) is at most this large: a guest or a folder's owner may write anything.
MAX_RECORD_BYTES = 16_000_000
TOOL_COMMANDS: dict[str, list[str]] = {
    "tcpdump": ["tcpdump", "--version"],
    "iproute2": ["ip", "-V"],
    "nft": ["nft", "--version"],
    "tc": ["tc", "-V"],
}


# ---- atomic files (one writer: pathdiv.analysis.atomic) ------------------------
def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def read_json_dict(path: Path, limit: int = MAX_RECORD_BYTES) -> dict[str, Any] | None:
    """A JSON object from `path`, or None if it is missing, unreadable or not an object
    (a file another process is still writing reads as None, not as an error). Read as
    hostile: through no symbolic link, a regular file, at most `limit` bytes, nesting
    bounded (a link, a FIFO, a larger or deeper file read as None too)."""
    try:
        value = json.loads(safefiles.read_file(path, limit))
    except (OSError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def csv_text(columns: list[str], rows: Iterable[Mapping[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="raise", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row)
    return buf.getvalue()


def write_csv_atomic(path: Path, columns: list[str], rows: Iterable[Mapping[str, Any]]) -> None:
    write_text_atomic(path, csv_text(columns, rows))


# ---- pure parsing -----------------------------------------------------------------
def parse_sysctls(text: str, prefixes: tuple[str, ...] = SYSCTL_PREFIXES) -> dict[str, str]:
    """`sysctl -a` output -> {key: value} for keys under `prefixes` (others dropped)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(" = ")
        key = key.strip()
        if sep and key.startswith(prefixes):
            out[key] = re.sub(r"\s+", " ", value.strip())
    return dict(sorted(out.items()))


def parse_netstat(text: str, section: str = "TcpExt") -> dict[str, int]:
    """/proc/net/netstat or /proc/net/snmp (a name line, then a value line, per section)
    -> {field: value} of `section` (TcpExt, MPTcpExt, Tcp, ...)."""
    lines = text.splitlines()
    for names, values in itertools.pairwise(lines):
        if names.startswith(section + ":") and values.startswith(section + ":"):
            keys, vals = names.split()[1:], values.split()[1:]
            return {k: int(v) for k, v in zip(keys, vals, strict=False)}
    return {}


def changed_counters(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """The kernel counters that changed from `before` to `after`, as differences."""
    return {k: after.get(k, 0) - before.get(k, 0) for k in after
            if after.get(k, 0) != before.get(k, 0)}


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


# ---- asking the system --------------------------------------------------------------
def _run(argv: list[str], cwd: Path | None = None, stderr: bool = True) -> tuple[int, str]:
    """Exit status and output (with `stderr`, its error stream appended: where tools
    print their versions)."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=20, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return p.returncode, (p.stdout or "") + ((p.stderr or "") if stderr else "")


def git_revision(repo: Path = REPO_DIR) -> str:
    """HEAD's commit, with '-dirty' when tracked files differ; 'unknown' outside git.
    Only git's output counts: in the lab kernel git warns on its error stream that it
    cannot read root's configuration, which once marked every lab run '-dirty'."""
    git = ["git", "-c", f"safe.directory={repo}", "-C", str(repo)]
    rc, head = _run([*git, "rev-parse", "HEAD"], stderr=False)
    if rc != 0:
        return "unknown"
    rc, status = _run([*git, "status", "--porcelain", "--untracked-files=no"], stderr=False)
    return head.strip() + ("-dirty" if rc == 0 and status.strip() else "")


@functools.lru_cache(maxsize=1)
def tool_versions() -> dict[str, str]:
    """Versions of the tools a run uses (the same for every run of one process)."""
    out = {"python": platform.python_version()}
    try:
        import mininet.net

        out["mininet"] = str(getattr(mininet.net, "VERSION", "unknown"))
    except ImportError:
        out["mininet"] = "not installed"
    for name, argv in TOOL_COMMANDS.items():
        rc, text = _run(argv)
        out[name] = first_line(text) if rc == 0 else f"unavailable ({first_line(text)})"
    return out


def namespace_state(net: RunningNetwork, host: str) -> dict[str, Any]:
    """Sysctls and qdiscs as `host`'s namespace sees them (never raises)."""
    state: dict[str, Any] = {"host": host}
    try:
        state["sysctls"] = parse_sysctls(net.cmd(host, ["sysctl", "-a"], check=False))
    except Exception as exc:
        state["sysctls"] = {"error": str(exc)}
    try:
        text = net.cmd(host, ["tc", "qdisc", "show"], check=False)
        state["qdiscs"] = [line.strip() for line in text.splitlines() if line.strip()]
    except Exception as exc:
        state["qdiscs"] = f"error: {exc}"
    return state


# ---- interface counters over the capture window -------------------------------------------
COUNTER_FIELDS = ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes")


def counter_deltas(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, dict]:
    """Per interface present in both snapshots: after - before of every counter field."""
    return {
        intf: {f: int(getattr(after[intf], f)) - int(getattr(before[intf], f))
               for f in COUNTER_FIELDS}
        for intf in sorted(before) if intf in after
    }


def counter_snapshot(net: RunningNetwork, ports: list[tuple[str, str]]) -> dict[str, Any]:
    """Counters of the given (switch, interface) ports, asked once per switch (may raise)."""
    switches: dict[str, list[str]] = {}
    for switch, intf in ports:
        switches.setdefault(switch, []).append(intf)
    out: dict[str, Any] = {}
    for switch, names in switches.items():
        counters = net.counters(switch)
        out.update({n: counters[n] for n in names if n in counters})
    return out


def memory_mb(meminfo: str | None = None) -> tuple[int, int] | None:
    """(MemTotal, MemTotal - MemAvailable) of this kernel in MB (in the lab kernel: the
    guest's memory), None when /proc/meminfo cannot be read."""
    try:
        text = Path("/proc/meminfo").read_text() if meminfo is None else meminfo
        fields = {}
        for line in text.splitlines():
            name, _, rest = line.partition(":")
            if rest.split() and rest.split()[0].isdigit():
                fields[name] = int(rest.split()[0])
        return fields["MemTotal"] // 1024, (fields["MemTotal"] - fields["MemAvailable"]) // 1024
    except (OSError, KeyError):
        return None


def memory_used_mb() -> int | None:
    """MB this kernel uses now (`memory_mb`), None when unknown."""
    info = memory_mb()
    return None if info is None else info[1]
