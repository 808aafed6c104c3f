"""UML's console on the host: a bounded copy of it into console.log (the guest writes
it, so it is hostile: no endless line, no unbounded file), and the relays between a
user's terminal and the guest's console for an interactive command."""

from __future__ import annotations

import contextlib
import os
import threading

import pathdiv.analysis.safefiles as safefiles

# UML's console (its stdout): at most this much goes into console.log, no line longer
# than CONSOLE_LINE_BYTES (an endless line from the guest is cut, the rest dropped)
CONSOLE_BYTES = 16 << 20
CONSOLE_LINE_BYTES = 4096
CONSOLE_TAIL_BYTES = 1500


class ConsoleLog(threading.Thread):
    """Copies UML's console (a pipe) into console.log, bounded: lines of at most
    CONSOLE_LINE_BYTES (the rest of a longer one is dropped, said once), at most
    CONSOLE_BYTES in all (then nothing more is written, said once); the pipe is read to
    its end whatever is written, so UML never blocks on it. Keeps the last bytes written
    for an error message."""

    def __init__(self, source: int, sink: int, line_bytes: int = CONSOLE_LINE_BYTES,
                 total_bytes: int = CONSOLE_BYTES) -> None:
        super().__init__(daemon=True, name="uml-console")
        self.source, self.sink = source, sink
        self.bound = ConsoleBound(line_bytes, total_bytes)
        self.last = b""

    def run(self) -> None:
        try:
            while chunk := os.read(self.source, 65536):
                out = self.bound.feed(chunk)
                if out:
                    self.last = (self.last + out)[-CONSOLE_TAIL_BYTES:]
                    with contextlib.suppress(OSError):
                        os.write(self.sink, out)
        finally:
            os.close(self.source)

    def tail(self) -> str:
        return safefiles.printable(self.last.decode("utf-8", errors="replace"))


class ConsoleBound:
    """What of a console stream is kept (pure): lines cut at ``line_bytes``, the whole
    at ``total_bytes``."""

    def __init__(self, line_bytes: int, total_bytes: int) -> None:
        self.line_bytes, self.total_bytes = line_bytes, total_bytes
        self.in_line = 0  # bytes of the current line seen so far
        self.cut_said = False
        self.written = 0
        self.full = False

    def feed(self, chunk: bytes) -> bytes:
        """The part of ``chunk`` (the stream's next bytes) that is kept."""
        *lines, rest = chunk.split(b"\n")
        out = b"".join(self._line(piece, end=True) for piece in lines)
        if rest:
            out += self._line(rest, end=False)
        return self._cap(out)

    def _line(self, piece: bytes, end: bool) -> bytes:
        out = piece[: max(0, self.line_bytes - self.in_line)]
        self.in_line += len(piece)
        if self.in_line > self.line_bytes and not self.cut_said:
            out += f" [line cut at {self.line_bytes} bytes]".encode()
            self.cut_said = True
        if end:
            self.in_line, self.cut_said = 0, False
            out += b"\n"
        return out

    def _cap(self, out: bytes) -> bytes:
        if self.full:
            return b""
        if self.written + len(out) > self.total_bytes:
            self.full = True
            out = out[: self.total_bytes - self.written] + \
                f"\n[console.log stops at {self.total_bytes} bytes]\n".encode()
        self.written += len(out)
        return out


def relay_input(source: int, terminal: int, spoke: threading.Event) -> None:
    """Type ``source`` (a pipe or file) on ``terminal`` (a pseudo-terminal's master
    side), then Ctrl-D, the end of input a terminal's user types.

    Typing starts once the guest has written to the terminal (``spoke``): UML reads its
    console when told that input arrived, so input typed before it listens is never read.
    """
    spoke.wait()
    with contextlib.suppress(OSError):
        while chunk := os.read(source, 65536):
            os.write(terminal, chunk)
        os.write(terminal, b"\x04")


def relay_output(terminal: int, sink: int, spoke: threading.Event) -> None:
    """Copy what appears on ``terminal`` (master side) to ``sink`` until it closes."""
    with contextlib.suppress(OSError):
        while chunk := os.read(terminal, 65536):
            spoke.set()
            os.write(sink, chunk)
