"""Which host CPU each lab kernel of a plan runs on (execute/boot.py lane_cpu)."""

from __future__ import annotations

from pathdiv.experiments.execute.boot import host_cpus, lane_cpu


def test_lanes_take_the_cpus_in_turn_and_never_share_one_while_there_are_enough():
    assert [lane_cpu(i, [3, 1]) for i in range(2)] == [1, 3]
    assert [lane_cpu(i, [0, 1]) for i in range(4)] == [0, 1, 0, 1]


def test_a_single_lab_kernel_takes_the_last_cpu_and_a_process_on_one_cpu_takes_it():
    assert lane_cpu(None, [0, 1]) == 1
    # a process limited to one CPU (taskset) runs its lab kernels there, claimed
    assert lane_cpu(0, [0]) == 0 and lane_cpu(None, [2]) == 2 and lane_cpu(1, [2]) == 2
    assert lane_cpu(0, []) is None


def test_host_cpus_are_the_ones_this_process_may_use():
    assert host_cpus() and all(isinstance(c, int) for c in host_cpus())
