"""Waiting for a process's ready line works whatever its pipe's descriptor number: a k=8
network holds more than 1024 (select()'s limit, which once failed a k=8 lab run)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from pathdiv.experiments.fabric.nodeprocs import wait_for_line
from pathdiv.experiments.running import NetworkError

HIGH_FD = 1500


def test_a_ready_line_on_a_descriptor_above_1024_is_read():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= HIGH_FD:
        pytest.skip(f"the open-file hard limit ({hard}) is below {HIGH_FD}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, HIGH_FD + 10), hard))
    try:
        proc = subprocess.Popen([sys.executable, "-c", "print('starting'); print('ready')"],
                                stdout=subprocess.PIPE, text=True)
        os.dup2(proc.stdout.fileno(), HIGH_FD)
        stream = os.fdopen(HIGH_FD, "r")
        try:
            assert wait_for_line(proc, stream, "ready", 10, "the tool") == "ready\n"
        finally:
            stream.close()
            proc.wait()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_tool_that_never_says_ready_fails_with_what_it_said():
    proc = subprocess.Popen([sys.executable, "-c", "print('no luck')"],
                            stdout=subprocess.PIPE, text=True)
    with pytest.raises(NetworkError, match="no luck"):
        wait_for_line(proc, proc.stdout, "ready", 5, "the tool")
    proc.wait()
