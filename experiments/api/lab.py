"""`api.network(config)` with hosts.kernel: lab from the host: a thin RPC into one boot
of the lab kernel.

Why an RPC and not the block itself in the guest: the block is the caller's code (a
notebook cell, closures over its variables), which cannot be shipped into another
process honestly; the network, though, is a few operations with plain data in and out.
So the host boots the lab kernel (execute/boot.py, in its jail: the guest shares only a
scratch folder through hostfs) with a pseudo-terminal as the guest's console; the guest
runs `python -m pathdiv.experiments.api.lab_serve SHARE`, builds the network of the
config once, greets, and answers one request a line (experiments/api/wire.py). The
guest waits for a request by a blocking read of its console (no poll of the clock, which
in virtual time would freeze it); the host waits with select on the terminal and checks
that UML still runs.

Teardown: when the block ends normally the guest is asked to close (it tears its
network down and powers off); on an exception, Ctrl-C, or a guest that does not close in
time, UML is stopped (every guest namespace and process lives in the guest's kernel, so
they end with it), then the scratch folder goes. UML runs in a thread of this process,
as long as the block runs, with this process's owner mark (`pathdiv clean` finds it
if this process dies) and a parent-death signal.
"""

from __future__ import annotations

import contextlib
import os
import select
import stat
import threading
import time
import traceback
import tty
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pathdiv.analysis.safefiles as safefiles
import pathdiv.experiments.api.wire as wire
from pathdiv.experiments.api.lab_serve import CAPTURES_DIR, CONFIG_FILE, LOG_FILE
from pathdiv.experiments.api.live import LiveNetwork, Transfer
from pathdiv.experiments.config.load import Config
from pathdiv.experiments.execute.boot import (
    LabBoot,
    LabKernelUnavailable,
    lab_kernel_image,
    prepare,
    say,
)
from pathdiv.experiments.plan.memory import config_mb
from pathdiv.experiments.running import NetworkError
from pathdiv.kernels import uml
from pathdiv.kernels.build import LabKernelError
from pathdiv.kernels.processes import remove_scratch, scratch_folder

BOOT_TIMEOUT_S = 1200.0  # wall seconds: boot and network build (~1 min on an idle host)
REQUEST_TIMEOUT_S = 1800.0  # wall seconds for one answer (a transfer, a capture's end)
CLOSE_TIMEOUT_S = 120.0  # wall seconds the guest gets to tear down and power off
SERVE_MODULE = "pathdiv.experiments.api.lab_serve"  # the guest's side


class Guest:
    """One boot of the lab kernel serving a network: requests in, answers out."""

    def __init__(self, cfg: Config, share: Path, log: Any = say) -> None:
        self.cfg = cfg
        self.share = share
        self.log = log
        self.master, slave = os.openpty()
        tty.setraw(slave)  # the bytes as written, no echo, both ways
        self.slave = slave
        self.lines = wire.Lines()
        self.pending: list[dict[str, Any]] = []
        self.next_id = 1
        self.stopping = threading.Event()  # set: poll() stops UML
        self.failure: BaseException | None = None
        self.result: uml.UMLResult | None = None
        self.thread: threading.Thread | None = None

    def boot(self) -> dict[str, Any]:
        """Boot the guest and wait for its network; its greeting (data plane, release)."""
        try:
            image = lab_kernel_image(self.log)
        except LabKernelUnavailable as exc:
            raise NetworkError(f"hosts.kernel: lab: {exc}") from exc
        prepare([self.cfg.dataplane])  # the guest cannot write the cache
        lab = LabBoot(image, str(self.cfg.data["lab"]["clock"]),
                      config_mb(self.cfg))
        (self.share / CONFIG_FILE).write_text(self.cfg.to_yaml())

        def boot() -> None:
            try:
                self.result = lab.run(SERVE_MODULE, [str(self.share)], self.share,
                                      watch=self.poll, watch_s=0.5,
                                      channel=(self.slave, self.slave))
            except BaseException as exc:  # reported to the caller's thread
                self.failure = exc

        self.thread = threading.Thread(target=boot, name="pathdiv-lab-kernel", daemon=True)
        self.thread.start()
        return self.wait(0, BOOT_TIMEOUT_S, "booting the lab kernel and building the network")

    def poll(self) -> None:
        """In UML's thread, every half second: stop when asked to."""
        if self.stopping.is_set():
            raise LabKernelError("stopped by api.network's teardown")

    def call(self, op: str, **args: Any) -> Any:
        n, self.next_id = self.next_id, self.next_id + 1
        os.write(self.master, wire.request(n, op, **args))
        return self.wait(n, REQUEST_TIMEOUT_S, f"{op} in the lab kernel")

    def wait(self, n: int, timeout_s: float, doing: str) -> Any:
        """The answer to request `n` (0: the greeting); its error raised here."""
        deadline = time.monotonic() + timeout_s
        while True:
            for doc in self.pending:
                if doc.get("id") == n:
                    self.pending.remove(doc)
                    return self.value(doc)
            if self.thread is None or not self.thread.is_alive():
                raise NetworkError(f"the lab kernel stopped while {doing}: {self.why()}")
            if time.monotonic() > deadline:
                raise NetworkError(f"no answer from the lab kernel within {timeout_s:.0f} s "
                                   f"of wall time while {doing}; read {self.share / LOG_FILE}")
            ready, _, _ = select.select([self.master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(self.master, 65536)
                except OSError:  # the guest's side closed: UML ended
                    data = b""
                    time.sleep(0.2)
                answers = (wire.parse_answer(line) for line in self.lines.feed(data))
                self.pending += [a for a in answers if a is not None]

    def value(self, doc: dict[str, Any]) -> Any:
        if "error" not in doc:
            return doc.get("ok")
        text, kind = str(doc["error"]), doc.get("kind")
        if kind == "KeyError":
            raise KeyError(text)
        if kind == "ValueError":
            raise ValueError(text)
        raise NetworkError(f"in the lab kernel: {text}")

    def why(self) -> str:
        if isinstance(self.failure, LabKernelError):
            return str(self.failure)
        if self.failure is not None:  # a bug: where it happened
            return "".join(traceback.format_exception(self.failure))[-2000:]
        if self.result is not None:
            tail = self.result.stderr.strip()[-600:]
            return f"its command exited {self.result.returncode}" + (f": {tail}" if tail
                                                                     else "")
        log = self.share / LOG_FILE
        return f"no reason given; {log}:\n{guest_log_tail(self.share)}"

    def close(self, graceful: bool) -> None:
        """Ask the guest to close (when `graceful`), else or then stop UML; wait for it."""
        try:
            if graceful and self.thread is not None and self.thread.is_alive():
                with contextlib.suppress(NetworkError, OSError):
                    n, self.next_id = self.next_id, self.next_id + 1
                    os.write(self.master, wire.request(n, "close"))
                    self.wait(n, CLOSE_TIMEOUT_S, "closing")
                if self.thread.is_alive():
                    self.thread.join(CLOSE_TIMEOUT_S)  # its init powers the guest off
        finally:
            self.stopping.set()
            if self.thread is not None:
                # Ctrl-C here again must not leave UML behind: join until it has gone
                while self.thread.is_alive():
                    try:
                        self.thread.join()
                    except KeyboardInterrupt:
                        continue
            for fd in (self.master, self.slave):
                with contextlib.suppress(OSError):
                    os.close(fd)


class LabNetwork(LiveNetwork):
    """The network in the lab kernel's guest, driven from this process (experiments/api/
    lab.py): the same methods as on the host kernel; no node handles (`net["h1"]`), as
    the nodes live in another kernel."""

    def __init__(self, cfg: Config, guest: Guest, greeting: dict[str, Any]) -> None:
        super().__init__(cfg, cfg.fat_tree("`api.network`"), str(greeting.get("dataplane", "")))
        self.guest = guest
        self.kernel_release = str(greeting.get("release", ""))
        self.captures = 0

    def cmd(self, name: str, argv: list[str], check: bool = True) -> str:
        self.check_node(name)
        return str(self.guest.call("cmd", name=name, argv=list(argv), check=check))

    def link_bytes(self) -> dict[tuple[str, str], int]:
        return wire.link_bytes_of(self.guest.call("link_bytes"))

    def run_transfer(self, src: str, dst: str, nbytes: int, transport: str) -> Transfer:
        doc = self.guest.call("transfer", src=src, dst=dst, size=nbytes, transport=transport)
        return Transfer(**wire.transfer_fields(doc))

    @contextmanager
    def capture(self, folder: str | Path, snaplen: int = 128,
                budget_mb: float = 200) -> Iterator[Path]:
        """As on the host kernel; the guest writes into its share and the files are
        copied to `folder` when the block ends."""
        out = Path(folder)
        self.captures += 1
        name = str(self.captures)
        self.guest.call("capture_start", name=name, snaplen=snaplen, budget_mb=budget_mb)
        try:
            yield out
        finally:
            self.guest.call("capture_stop")
            copy_captures(self.guest.share, name, out, budget_mb)


LOG_TAIL_BYTES = 1500


def guest_log_tail(share: Path) -> str:
    """The end of the guest's serve.log, as guest root may have made it: read through no
    link, a regular file, its last LOG_TAIL_BYTES only, control characters escaped."""
    try:
        fd = safefiles.open_dir(share)
        try:
            data, _ = safefiles.read_tail_beneath(fd, LOG_FILE, LOG_TAIL_BYTES)
        finally:
            os.close(fd)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"(not read: {exc})"
    return safefiles.printable(data.decode("utf-8", errors="replace"))


def copy_captures(share: Path, name: str, out: Path, budget_mb: float) -> list[str]:
    """Copy the guest's captures/<name>/*.pcap to `out`: the share is written by guest
    root, so each file is opened through no link, a regular file, the whole copy within
    the capture's budget (a file past it is named and left, not copied). Returns the
    names copied."""
    limit = int(budget_mb * 1e6)
    out.mkdir(parents=True, exist_ok=True)
    top = safefiles.open_dir(share)
    try:
        src = safefiles.open_subdir(top, f"{CAPTURES_DIR}/{name}")
    finally:
        os.close(top)
    dst = safefiles.open_dir(safefiles.resolve_physical(out))
    copied: list[str] = []
    try:
        for entry, info in safefiles.iter_names(src):
            if not entry.endswith(".pcap"):
                continue
            if not stat.S_ISREG(info.st_mode):
                say(f"pathdiv: {entry} of the lab kernel's captures is not a regular "
                    "file; not copied")
                continue
            try:
                limit -= safefiles.copy_beneath(src, entry, dst, max(0, limit))
                copied.append(entry)
            except OSError as exc:
                say(f"pathdiv: {safefiles.printable(str(exc))}")
    finally:
        os.close(src)
        os.close(dst)
    return copied


@contextmanager
def lab_network(cfg: Config) -> Iterator[LabNetwork]:
    """Boot the lab kernel serving `cfg`'s network, yield it, stop everything after."""
    share = scratch_folder("api-lab")
    os.chmod(share, 0o755)
    guest = Guest(cfg, share)
    graceful = False
    try:
        greeting = guest.boot()
        yield LabNetwork(cfg, guest, greeting)
        graceful = True
    finally:
        try:
            guest.close(graceful)
        finally:
            remove_scratch(share)
