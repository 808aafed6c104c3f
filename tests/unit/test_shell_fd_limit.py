"""Node shells start under a small open-file limit: `mnexec -c` closes every descriptor
number below it, one system call each, which in the lab kernel costs ~1 s per node at
Mininet's 16384 (measured in docs/benchmarks.md, "Network build")."""

import resource
import subprocess

import pytest

from pathdiv.experiments.fabric.nodeprocs import few_descriptors, shell_fd_limit


def test_the_limit_leaves_room_for_every_node_and_never_raises_it():
    assert shell_fd_limit(16384, highest_fd=40, nodes=36) == 1024  # k=4: 36 nodes
    assert shell_fd_limit(16384, highest_fd=900, nodes=208) == 900 + 1 + 4 * 208 + 64
    assert shell_fd_limit(1024, highest_fd=40, nodes=36) is None  # already small: kept
    assert shell_fd_limit(20000, highest_fd=19900, nodes=36) is None  # no room to lower


def test_children_started_inside_get_the_small_limit_and_this_process_gets_its_own_back():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 4096:
        pytest.skip(f"the hard open-file limit here is {hard}: too low to lower anything")
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, hard))  # as Mininet leaves it
    try:
        with few_descriptors(36):
            inside = subprocess.run(["sh", "-c", "ulimit -n"], capture_output=True,
                                    text=True, check=True).stdout.strip()
        assert int(inside) == 1024
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (4096, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
