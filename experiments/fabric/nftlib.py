"""nftables in a node's namespace from this process: what `nft -j list ruleset` prints,
and what `nft -f FILE` loads, without the `nft` program.

The check between two runs on one network (`Network.snapshot`) reads every node's
ruleset, and the nftables plane loads a ruleset into each switch at its build and at
every change of switching mode. Through the `nft` program each is a process start (about
47 ms in the lab kernel; 36 nodes at k=4, 16 switches with an up group); here the library
the program is made of (libnftables, through ctypes) does it from this process: the
calling thread enters the node's namespace (setns), opens a context there (its netlink
socket belongs to that namespace), runs the command, and goes back. Output and errors
are the program's: the same library calls, the same output flag (JSON) for the listing.

`Nft.open()` is None where libnftables cannot be loaded; the callers then run `nft`.

libnftables waits for a load's answer with select() on its netlink socket, which aborts
the process when the socket's number is 1024 or more (fabric/lowfds.py): a network of
more than about 510 nodes holds that many descriptors here. So each call runs with a
reserve of low numbers released for it (`LOW_FDS`, taken before the nodes' shells
start: `Network.start`; `Nft.open()` tops it up), and where the reserve is short the
call runs the `nft` program in the namespace instead (same output, same errors).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

from pathdiv.experiments.fabric.lowfds import LowDescriptors
from pathdiv.experiments.fabric.rtnl import inside

NFT_CTX_DEFAULT = 0
NFT_CTX_OUTPUT_JSON = 1 << 4  # libnftables.h, enum nft_output_flags
LIBRARY = "libnftables.so.1"
# Low descriptor numbers for one call: a load and a listing took 3 (the two namespace
# descriptors of `inside` and the netlink socket; with 2 the load aborted, 1,100 held).
# A call runs `nft` when fewer than NEEDED_FDS were free.
RESERVE_FDS, NEEDED_FDS = 6, 4
# one reserve for the process: every context's sockets come from its numbers
LOW_FDS = LowDescriptors(RESERVE_FDS)

log = logging.getLogger("pathdiv")


class NftError(RuntimeError):
    """A command failed in a namespace (the message says where and why, with nft's own
    error text)."""


class Nft:
    def __init__(self, nft: ctypes.CDLL, program: str = "nft") -> None:
        self._nft = nft
        self.program = program  # run where the low numbers are short
        self.programs = 0  # calls that ran it
        nft.nft_ctx_new.restype = ctypes.c_void_p
        nft.nft_ctx_new.argtypes = [ctypes.c_uint32]
        nft.nft_ctx_free.argtypes = [ctypes.c_void_p]
        nft.nft_ctx_output_set_flags.argtypes = [ctypes.c_void_p, ctypes.c_uint]
        nft.nft_ctx_buffer_output.argtypes = [ctypes.c_void_p]
        nft.nft_ctx_buffer_error.argtypes = [ctypes.c_void_p]
        nft.nft_ctx_get_output_buffer.restype = ctypes.c_char_p
        nft.nft_ctx_get_output_buffer.argtypes = [ctypes.c_void_p]
        nft.nft_ctx_get_error_buffer.restype = ctypes.c_char_p
        nft.nft_ctx_get_error_buffer.argtypes = [ctypes.c_void_p]
        nft.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        nft.nft_run_cmd_from_filename.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

    @classmethod
    def open(cls) -> Nft | None:
        """The library, None where it cannot be loaded; the process's reserve of low
        descriptor numbers is topped up (LOW_FDS: taken early, it is below 1024)."""
        try:
            nft = cls(ctypes.CDLL(LIBRARY))
        except OSError:
            return None
        LOW_FDS.fill()
        return nft

    @contextlib.contextmanager
    def _inside(self, pid: int) -> Iterator[None]:
        """This thread in the network namespace of process `pid`, then back."""
        try:
            with inside(pid):
                yield
        except OSError as exc:
            raise NftError(f"the namespace of process {pid}: {exc.strerror or exc}") from exc

    def _run(self, pid: int, what: str, run: Callable[[int], int], args: list[str],
             flags: int = 0) -> str:
        """`run(context)` in the network namespace of process `pid`, with the low
        descriptor numbers released for it; its output. Where fewer than NEEDED_FDS
        were free, `nft args` there instead."""
        with LOW_FDS.released() as free:
            if free >= NEEDED_FDS:
                return self._library(pid, what, run, flags)
        return self._program(pid, what, args)

    def _library(self, pid: int, what: str, run: Callable[[int], int], flags: int) -> str:
        with self._inside(pid):
            ctx = self._nft.nft_ctx_new(NFT_CTX_DEFAULT)
            if not ctx:
                raise NftError(f"libnftables gave no context in process {pid}'s namespace")
            try:
                if flags:
                    self._nft.nft_ctx_output_set_flags(ctx, flags)
                self._nft.nft_ctx_buffer_output(ctx)
                self._nft.nft_ctx_buffer_error(ctx)
                if run(ctx) != 0:
                    err = (self._nft.nft_ctx_get_error_buffer(ctx) or b"").decode()
                    raise NftError(f"{what} in process {pid}'s namespace: "
                                   f"{err.strip() or 'failed'}")
                return (self._nft.nft_ctx_get_output_buffer(ctx) or b"").decode()
            finally:
                self._nft.nft_ctx_free(ctx)

    def _program(self, pid: int, what: str, args: list[str]) -> str:
        """`nft args` started from this thread inside the namespace of process `pid`
        (a child starts in its parent thread's namespace; it inherits no descriptor)."""
        if not self.programs:
            log.info("libnftables: no low descriptor number free in this process; "
                     "running %s instead", self.program)
        self.programs += 1
        with self._inside(pid):
            try:
                done = subprocess.run([self.program, *args], capture_output=True,
                                      text=True, stdin=subprocess.DEVNULL)
            except OSError as exc:
                raise NftError(f"{what} in process {pid}'s namespace: {exc}") from exc
        if done.returncode != 0:
            raise NftError(f"{what} in process {pid}'s namespace: "
                           f"{done.stderr.strip() or f'exit {done.returncode}'}")
        return done.stdout

    def ruleset(self, pid: int) -> str:
        """`nft -j list ruleset` in the network namespace of process `pid`."""
        return self._run(pid, "nft list ruleset",
                         lambda ctx: self._nft.nft_run_cmd_from_buffer(ctx, b"list ruleset"),
                         ["-j", "list", "ruleset"], NFT_CTX_OUTPUT_JSON)

    def load(self, pid: int, path: Path) -> None:
        """`nft -f path` in the network namespace of process `pid` (one transaction)."""
        self._run(pid, f"nft -f {path}", lambda ctx: self._nft.nft_run_cmd_from_filename(
            ctx, str(path).encode()), ["-f", str(path)])
