"""A user-space driver of kernel C (kernels/test/*_driver.c), kept running: one line
asked on its stdin, one line answered on its stdout; an answer starting with "error"
fails the test there."""

from __future__ import annotations

import subprocess
from pathlib import Path


class LineDriver:
    def __init__(self, binary: Path | str) -> None:
        self.proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def ask(self, line: str) -> str:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        assert not answer.startswith("error"), answer
        return answer

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=5)
