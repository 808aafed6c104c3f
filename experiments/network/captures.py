"""A network's link captures: every link's upper-end interface, both directions,
headers only, by one linkcap process for all links or one tcpdump per link
(`capture.tool`, fabric/linkcap.py); each file capped so that a run cannot fill the disk.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pathdiv.experiments.fabric.environment import virtual_clock
from pathdiv.experiments.fabric.linkcap import (
    LinkcapError,
    LinkCapture,
    build_linkcap,
    choose_tool,
    linkcap_argv,
    parse_report,
)
from pathdiv.experiments.fabric.nodeprocs import stop_reading, wait_for_line
from pathdiv.experiments.plan.budget import captured_links
from pathdiv.experiments.plan.memory import capture_ring_kb
from pathdiv.experiments.running import NetworkError, RunningNetwork

# libpcap's block timeout as tcpdump sets it is 1 s, and the kernel retires a block that
# was opened during one timer period only at the next: 2 periods plus a margin.
CAPTURE_SETTLE_S = 2.2
CAPTURE_WRITE_BYTES = 256 * 1024  # tcpdump's output buffer (`LinkCaptures.start`)
STDBUF_LIBRARY = Path("/usr/libexec/coreutils/libstdbuf.so")  # what `stdbuf` preloads

log = logging.getLogger("pathdiv")


class LinkCaptures:
    """The captures of one running network: at most one set at a time."""

    def __init__(self, net: RunningNetwork, which: str = "all") -> None:
        self.net = net
        self.which = which  # capture.links: all, or access (every host's link)
        self.tcpdumps: list[tuple[str, subprocess.Popen[str], Path]] = []
        self.linkcap: subprocess.Popen[str] | None = None  # every link's capture at once

    def start(self, outdir: Path, snaplen: int, budget_mb: float,
              caps: Mapping[str, int] | None = None, tool: str = "auto") -> dict[str, Any]:
        """Capture every link's (capture.links: access, every host's link's) upper-end
        interface (both directions), headers only:
        one linkcap process for all links, or one tcpdump per link (`tool`, as
        `capture.tool`: fabric/linkcap.py).

        `caps` gives each file its packet cap by interface (sized from the plan's need:
        pathdiv.experiments.plan.budget); without it every file gets an equal share of
        budget_mb (snaplen + 16 bytes of record header per packet). Either way a run
        cannot fill the disk.
        """
        links = captured_links(self.net.topo, self.which)  # capture.links
        outdir.mkdir(parents=True, exist_ok=True)
        per_file = int(budget_mb * 1_000_000) // max(1, len(links))
        equal = max(1000, per_file // (snaplen + 16))
        limits = {link.b.intf: (caps or {}).get(link.b.intf, equal) for link in links}
        ring_kb = capture_ring_kb(virtual_clock())  # plan/memory.py: small on the virtual clock
        figures = {"snaplen": snaplen, "budget_mb": budget_mb, "ring_kb": ring_kb,
                   "links": self.which,
                   "max_packets_per_file": max(limits.values()),
                   "max_packets": dict(sorted(limits.items()))}
        chosen, binary, why_not = capture_tool(tool)
        if chosen == "linkcap" and binary is not None:
            return {**self._start_linkcap(binary, outdir, snaplen, ring_kb, limits),
                    **figures}
        self._start_tcpdumps(outdir, snaplen, ring_kb, limits)
        why = {"linkcap_refused": why_not} if why_not else {}
        return {"files": len(self.tcpdumps), "tool": "tcpdump",
                "processes": len(self.tcpdumps), **why, **figures}

    def _start_linkcap(self, binary: Path, outdir: Path, snaplen: int, ring_kb: int,
                       limits: Mapping[str, int]) -> dict[str, Any]:
        """One linkcap process for every captured link, once it listens on all of them."""
        links = [link for link in self.net.topo.links if link.b.intf in limits]
        captures = [LinkCapture(f"/proc/{self.net.node(link.b.node).pid}/ns/net",
                                link.b.intf, limits[link.b.intf],
                                outdir / f"{link.b.intf}.pcap")
                    for link in links]
        argv = linkcap_argv(binary, snaplen, ring_kb, captures)
        # in this process's namespace: it opens each link's socket in the link's own
        self.linkcap = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
        wait_for_line(self.linkcap, self.linkcap.stderr, "listening on", 15,
                      "the link captures (linkcap)")
        return {"files": len(captures), "tool": "linkcap", "processes": 1}

    def _start_tcpdumps(self, outdir: Path, snaplen: int, ring_kb: int,
                        limits: Mapping[str, int]) -> None:
        """One tcpdump per captured link in its node, once each listens."""
        for link in self.net.topo.links:
            if link.b.intf not in limits:
                continue
            max_packets = limits[link.b.intf]
            intf = link.b.intf
            path = outdir / f"{intf}.pcap"
            # Buffered on both sides (no -U, no --immediate-mode): the kernel hands
            # packets over in blocks and tcpdump writes whole buffers, so a packet costs
            # no wake-up or write of its own (in UML each is a host context switch).
            # `stop` waits out the block timeout so that nothing is left behind.
            # tcpdump writes the file through stdio, in pieces of the file's block size
            # (4 KB): with coreutils' stdbuf library preloaded it writes its standard
            # output through a CAPTURE_WRITE_BYTES buffer instead (one write per ~2,000
            # headers, flushed when tcpdump exits: its -c cap or the stop's SIGTERM).
            # The library, not the stdbuf program: that would be one more process start.
            argv = ["tcpdump", "-n", "-i", intf, "-s", str(snaplen), "-B",
                    str(ring_kb),
                    "-Z", "root", "-c", str(max_packets)]
            node = self.net.node(link.b.node)
            if STDBUF_LIBRARY.exists():
                with path.open("wb") as out:
                    proc = node.popen([*argv, "-w", "-", "tcp or icmp"], text=True,
                                      stdout=out, stderr=subprocess.PIPE,
                                      env=capture_env(os.environ))
            else:
                proc = node.popen([*argv, "-w", str(path), "tcp or icmp"], text=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            self.tcpdumps.append((intf, proc, path))
        for intf, proc, _ in self.tcpdumps:
            wait_for_line(proc, proc.stderr, "listening on", 15, f"tcpdump on {intf}")

    def stop(self) -> dict[str, Any]:
        """Stop the captures (linkcap, or every tcpdump) and sum what the kernel dropped;
        the files that reached their packet cap. NetworkError when linkcap failed.

        The kernel hands a block of packets to the capture when the block is full or
        after its timeout (1 s, both programs); a stop signal before that loses the
        block. So the stop first waits CAPTURE_SETTLE_S after the last packet (the
        caller's wait_quiet); on the virtual clock that wait costs no wall time.
        """
        stats: dict[str, Any] = {"dropped_by_kernel": 0, "files_full": []}
        if self.tcpdumps or self.linkcap is not None:
            time.sleep(CAPTURE_SETTLE_S)
        if self.linkcap is not None:
            proc, self.linkcap = self.linkcap, None
            err = stop_reading(proc, 30)
            report = parse_report(err)
            if proc.returncode != 0 or report["errors"]:
                raise NetworkError(f"the link captures (linkcap) failed (exit "
                                   f"{proc.returncode}): "
                                   f"{' | '.join(report['errors']) or err[-500:]}")
            stats["dropped_by_kernel"] = report["dropped_by_kernel"]
            stats["files_full"] = report["files_full"]
        for intf, proc, _ in self.tcpdumps:
            if proc.poll() is not None and proc.returncode == 0:
                stats["files_full"].append(intf)  # exited by itself: hit its -c cap
            for line in stop_reading(proc, 10).splitlines():
                if "dropped by kernel" in line:
                    stats["dropped_by_kernel"] += int(line.split()[0])
        self.tcpdumps.clear()
        return stats


@functools.cache
def _built_linkcap() -> tuple[Path | None, str]:
    """linkcap's program, built on first use where it can be (not in the lab kernel's
    guest: the host built it before the boot), or None and why not; once per process."""
    try:
        return build_linkcap(), ""
    except LinkcapError as exc:
        log.info("captures: %s", exc)
        return None, str(exc)


def capture_tool(wanted: str) -> tuple[str, Path | None, str]:
    """The tool for `capture.tool: wanted` (fabric/linkcap.py), linkcap's program when
    it is built, and why it is not (NetworkError when linkcap is insisted on)."""
    if wanted == "tcpdump":
        return "tcpdump", None, ""
    built, why_not = _built_linkcap()
    try:
        return choose_tool(wanted, built, why_not), built, why_not
    except LinkcapError as exc:
        raise NetworkError(str(exc)) from exc


def capture_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of a capture: stdbuf's library preloaded, standard output
    buffered by CAPTURE_WRITE_BYTES (what `stdbuf -o N` sets before it executes)."""
    preload = " ".join(p for p in (str(STDBUF_LIBRARY), environ.get("LD_PRELOAD", "")) if p)
    return {**environ, "LD_PRELOAD": preload, "_STDBUF_O": str(CAPTURE_WRITE_BYTES)}
