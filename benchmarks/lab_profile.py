"""Where a lab-kernel run's host CPU goes while its traffic flows: perf on the host.

    python benchmarks/lab_profile.py                       # noisy long, ecmp-mptcp
    python benchmarks/lab_profile.py --set capture.enabled=false
    python benchmarks/lab_profile.py --only switching=static-tcp --window 30

Runs one run of CONFIG (default configs/noisy.yaml: one flow type, one switching level,
vanilla hosts, one repetition, one iteration, `--jobs 1`) in the lab kernel, and once
its traffic flows (its captures grow, or its guest clock passes the build) samples the
whole host for `--window` seconds with `perf record -a -e cpu-clock` (a software clock:
this VM has no hardware counters), then for `--trace-window` seconds counts host system
calls, ptrace calls, context switches and page faults (`perf stat -a`) and records every
ptrace call with its target process. Needs root, perf and
the lab kernel (holds the machine for 2-4 min: run it under the emulation queue).

User-Mode Linux runs as host processes named after its image (`linux`): the UML kernel
(the guest's kernel code: its network stack, qdiscs, captures' packet copies) is the
first of them, and every guest process is another host process that the UML kernel
stops and resumes with ptrace at each system call and page fault. So the samples split
into: guest kernel (UML kernel process, its own code), host kernel for the UML kernel
(ptrace, waits, hostfs writes, its memory file), guest processes (their own code) and
host kernel for them (being stopped and resumed), and everything else on the machine.

Printed: that split, the hottest functions of the guest kernel and of the host kernel,
the host's system calls / ptrace calls / context switches per wall second, the guest
clock's pace (guest seconds per wall second from its heartbeat) and the simulated
payload megabits per wall second it implies, the run's `guest_cost` (wake-ups per role)
and the host's steal beside.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from hoststat import HostLoad

REPO = Path(__file__).resolve().parents[1]
STAT_EVENTS = ("raw_syscalls:sys_enter", "syscalls:sys_enter_ptrace", "sched:sched_switch",
               "page-faults", "task-clock")


def uml_processes(image_name: str = "linux") -> dict[int, int]:
    """host pid -> parent pid of every process running the UML image now."""
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        comm = stat.partition("(")[2].rpartition(")")[0]
        if comm == image_name:
            out[int(entry)] = int(stat.rpartition(")")[2].split()[1])
    return out


def guest_clock(folder: Path) -> float | None:
    """The guest's clock from its heartbeat file (guest seconds), None before the first."""
    for path in (folder / ".labkernel").glob("*heartbeat.json"):
        try:
            return float(json.loads(path.read_text())["guest_s"])
        except (OSError, ValueError, KeyError):
            return None
    return None


def capture_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("runs/*/captures/*.pcap")
               if p.exists())


def report_rows(data: Path, *args: str) -> list[tuple[float, list[str]]]:
    """`perf report --stdio` rows as (percent, the other columns split on whitespace)."""
    out = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children",
                          "--percent-limit", "0.3", *args], capture_output=True, text=True,
                         check=False).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(.*)", line)
        if m:
            rows.append((float(m.group(1)), m.group(2).split()))
    return rows


def threads(pids: set[int]) -> dict[int, int]:
    """thread id -> its process id, for every thread of `pids` (perf samples name the
    thread)."""
    out = {}
    for pid in pids:
        try:
            out.update({int(t): pid for t in os.listdir(f"/proc/{pid}/task")})
        except OSError:
            out[pid] = pid
    return out


def split(data: Path, kernel_pid: int, uml: dict[int, int]) -> dict[str, float]:
    """Share of all samples: guest kernel / host for it / guest processes / host for
    them / other, from `perf report --sort pid,dso`."""
    shares = dict.fromkeys(("guest kernel (UML kernel's own code)",
                            "host kernel for the UML kernel",
                            "guest processes' own code", "host kernel for guest processes",
                            "everything else"), 0.0)
    for pct, cols in report_rows(data, "--sort", "pid,dso"):
        pid_col = cols[0]
        pid = int(pid_col.split(":")[0]) if pid_col.split(":")[0].isdigit() else -1
        dso = cols[-1]
        host = dso == "[kernel.kallsyms]"
        owner = uml.get(pid)
        if owner == kernel_pid:
            key = "host kernel for the UML kernel" if host else \
                "guest kernel (UML kernel's own code)"
        elif owner is not None:
            key = "host kernel for guest processes" if host else "guest processes' own code"
        else:
            key = "everything else"
        shares[key] += pct
    return shares


def top_symbols(data: Path, tids: list[int], limit: int) -> list[str]:
    rows = report_rows(data, "--tid", ",".join(map(str, tids)), "--sort", "dso,sym")
    return [f"  {pct:5.1f}%  {' '.join(cols)}" for pct, cols in rows[:limit]]


def ptrace_targets(data: Path) -> Counter[int]:
    """Host pid -> ptrace calls made on it, from a recording of sys_enter_ptrace."""
    out = subprocess.run(["perf", "script", "-i", str(data), "-F", "trace"],
                         capture_output=True, text=True, check=False).stdout
    counts: Counter[int] = Counter()
    for m in re.finditer(r"pid: (0x[0-9a-f]+)", out):
        counts[int(m.group(1), 16)] += 1
    return counts


def perf_stat(path: Path) -> dict[str, float]:
    """perf stat -x, output -> event -> count."""
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split(",")
        if len(parts) > 2 and parts[0].replace(".", "").isdigit():
            out[parts[2]] = float(parts[0])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=REPO / "configs" / "noisy.yaml")
    ap.add_argument("--flow-type", default="long")
    ap.add_argument("--only", action="append", default=[], metavar="FACTOR=LEVEL",
                    help="default: switching=ecmp-mptcp")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--window", type=float, default=12.0, help="wall seconds sampled")
    ap.add_argument("--trace-window", type=float, default=4.0,
                    help="wall seconds of system-call counts and ptrace targets, after")
    ap.add_argument("--freq", type=int, default=250, help="samples per second per CPU")
    ap.add_argument("--after-guest-s", type=float, default=3.0,
                    help="start sampling this many guest seconds after the captures grow")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", type=Path, help="keep the results folder and perf data here")
    args = ap.parse_args()
    if shutil.which("perf") is None:
        print("perf is not installed", file=sys.stderr)
        return 2
    root = args.out or Path(tempfile.mkdtemp(prefix="pathdiv-profile-"))
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    folder = root / "run"
    only = args.only or ["switching=ecmp-mptcp"]
    argv = [sys.executable, "-m", "pathdiv.experiments.cli", "run", str(args.config),
            "--out", str(folder), "--reps", "1", "--only", f"flow_type={args.flow_type}",
            "--only", "host=vanilla", *[x for o in only for x in ("--only", o)],
            "--set", "workload.iterations=1",
            *[x for s in args.set for x in ("--set", s)],
            "--no-analyze", "--quiet", "--jobs", "1"]
    print("$", " ".join(argv), flush=True)
    with HostLoad() as load:
        proc = subprocess.Popen(argv, cwd=REPO)
        started = time.monotonic()
        # wait for traffic: captures growing (or, without captures, the guest clock
        # past the build), then a few guest seconds more
        mark = None
        while proc.poll() is None:
            time.sleep(0.5)
            clock = guest_clock(folder)
            if mark is None and (capture_bytes(folder) > 1_000_000 or (
                    "capture.enabled=false" in args.set and clock is not None
                    and (folder / "runs").exists() and any(
                        (folder / "runs").glob("*/network/logs/server-*.log")))):
                mark = clock
            if mark is not None and clock is not None and clock - mark >= args.after_guest_s:
                break
        if proc.poll() is not None:
            print("the run ended before its traffic could be sampled", file=sys.stderr)
            return 1
        procs = uml_processes()
        kernel_pid = min((p for p, parent in procs.items() if parent not in procs),
                         default=-1)
        data, stat = root / "perf.data", root / "perf-stat.csv"
        traced = root / "ptrace.data"
        g0, w0 = guest_clock(folder), time.monotonic()
        window_load = HostLoad().__enter__()
        # first the CPU samples alone (tracepoints would add their own cost), then the
        # counts and every ptrace call with its target for a shorter window
        subprocess.run(["perf", "record", "-a", "-q", "-e", "cpu-clock", "-F",
                        str(args.freq), "-g", "-o", str(data), "--", "sleep",
                        str(args.window)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        window_load.__exit__()
        g1, w1 = guest_clock(folder), time.monotonic()
        procs.update(uml_processes())
        tids = threads(set(procs))
        tw0 = time.monotonic()
        st = subprocess.Popen(["perf", "stat", "-a", "-x", ",", "-o", str(stat),
                               *[x for e in STAT_EVENTS for x in ("-e", e)], "--", "sleep",
                               str(args.trace_window)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        subprocess.run(["perf", "record", "-a", "-q", "-e", "syscalls:sys_enter_ptrace",
                        "-o", str(traced), "--", "sleep", str(args.trace_window)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        st.wait()
        tw1 = time.monotonic()
        tids.update({t: p for t, p in threads(set(uml_processes())).items() if t not in tids})
        rc = proc.wait()
    print(f"run: exit {rc}, {time.monotonic() - started:.1f} s wall; {load}")
    print(f"window: {w1 - w0:.1f} s wall from {w0 - started:.1f} s; {window_load}")
    if g0 is not None and g1 is not None and g1 > g0:
        pace = (g1 - g0) / (w1 - w0)
        print(f"guest clock: {g1 - g0:.1f} guest s in {w1 - w0:.1f} wall s = {pace:.3f} "
              "guest s per wall s")
    else:
        pace = None
        print("guest clock: no heartbeat moved in the window")
    run_dirs = sorted((folder / "runs").iterdir()) if (folder / "runs").exists() else []
    for run_dir in run_dirs:
        manifest = json.loads((run_dir / "manifest.json").read_text())
        payload = 0
        if (run_dir / "transfers.csv").exists():
            with (run_dir / "transfers.csv").open() as f:
                payload = sum(int(r["size_bytes"]) for r in csv.DictReader(f)
                              if r["ok"] == "True")
        traffic = float(manifest.get("timings", {}).get("traffic_s", 0) or 0)
        sim_mbps = payload * 8 / 1e6 / traffic if traffic else 0.0
        print(f"{run_dir.name}: {manifest.get('status')}, payload {payload / 1e6:.1f} MB in "
              f"{traffic:.1f} guest s = {sim_mbps:.1f} Mbit/s simulated"
              + (f"; in the window {sim_mbps * pace:.1f} simulated Mbit/s per wall s"
                 if pace else ""))
        for role, c in (manifest.get("guest_cost") or {}).items():
            print(f"  guest_cost {role:<9} processes {c['processes']:>3}  wake-ups "
                  f"{c['wakeups']:>9}  preempted {c['preempted']:>7}  faults {c['faults']:>8}")
    shares = split(data, kernel_pid, tids)
    print(f"CPU samples by where (UML kernel pid {kernel_pid}, {len(procs)} UML processes):")
    for key, pct in shares.items():
        print(f"  {pct:5.1f}%  {key}")
    counts = perf_stat(stat)
    seconds = tw1 - tw0
    print("host events per wall second: " + ", ".join(
        f"{name} {value / seconds:,.0f}" for name, value in counts.items()))
    print(f"hottest in the UML kernel process (pid {kernel_pid}), by dso and symbol:")
    kernel_tids = [t for t, p in tids.items() if p == kernel_pid]
    print("\n".join(top_symbols(data, kernel_tids, args.top)))
    others = sorted(t for t, p in tids.items() if p != kernel_pid)
    if others:
        rows = report_rows(data, "--tid", ",".join(map(str, others)), "--sort", "dso,sym")
        print("hottest in the guest processes (their host processes), by dso and symbol:")
        print("\n".join(f"  {pct:5.1f}%  {' '.join(c)}" for pct, c in rows[:args.top]))
    targets = ptrace_targets(traced)
    order = sorted(procs)  # host pids in creation order: the guest's processes' order
    print(f"ptrace calls by the UML kernel per guest process in {tw1 - tw0:.1f} s "
          f"({sum(targets.values()):,} in all, {len(targets)} targets); rank = its place "
          "among the UML host processes by creation (captures, then servers, then clients):")
    for pid, n in targets.most_common(args.top):
        rank = order.index(pid) if pid in order else -1
        print(f"  pid {pid:>7} rank {rank:>4}  {n / (tw1 - tw0):9,.0f} per wall s")
    print(f"perf data and results in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
