"""Lab kernels started by separate pathdiv processes spread over the host's CPUs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pathdiv.experiments.execute.boot import lane_cpu
from pathdiv.experiments.execute.cpuslots import claimed_cpu, slot_order


def test_slots_are_offered_round_by_round_own_cpu_first():
    assert slot_order(1, [0, 1, 2], rounds=2) == [
        (1, 0), (2, 0), (0, 0), (1, 1), (2, 1), (0, 1)]
    assert slot_order(0, [0, 1], rounds=1) == [(0, 0), (1, 0)]


def test_a_second_lab_kernel_takes_the_idle_cpu_and_a_third_shares(tmp_path: Path):
    folder = tmp_path / "cpus"
    with claimed_cpu(1, [0, 1], folder) as (first, how_first):
        assert first == 1 and "slot 0" in how_first
        with claimed_cpu(1, [0, 1], folder) as (second, _):
            assert second == 0  # the lane's CPU is held: the idle one, not a shared one
            with claimed_cpu(1, [0, 1], folder) as (third, how_third):
                assert third == 1 and "beside 1 other lab kernel" in how_third
    with claimed_cpu(1, [0, 1], folder) as (again, _):
        assert again == 1  # every claim ended with its block


def test_a_claim_held_by_another_process_is_respected(tmp_path: Path):
    folder = tmp_path / "cpus"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys\n"
         "from pathlib import Path\n"
         "from pathdiv.experiments.execute.cpuslots import claimed_cpu\n"
         f"with claimed_cpu(1, [0, 1], Path({str(folder)!r})) as (cpu, _):\n"
         "    print(cpu, flush=True)\n"
         "    sys.stdin.readline()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "1"
        with claimed_cpu(1, [0, 1], folder) as (cpu, _):
            assert cpu == 0
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=30)
    with claimed_cpu(1, [0, 1], folder) as (cpu, _):
        assert cpu == 1  # the process ended, and its claim with it


def test_an_unsafe_folder_is_not_used(tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "cpus"
    link.symlink_to(elsewhere)
    with claimed_cpu(1, [0, 1], link) as (cpu, how):
        assert cpu == 1 and "unclaimed" in how
    assert list(elsewhere.iterdir()) == []  # nothing made through the link
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with claimed_cpu(1, [0, 1], shared) as (cpu, how):
        assert cpu == 1 and "unclaimed" in how
    assert list(shared.iterdir()) == []


def test_a_lane_with_no_cpu_leaves_its_lab_kernel_unbound(tmp_path: Path):
    with claimed_cpu(None, [3], tmp_path / "cpus") as (cpu, how):
        assert cpu is None and "unbound" in how


def test_a_process_bound_to_one_cpu_claims_it_and_others_see_the_claim(tmp_path: Path):
    folder = tmp_path / "cpus"
    # `taskset -c 0 pathdiv run`: its lab kernel claims CPU 0, so a process free to use
    # both CPUs whose lane prefers CPU 0 puts its lab kernel on CPU 1
    with claimed_cpu(lane_cpu(None, [0]), [0], folder) as (cpu, how):
        assert cpu == 0 and "slot 0" in how
        with claimed_cpu(lane_cpu(0, [0, 1]), [0, 1], folder) as (other, _):
            assert other == 1
