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
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable, Iterator
from pathlib import Path

from pathdiv.experiments.fabric.rtnl import inside

NFT_CTX_DEFAULT = 0
NFT_CTX_OUTPUT_JSON = 1 << 4  # libnftables.h, enum nft_output_flags
LIBRARY = "libnftables.so.1"


class NftError(RuntimeError):
    """A command failed in a namespace (the message says where and why, with nft's own
    error text)."""


class Nft:
    def __init__(self, nft: ctypes.CDLL) -> None:
        self._nft = nft
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
        try:
            return cls(ctypes.CDLL(LIBRARY))
        except OSError:
            return None

    @contextlib.contextmanager
    def _inside(self, pid: int) -> Iterator[None]:
        """This thread in the network namespace of process `pid`, then back."""
        try:
            with inside(pid):
                yield
        except OSError as exc:
            raise NftError(f"the namespace of process {pid}: {exc.strerror or exc}") from exc

    def _run(self, pid: int, what: str, run: Callable[[int], int], flags: int = 0) -> str:
        """`run(context)` in the network namespace of process `pid`; its output."""
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

    def ruleset(self, pid: int) -> str:
        """`nft -j list ruleset` in the network namespace of process `pid`."""
        return self._run(pid, "nft list ruleset",
                         lambda ctx: self._nft.nft_run_cmd_from_buffer(ctx, b"list ruleset"),
                         NFT_CTX_OUTPUT_JSON)

    def load(self, pid: int, path: Path) -> None:
        """`nft -f path` in the network namespace of process `pid` (one transaction)."""
        self._run(pid, f"nft -f {path}", lambda ctx: self._nft.nft_run_cmd_from_filename(
            ctx, str(path).encode()))
