"""libnftables waits on its netlink socket with select(), which aborts the process when
the socket's number is 1024 or more (a k=16 lab run died so: its process held two
descriptors per node). A reserve of low numbers, taken before the nodes start and
released around each call, gives the library's sockets numbers below 1024 however many
descriptors the process holds; where the reserve is short, the call runs the `nft`
program instead."""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from pathdiv.experiments.fabric import nftlib
from pathdiv.experiments.fabric.lowfds import FD_SETSIZE, LowDescriptors

BUSY = 1100  # the descriptors a big network's process holds, beyond FD_SETSIZE


@contextlib.contextmanager
def busy_descriptors(upto: int = BUSY) -> Iterator[None]:
    """Every free number below `upto` taken (as the nodes' terminals take them), then
    given back."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= upto + 64:
        pytest.skip(f"the open-file hard limit ({hard}) is below {upto + 64}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, upto + 64), hard))
    taken: list[int] = []
    try:
        while True:
            fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            taken.append(fd)
            if fd >= upto:
                break
        yield
    finally:
        for fd in taken:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def socket_number() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        return sock.fileno()


def test_a_socket_opened_while_the_reserve_is_released_gets_a_number_below_1024():
    reserve = LowDescriptors(16)
    assert reserve.fill() == 16
    try:
        with busy_descriptors():
            assert socket_number() >= FD_SETSIZE  # what the library met at k=16
            with reserve.released() as free:
                assert free == 16
                assert socket_number() < FD_SETSIZE
            assert len(reserve.fds) == 16 and max(reserve.fds) < FD_SETSIZE
            with reserve.released() as free:  # and again, call after call
                assert free == 16 and socket_number() < FD_SETSIZE
    finally:
        reserve.close()


def test_a_reserve_taken_when_no_low_number_is_free_holds_none():
    with busy_descriptors():
        reserve = LowDescriptors(16)
        assert reserve.fill() == 0
        with reserve.released() as free:
            assert free == 0
        reserve.close()


class FakeLibrary(SimpleNamespace):
    """libnftables' eight functions, each call's socket number noted (what select()
    would be handed)."""

    def __init__(self) -> None:
        sockets: list[int] = []

        def run_cmd(ctx: int, cmd: bytes) -> int:
            sockets.append(socket_number())
            return 0

        super().__init__(
            sockets=sockets,
            nft_ctx_new=lambda flags: 1, nft_ctx_free=lambda ctx: None,
            nft_ctx_output_set_flags=lambda ctx, flags: None,
            nft_ctx_buffer_output=lambda ctx: 0, nft_ctx_buffer_error=lambda ctx: 0,
            nft_ctx_get_output_buffer=lambda ctx: b'{"nftables": []}',
            nft_ctx_get_error_buffer=lambda ctx: b"",
            nft_run_cmd_from_buffer=run_cmd, nft_run_cmd_from_filename=run_cmd)


@pytest.fixture
def own_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls stay in this namespace (entering a namespace needs root)."""
    monkeypatch.setattr(nftlib, "inside", lambda pid: contextlib.nullcontext())


def fake_nft_program(folder: Path) -> Path:
    """A stand-in for `nft` that prints its arguments and how many descriptors it has."""
    path = folder / "nft"
    path.write_text('#!/bin/sh\necho "args: $*"\necho "fds: $(ls /proc/self/fd | wc -l)"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_with_the_reserve_the_library_runs_with_a_low_socket_among_1100_descriptors(
        monkeypatch, own_namespace, tmp_path):
    monkeypatch.setattr(nftlib, "LOW_FDS", LowDescriptors(nftlib.RESERVE_FDS))
    nftlib.LOW_FDS.fill()  # as Network.start does before the nodes start
    lib = FakeLibrary()
    nft = nftlib.Nft(lib, program=str(fake_nft_program(tmp_path)))  # type: ignore[arg-type]
    try:
        with busy_descriptors():
            assert nft.ruleset(os.getpid()) == '{"nftables": []}'
            nft.load(os.getpid(), tmp_path / "rules.nft")
    finally:
        nftlib.LOW_FDS.close()
    assert len(lib.sockets) == 2 and max(lib.sockets) < FD_SETSIZE
    assert nft.programs == 0


def test_without_low_numbers_free_the_call_runs_the_program(monkeypatch, own_namespace,
                                                            tmp_path):
    monkeypatch.setattr(nftlib, "LOW_FDS", LowDescriptors(nftlib.RESERVE_FDS))
    lib = FakeLibrary()
    nft = nftlib.Nft(lib, program=str(fake_nft_program(tmp_path)))  # type: ignore[arg-type]
    with busy_descriptors():
        nftlib.LOW_FDS.fill()  # too late: nothing below 1024 is free
        out = nft.ruleset(os.getpid())
        nft.load(os.getpid(), tmp_path / "rules.nft")
    nftlib.LOW_FDS.close()
    assert lib.sockets == []  # the library was never called
    assert nft.programs == 2
    lines = dict(line.split(": ", 1) for line in out.splitlines())
    assert lines["args"] == "-j list ruleset"
    assert int(lines["fds"]) < 10  # a fresh process: none of this one's descriptors


def test_the_program_s_failure_is_an_nft_error_with_its_message(monkeypatch, own_namespace,
                                                                tmp_path):
    monkeypatch.setattr(nftlib, "LOW_FDS", LowDescriptors(0))  # never enough free
    bad = tmp_path / "nft"
    bad.write_text("#!/bin/sh\necho 'rules.nft:2:3-9: Error: syntax error' >&2\nexit 1\n")
    bad.chmod(0o755)
    nft = nftlib.Nft(FakeLibrary(), program=str(bad))  # type: ignore[arg-type]
    with pytest.raises(nftlib.NftError, match=r"nft -f .*rules\.nft:2:3-9: Error"):
        nft.load(os.getpid(), tmp_path / "rules.nft")
