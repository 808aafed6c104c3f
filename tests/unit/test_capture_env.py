"""Captures write through a large stdio buffer (network/captures.py capture_env)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from pathdiv.experiments.network.captures import CAPTURE_WRITE_BYTES, STDBUF_LIBRARY, capture_env


def test_the_capture_environment_preloads_stdbuf_and_keeps_the_rest():
    env = capture_env({"PATH": "/usr/bin", "LD_PRELOAD": "/x/other.so"})
    assert env["PATH"] == "/usr/bin" and env["_STDBUF_O"] == str(CAPTURE_WRITE_BYTES)
    assert env["LD_PRELOAD"] == f"{STDBUF_LIBRARY} /x/other.so"
    assert capture_env({})["LD_PRELOAD"] == str(STDBUF_LIBRARY)


@pytest.mark.skipif(not STDBUF_LIBRARY.exists() or not shutil.which("strace"),
                    reason=f"needs {STDBUF_LIBRARY} (coreutils) and strace")
def test_a_program_writing_through_stdio_so_started_writes_in_one_piece(tmp_path):
    """awk, like tcpdump -w -, writes its standard output through stdio: 160 KB take
    dozens of writes with the file's own buffer and one with the capture's."""
    program = ["awk", 'BEGIN { for (i = 0; i < 20000; i++) print "pathdiv" }']

    def writes(env: dict[str, str]) -> int:
        trace = tmp_path / "trace"
        with (tmp_path / "out").open("wb") as out:
            subprocess.run(["strace", "-e", "trace=write", "-o", str(trace), *program],
                           stdout=out, env=env, check=True)
        assert (tmp_path / "out").stat().st_size == 20000 * 8
        return sum("write(1," in line for line in trace.read_text().splitlines())

    plain = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    assert writes(plain) >= 10
    assert writes(capture_env(plain)) == 1
