"""On the virtual clock each round's fetches sleep until the round's instant: the first
round's is given, a later one's follows the previous round's last transfer by a fixed
gap, and the i-th fetch of a round wakes i ns after it (traffic/clockgrid.py)."""

from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pathdiv.experiments.dataplane.bmv2.switch import threads_first_in_first_out
from pathdiv.experiments.fidelity.monitor import Monitor
from pathdiv.experiments.plan.designations import rounds
from pathdiv.experiments.traffic import clockgrid
from pathdiv.experiments.traffic import rounds as rounds_mod
from pathdiv.experiments.traffic.clockgrid import ROUND_GAP_NS, start_at
from pathdiv.experiments.traffic.rounds import (
    Traffic,
    at_instant,
    fetch_argv,
    plan_rows,
    run_workload,
)
from pathdiv.experiments.traffic.transfer import first_in_first_out
from pathdiv.experiments.traffic.transfer import main as transfer_main
from pathdiv.topologies.fattree import FatTree

FIRST_NS = 50_000_000_000


class Fetch:
    """A finished fetch: its transfers end `length_ns` after its --start-ns (each
    target's a little later), and it says how late it was."""

    def __init__(self, argv: list[str], length_ns: int, late_ns: int) -> None:
        self.argv = argv
        start = int(argv[argv.index("--start-ns") + 1]) if "--start-ns" in argv else 0
        targets = [a for a in argv[1:] if a.count(":") == 2]
        lines = [{"server_addr": t.split(":")[0], "server_port": 8080, "size_bytes": 10_000,
                  "received": 10_000, "ok": True, "start_s": 1.0, "end_s": 1.1,
                  "end_ns": start + length_ns + i, "late_ns": late_ns}
                 for i, t in enumerate(targets)]
        self.out = "\n".join(json.dumps(x) for x in lines)
        self.returncode = 0

    def communicate(self, timeout: float) -> tuple[str, str]:
        return self.out, ""


def _workload(tmp_path: Path, monkeypatch, start_ns: int | None, late_ns: int = 0
              ) -> list[Fetch]:
    topo = FatTree(4)
    fetches: list[Fetch] = []

    def transfer(client: str, argv: list[str]) -> Fetch:
        fetches.append(Fetch(argv, 30_000_000 * (len(fetches) + 1), late_ns))
        return fetches[-1]

    net = SimpleNamespace(topo=topo, transfer=transfer, end=lambda proc: None)
    monkeypatch.setattr(rounds_mod, "start_servers", lambda *a, **k: None)
    plan = rounds("noisy", topo.hosts, seed=3, iterations=3, requests=1)
    instants: list[dict[str, int]] = []
    traffic = Traffic("query", 10_000, "tcp", 8080, 30.0)
    if start_ns is not None:  # the virtual clock, the nftables plane
        traffic = at_instant(traffic, start_ns)
    rows = run_workload(net, plan, traffic, tmp_path, instants=instants)
    assert len(rows) == 42 and all(r.ok for r in rows)
    # what the manifest keeps: each round's instant, and how late its latest fetch was
    assert instants == ([] if start_ns is None else [
        {"round": n + 1, "start_ns": _starts(fetches)[2 * n], "late_ns": late_ns}
        for n in range(3)])
    return fetches


def _starts(fetches: list[Fetch]) -> list[int]:
    return [int(f.argv[f.argv.index("--start-ns") + 1]) for f in fetches]


def test_each_round_starts_a_fixed_gap_after_the_last_transfer_of_the_one_before(
        tmp_path, monkeypatch):
    fetches = _workload(tmp_path, monkeypatch, FIRST_NS)
    assert len(fetches) == 6  # 3 rounds of two groups' clients
    starts = _starts(fetches)
    assert starts[:2] == [FIRST_NS, FIRST_NS + 1]  # one order of waking within a round
    assert all("--fifo" in f.argv for f in fetches)  # and of running (TCP: transfer.py)
    # the second client's transfers end last in each round (60 ms, the 7th 6 ns later)
    end1 = FIRST_NS + 1 + 60_000_000 + 6
    assert starts[2:4] == [end1 + ROUND_GAP_NS, end1 + ROUND_GAP_NS + 1]
    end2 = starts[3] + 120_000_000 + 6
    assert starts[4:] == [end2 + ROUND_GAP_NS, end2 + ROUND_GAP_NS + 1]


def test_on_the_real_clock_fetches_start_at_once(tmp_path, monkeypatch):
    fetches = _workload(tmp_path, monkeypatch, None)
    assert not any("--start-ns" in f.argv or "--fifo" in f.argv for f in fetches)


def test_a_fetch_that_reached_its_instant_late_is_reported(tmp_path, monkeypatch, caplog):
    with caplog.at_level(logging.WARNING, logger="pathdiv"):
        _workload(tmp_path, monkeypatch, FIRST_NS, late_ns=2_500_000)
    assert "round 1: a fetch reached the round's instant 2.500 ms late" in caplog.text


def test_start_at_sleeps_to_a_future_instant_and_reports_a_past_one():
    soon = time.monotonic_ns() + 500_000_000  # a lead a loaded machine keeps
    assert start_at(soon) == 0 and time.monotonic_ns() >= soon
    assert start_at(time.monotonic_ns() - 5_000_000) >= 5_000_000


def test_fetch_reports_its_lateness_with_every_transfer(capsys):
    # no server: the transfer fails at once, but its line still says how late fetch was
    assert transfer_main(["fetch", "127.0.0.1:9:10", "--timeout", "2",
                          "--start-ns", "1"]) == 1
    line = json.loads(capsys.readouterr().out.splitlines()[0])
    assert line["late_ns"] > 0 and line["end_ns"] > 0 and not line["ok"]


@pytest.mark.parametrize("interval_s", [1.0, 0.25])
def test_the_monitor_samples_on_the_grid(interval_s, monkeypatch):
    slept: list[int] = []
    grid = 10_000_000_000
    clock = iter([grid + 1_280_000_123, grid + 2_000_000_000, grid + 7_999_999_999])
    monkeypatch.setattr(clockgrid.time, "monotonic_ns", lambda: next(clock))
    monkeypatch.setattr(clockgrid, "start_at", lambda t: slept.append(t) or 0)
    monitor = Monitor({}, {}, [], interval_s,
                      pace=functools.partial(clockgrid.sleep_to_next, grid))
    assert not monitor._wait() and not monitor._wait()
    monitor._stop.set()
    assert monitor._wait()  # stop() was called: no sample after this wait
    monkeypatch.undo()
    step = round(interval_s * 1e9)
    assert len(slept) == 3 and all((t - grid) % step == 0 for t in slept)
    assert 0 < slept[0] - (grid + 1_280_000_123) <= step
    assert slept[1] == grid + 2_000_000_000 + step  # on a point: the next one


def test_the_monitor_without_pace_waits_its_interval():
    monitor = Monitor({}, {}, [], 0.01)
    t0 = time.monotonic()
    assert not monitor._wait() and time.monotonic() - t0 >= 0.009


def test_only_tcp_runs_under_sched_fifo():
    tcp = Traffic("query", 10_000, "tcp", 8080, 30.0)
    mptcp = Traffic("query", 10_000, "mptcp", 8080, 30.0)
    rows = plan_rows(FatTree(4), rounds("noisy", FatTree(4).hosts, 3, 1, 1), tcp)[0]
    on_clock = at_instant(tcp, FIRST_NS)
    assert on_clock.start_ns == FIRST_NS and on_clock.fifo
    assert "--fifo" in fetch_argv(rows, on_clock, start_ns=FIRST_NS)
    # MPTCP's path manager works in kernel workers: a real-time thread would hold it off
    other = at_instant(mptcp, FIRST_NS)
    argv = fetch_argv(rows, other, start_ns=FIRST_NS)
    assert not other.fifo and "--start-ns" in argv and "--fifo" not in argv


def test_sched_fifo_is_set_for_the_calling_thread_only():
    if os.geteuid() != 0:
        pytest.skip("needs root (CAP_SYS_NICE) to set SCHED_FIFO")
    seen: list[int] = []

    def thread() -> None:
        first_in_first_out("test")
        seen.append(os.sched_getscheduler(0))
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))

    worker = threading.Thread(target=thread)
    worker.start()
    worker.join(5)
    assert seen == [os.SCHED_FIFO] and os.sched_getscheduler(0) == os.SCHED_OTHER


def test_every_thread_of_a_switch_process_goes_under_sched_fifo():
    if os.geteuid() != 0:
        pytest.skip("needs root (CAP_SYS_NICE) to set SCHED_FIFO")
    # a process with three threads, as simple_switch has many (one per port and queue)
    code = ("import threading, time\n"
            "for _ in range(2):\n"
            "    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
            "print(flush=True); time.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"\n"
        tasks = [int(t.name) for t in Path(f"/proc/{proc.pid}/task").iterdir()]
        assert len(tasks) == 3
        assert all(os.sched_getscheduler(t) == os.SCHED_OTHER for t in tasks)
        assert threads_first_in_first_out(proc.pid) == 3
        assert all(os.sched_getscheduler(t) == os.SCHED_FIFO for t in tasks)
    finally:
        proc.kill()
        proc.wait()


class SharedFetch:
    """A shared fetch: one result line per target, naming its request (transfer.Target),
    ending `length_ns` after its request's instant."""

    def __init__(self, argv: list[str], length_ns: int) -> None:
        self.argv = argv
        start = int(argv[argv.index("--start-ns") + 1])
        lines = []
        for t in (a for a in argv[1:] if "@" in a):
            spec, _, client = t.partition("@")
            request = int(client.partition("+")[2])
            lines.append({"server_addr": spec.split(":")[0], "server_port": 8080,
                          "size_bytes": 10_000, "received": 10_000, "ok": True,
                          "start_s": 1.0, "end_s": 1.1, "request": request,
                          "end_ns": start + request + length_ns, "late_ns": 0})
        self.out = "\n".join(json.dumps(x) for x in reversed(lines))  # any order
        self.returncode = 0

    def communicate(self, timeout: float) -> tuple[str, str]:
        return self.out, ""


def test_a_large_rounds_fetches_share_processes_and_keep_their_instants(
        tmp_path, monkeypatch):
    """A k=16 permutation (1,024 requests in one round) on the virtual clock: 8 shared
    fetches of 128 requests, each request at the round's instant + its index, each
    row filled from the line naming its request; a k=8 one keeps a process each."""
    topo = FatTree(16)
    shared: list[SharedFetch] = []
    own: list[Fetch] = []
    net = SimpleNamespace(
        topo=topo, end=lambda proc: None,
        node=lambda name: SimpleNamespace(pid=1000 + int(name[1:])),
        transfer_here=lambda argv, **kw: shared.append(SharedFetch(argv, 7_000)) or shared[-1],
        transfer=lambda client, argv: own.append(Fetch(argv, 7_000, 0)) or own[-1])
    monkeypatch.setattr(rounds_mod, "start_servers", lambda *a, **k: None)
    plan = rounds("permutation", topo.hosts, seed=5, iterations=1, requests=1)
    traffic = at_instant(Traffic("long", 10_000, "tcp", 8080, 30.0), FIRST_NS)
    rows = run_workload(net, plan, traffic, tmp_path)
    assert len(rows) == 1024 and all(r.ok for r in rows) and not own
    assert len(shared) == 8 and all("--fifo" in f.argv for f in shared)
    targets = [a for f in shared for a in f.argv if "@" in a]
    assert [int(t.partition("+")[2]) for t in targets] == list(range(1024))
    first = plan[0][0]
    assert targets[0] == (f"{topo.nodes[first.servers[0]].address}:8080:10000"
                          f"@{1000 + int(first.client[1:])}+0")
    small = FatTree(8)
    net.topo = small
    run_workload(net, rounds("permutation", small.hosts, 5, 1, 1), traffic, tmp_path)
    assert len(own) == 128 and len(shared) == 8


@pytest.mark.skipif(os.geteuid() != 0, reason="entering a network namespace (setns) "
                    "needs root")
def test_a_shared_fetch_makes_each_socket_in_its_clients_namespace(capsys):
    """Targets with @PID+REQUEST: the socket made in PID's namespace (here this
    process's own), each thread waking at --start-ns + REQUEST; lines name the request."""
    me = os.getpid()
    # a lead a loaded machine keeps: with 50 ms, at load 7 (a plan, a kernel build and
    # this suite at once) a thread reached its instant late and late_ns was not 0
    start = time.monotonic_ns() + 1_000_000_000
    assert transfer_main(["fetch", f"127.0.0.1:9:10@{me}+3", f"127.0.0.1:9:10@{me}+0",
                          "--timeout", "2", "--start-ns", str(start)]) == 1
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["request"] for x in lines] == [3, 0]
    assert all(x["late_ns"] == 0 and not x["ok"] and "refused" in x["error"].lower()
               for x in lines)
