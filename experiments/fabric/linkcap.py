"""The link captures' own program (`linkcap.c`): built, found, its command line and report.

One linkcap process captures every link of a network (a packet socket per link, opened
in the link's namespace), where one tcpdump per link costs a process start each (48 at
k=4; about 60 ms each in the lab kernel) and a process woken per link. It writes the same
pcap files as `tcpdump -s SNAPLEN -c COUNT -w FILE 'tcp or icmp'` (checked side by side by
tests/integration/test_linkcap.py).

It is compiled with the machine's C compiler on first use, into the cache beside the lab
kernel's (PATHDIV_CACHE/tools/linkcap-<digest of the source and flags>/); the lab
kernel's guest sees the cache read-only, so the host builds it before a boot
(`dataplane/select.py: prepare_for_lab_kernel`). pathdiv runs it as root, so, as the lab
kernel's image, it is run only from folders no one but root could have written
(`kernels/build.py: unsafe_paths`). `capture.tool` picks the program: `auto` takes
linkcap where it is built or can be, tcpdump otherwise (no C compiler, the cache not
writable or not safe); `linkcap` and `tcpdump` insist.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pathdiv.kernels.build import CACHE_DIR, unsafe_paths

SOURCE = Path(__file__).with_name("linkcap.c")
CFLAGS = ("-O2", "-Wall")
TOOLS = ("auto", "linkcap", "tcpdump")
COMMAND = "linkcap"  # the process's name (/proc/PID/comm), for the fidelity monitor


class LinkcapError(RuntimeError):
    """linkcap is wanted (`capture.tool: linkcap`) and cannot be had here, or it failed."""


class LinkCapture(NamedTuple):
    """One link's capture: the namespace file of the node holding the interface."""

    netns: str
    intf: str
    max_packets: int
    path: Path


def source_digest(source: bytes, flags: Sequence[str] = CFLAGS) -> str:
    h = hashlib.sha256(source)
    h.update(("\0" + " ".join(flags)).encode())
    return h.hexdigest()[:16]


def binary_path(cache: Path = CACHE_DIR, source: Path = SOURCE) -> Path:
    return cache / "tools" / f"linkcap-{source_digest(source.read_bytes())}" / COMMAND


def build_linkcap(cache: Path = CACHE_DIR, log: Callable[[str], None] | None = None
                  ) -> Path:
    """The built program, compiling it first when absent (LinkcapError: why not, also
    when the program or a folder above it up to the cache could have been replaced by
    someone other than root)."""
    final = binary_path(cache)
    if os.access(final, os.X_OK):
        return _safe(final, cache)
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise LinkcapError("no C compiler (cc) to build the link captures' program "
                           "(apt install gcc), so tcpdump captures each link")
    try:
        final.parent.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".linkcap-", dir=final.parent.parent))
        work.chmod(0o755)  # the lab kernel's guest runs it as an unprivileged host user
    except OSError as exc:
        raise LinkcapError(f"the cache {final.parent.parent} is not writable here "
                           f"({exc.strerror}), so linkcap cannot be built") from exc
    try:
        proc = subprocess.run([compiler, *CFLAGS, "-o", str(work / COMMAND), str(SOURCE)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise LinkcapError(f"{compiler} could not build {SOURCE.name} (exit "
                               f"{proc.returncode}): {(proc.stderr or proc.stdout)[-1500:]}")
        try:
            work.rename(final.parent)
        except OSError:  # another process built it meanwhile
            if not os.access(final, os.X_OK):
                raise
        if log:
            log(f"built the link captures' program: {final}")
        return _safe(final, cache)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _safe(binary: Path, cache: Path) -> Path:
    problems = unsafe_paths(binary, cache, os.geteuid())
    if problems:
        raise LinkcapError(f"{binary} is not safe to run as root: {'; '.join(problems)}; "
                           f"remove {binary.parent} and it is built again")
    return binary


def choose_tool(wanted: str, built: Path | None, why_not: str = "") -> str:
    """'linkcap' or 'tcpdump' for `capture.tool: wanted`, given the built program (or
    None, and why it is not there); LinkcapError when linkcap is insisted on."""
    if wanted not in TOOLS:
        raise LinkcapError(f"capture.tool {wanted!r} is not one of {', '.join(TOOLS)}")
    if wanted == "tcpdump" or (wanted == "auto" and built is None):
        return "tcpdump"
    if built is None:
        raise LinkcapError(f"capture.tool is linkcap, but linkcap is not built here: "
                           f"{why_not or 'unknown reason'}; set capture.tool: auto to "
                           "capture with tcpdump instead")
    return "linkcap"


def linkcap_argv(binary: Path, snaplen: int, buffer_kb: int,
                 links: Sequence[LinkCapture]) -> list[str]:
    argv = [str(binary), str(snaplen), str(buffer_kb)]
    for link in links:
        if link.max_packets < 1:
            raise ValueError(f"{link.intf}: a capture needs room for one packet at least")
        argv += [link.netns, link.intf, str(link.max_packets), str(link.path)]
    return argv


def parse_report(text: str) -> dict[str, Any]:
    """linkcap's closing lines -> {"dropped_by_kernel": total, "files_full": [intf, ...],
    "captured": {intf: packets}, "errors": [line, ...]} (the stop's figures, as
    `LinkCaptures.stop` gives them for tcpdump)."""
    out: dict[str, Any] = {"dropped_by_kernel": 0, "files_full": [], "captured": {},
                           "errors": []}
    for line in text.splitlines():
        if line.startswith("linkcap: error:"):
            out["errors"].append(line)
            continue
        head, _, rest = line.partition(": ")
        if head != "linkcap" or " captured, " not in rest:
            continue
        intf, _, figures = rest.partition(": ")
        words = figures.replace(",", "").split()
        # "<n> captured <d> dropped by kernel full|open"
        out["captured"][intf] = int(words[0])
        out["dropped_by_kernel"] += int(words[2])
        if words[-1] == "full":
            out["files_full"].append(intf)
    return out
