"""The guest's side of `api.network(config)` with hosts.kernel: lab (experiments/api/lab.py).

    python -m pathdiv.experiments.api.lab_serve SHARE

runs inside the lab kernel with the console (a pseudo-terminal the host holds) as its
stdin and stdout. It builds the network of SHARE/config.yaml once, greets, then answers
one request a line (experiments/api/wire.py) until `close` or the end of input, and
tears the network down. Waiting for a request is a blocking read of the console, never
a poll of the clock (in virtual time that would freeze the guest). Its own log and
whatever a tool writes go to SHARE/serve.log, so the console carries answers only.
"""

from __future__ import annotations

import contextlib
import os
import sys
import termios
import traceback
import tty
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pathdiv.experiments.api.wire as wire
from pathdiv.experiments.api.live import KernelNetwork, local_network
from pathdiv.experiments.config.load import load

CONFIG_FILE = "config.yaml"
LOG_FILE = "serve.log"
WORK_DIR = "work"  # the network's node scripts and logs
CAPTURES_DIR = "captures"  # the captures the host asked for, one folder each


def channel() -> tuple[int, int]:
    """The console as this process's private (in, out), raw (no echo, no line editing);
    fds 1 and 2 go to the log from now on, fd 0 reads nothing."""
    cin, cout = os.dup(0), os.dup(1)
    with contextlib.suppress(termios.error):
        tty.setraw(cin)
    return cin, cout


def requests(cin: int) -> Iterator[str]:
    """Request lines from the console, read blocking, until its end."""
    lines = wire.Lines()
    while chunk := os.read(cin, 65536):
        for line in lines.feed(chunk):
            if line.strip():
                yield line


class Server:
    """One request at a time on the guest's network."""

    def __init__(self, live: KernelNetwork, share: Path) -> None:
        self.live = live
        self.share = share
        self.capturing: AbstractContextManager[Path] | None = None

    def handle(self, op: str, args: dict[str, Any]) -> Any:
        if op == "transfer":
            return wire.transfer_doc(self.live.transfer(args["src"], args["dst"],
                                                        args["size"], args.get("transport")))
        if op == "link_bytes":
            return wire.link_bytes_doc(self.live.link_bytes())
        if op == "cmd":
            return self.live.cmd(args["name"], list(args["argv"]), bool(args.get("check", True)))
        if op == "capture_start":
            if self.capturing is not None:
                raise ValueError("a capture is running already; end it first")
            folder = self.share / CAPTURES_DIR / str(args["name"])
            self.capturing = self.live.capture(folder, int(args["snaplen"]),
                                               float(args["budget_mb"]))
            return str(self.capturing.__enter__())
        if op == "capture_stop":
            self.stop_capture()
            return None
        raise wire.WireError(f"op {op!r} is not served")

    def stop_capture(self) -> None:
        if self.capturing is not None:
            capturing, self.capturing = self.capturing, None
            capturing.__exit__(None, None, None)


def serve(share: Path, cin: int, cout: int) -> int:
    cfg = load(share / CONFIG_FILE)
    try:
        with local_network(cfg, share / WORK_DIR) as live:
            server = Server(live, share)
            os.write(cout, wire.answer(0, {"dataplane": live.dataplane,
                                           "release": os.uname().release}))
            try:
                for line in requests(cin):
                    try:
                        n, op, args = wire.parse_request(line)
                    except wire.WireError as exc:
                        print(f"lab_serve: {exc}", file=sys.stderr, flush=True)
                        continue
                    if op == "close":
                        server.stop_capture()
                        os.write(cout, wire.answer(n, None))
                        return 0
                    try:
                        value = server.handle(op, args)
                    except Exception as exc:  # every error goes back to the host
                        traceback.print_exc()
                        os.write(cout, wire.answer(n, error=exc))
                    else:
                        os.write(cout, wire.answer(n, value))
            finally:
                server.stop_capture()
    except Exception as exc:  # the build failed: the host is told why
        traceback.print_exc()
        os.write(cout, wire.answer(0, error=exc))
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m pathdiv.experiments.api.lab_serve SHARE", file=sys.stderr)
        return 2
    share = Path(args[0])
    cin, cout = channel()
    log = os.open(share / LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    return serve(share, cin, cout)


if __name__ == "__main__":
    sys.exit(main())
