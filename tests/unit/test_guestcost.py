"""Wake-ups per role while a run's traffic flows (experiments/execute/guestcost.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from pathdiv.experiments.execute.guestcost import (
    Counters,
    children,
    delta,
    forks,
    parse_forks,
    parse_stat,
    parse_status,
    role_of,
    snapshot,
)

STAT = ("4242 (python3 (x) y) S 1 4242 4242 0 -1 4194560 1873 0 0 0 12 3 0 0 20 0 3 0 "
        "99 0 0")
STATUS = "Name:\tpython3\nvoluntary_ctxt_switches:\t150\nnonvoluntary_ctxt_switches:\t7\n"


def test_stat_and_status_are_parsed_even_with_odd_names():
    assert parse_stat(STAT) == ("python3 (x) y", 1873)
    assert parse_status(STATUS) == (150, 7)
    assert parse_status("Name:\tx\n") == (0, 0)


def test_roles_come_from_the_program_and_its_arguments():
    tool = ["/usr/bin/python3", "-S", "-u", "/x/experiments/traffic/transfer.py"]
    assert role_of("tcpdump", ["tcpdump", "-i", "e1-eth1"], 10, 1) == "captures"
    assert role_of("python3", [*tool, "serve", "--port", "8080"], 10, 1) == "servers"
    assert role_of("python3", [*tool, "fetch", "10.0.0.2:8080:10000"], 10, 1) == "clients"
    assert role_of("python3", ["python3", "-m", "pathdiv"], 1, 1) == "runner"
    assert role_of("bash", ["bash"], 10, 1) == "other"


def test_delta_counts_growth_new_processes_and_reaped_children():
    before = {1: ("runner", Counters(100, 5, 1000)), 2: ("captures", Counters(10, 0, 50)),
              3: ("servers", Counters(4, 0, 20))}
    after = {1: ("runner", Counters(130, 6, 1100)), 2: ("captures", Counters(70, 1, 60)),
             3: ("servers", Counters(9, 0, 20)), 4: ("captures", Counters(5, 0, 40))}
    got = delta(before, after, Counters(0, 0, 0), Counters(800, 3, 9000))
    assert got["runner"] == {"processes": 1, "wakeups": 30, "preempted": 1, "faults": 100}
    # pid 4 started after the first snapshot: counted from zero
    assert got["captures"] == {"processes": 2, "wakeups": 65, "preempted": 1, "faults": 50}
    assert got["servers"]["wakeups"] == 5
    # the clients ended (reaped) before the second snapshot: RUSAGE_CHILDREN's growth
    assert got["clients"] == {"processes": 0, "wakeups": 800, "preempted": 3, "faults": 9000}
    assert "other" not in got


def test_a_real_snapshot_sees_this_process_and_counts_a_reaped_child():
    first, kids = snapshot(), children()
    assert first[os.getpid()][0] == "runner"
    subprocess.run([sys.executable, "-c", "import time; [time.sleep(0.001) for _ in range(20)]"],
                   check=True)
    got = delta(first, snapshot(), kids, children())
    assert got["clients"]["wakeups"] >= 20  # each sleep blocked once


def test_processes_started_are_read_from_the_kernels_counter():
    assert parse_forks("cpu  1 2 3\nctxt 99\nprocesses 12345\nprocs_running 1\n") == 12345
    assert parse_forks("cpu 1\n") == 0
    before = forks()
    subprocess.run(["true"], check=True)
    assert forks() >= before + 1
