"""The transfer tool's fetch against its own server on the loopback: exact sizes, the
FCT ending at the server's FIN, a stalled server reported as a timeout, over TCP and
(where this kernel offers it) MPTCP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from pathdiv.experiments.traffic import transfer


def _server(mptcp: bool) -> tuple[socket.socket, int]:
    srv = transfer.make_socket(mptcp)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    return srv, srv.getsockname()[1]


def _serve(srv: socket.socket, count: int) -> None:
    for _ in range(count):
        conn, _ = srv.accept()
        threading.Thread(target=transfer._serve_one, args=(conn,), daemon=True).start()


def _mptcp_available() -> bool:
    try:
        transfer.make_socket(True).close()
        return True
    except OSError:
        return False


@pytest.mark.parametrize("mptcp", [False, True], ids=["tcp", "mptcp"])
def test_fetch_receives_exact_sizes_in_one_go_and_in_pieces(mptcp):
    if mptcp and not _mptcp_available():
        pytest.skip("this kernel offers no MPTCP sockets (net.mptcp.enabled=0)")
    srv, port = _server(mptcp)
    sizes = [0, 1, 10_000, transfer.BODY_PIECE - 100, 3 * transfer.BODY_PIECE + 7]
    threading.Thread(target=_serve, args=(srv, len(sizes)), daemon=True).start()
    try:
        targets = [transfer.Target("127.0.0.1", port, n) for n in sizes]
        results = transfer.fetch_many(targets, mptcp, 20.0)
    finally:
        srv.close()
    assert [(r.received, r.ok, r.error) for r in results] == [(n, True, "") for n in sizes]
    assert all(r.end_s >= r.start_s for r in results)


def test_a_server_that_stops_sending_is_reported_as_a_timeout():
    srv, port = _server(False)

    def stall() -> None:
        conn, _ = srv.accept()
        conn.recv(4096)
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 5000\r\n\r\n" + b"x" * 100)
        threading.Event().wait(5)  # holds the connection open, sends nothing more
        conn.close()

    threading.Thread(target=stall, daemon=True).start()
    try:
        result = transfer.fetch_one("127.0.0.1", port, 5000, False, 0.5)
    finally:
        srv.close()
    assert not result.ok and "TimeoutError" in result.error
    assert result.end_s - result.start_s < 3


def test_a_body_arrives_in_few_receives_not_one_per_segment(monkeypatch):
    """Each return from a receive is a round trip through the host in the lab kernel."""
    calls = []

    class Counting(socket.socket):
        def recv_into(self, *args, **kwargs):  # type: ignore[override]
            calls.append(args[1] if len(args) > 1 else None)
            return super().recv_into(*args, **kwargs)

    srv, port = _server(False)
    threading.Thread(target=_serve, args=(srv, 1), daemon=True).start()
    size = 3 * transfer.BODY_PIECE + 7
    monkeypatch.setattr(transfer, "make_socket", lambda mptcp: Counting(
        socket.AF_INET, socket.SOCK_STREAM))
    try:
        result = transfer.fetch_one("127.0.0.1", port, size, False, 20.0)
    finally:
        srv.close()
    assert result.ok, result.error
    # the header (and whatever came with it), 4 pieces, the end of the stream
    assert len(calls) <= 8, len(calls)


def test_mptcp_receives_wait_in_the_kernel_only_in_the_lab_kernel():
    # on this machine's 6.18 kernel a blocked MPTCP receive left the connection at one
    # subflow (the fat tree probe); TCP waits in the kernel everywhere
    assert transfer.may_wait_in_kernel(False, "6.18.44-fc")
    assert not transfer.may_wait_in_kernel(True, "6.18.44-fc")
    assert transfer.may_wait_in_kernel(True, "6.12.117-pathdiv")


@pytest.mark.skipif(os.geteuid() != 0, reason="entering a network namespace needs root")
def test_one_server_process_serves_in_the_namespaces_it_is_given(tmp_path):
    log = tmp_path / "server-h1.cpu.jsonl"
    # this process's own namespace stands for a host's: the server enters it by pid;
    # port 0: the kernel picks a free one, which the ready line names
    proc = subprocess.Popen([sys.executable, "-S", "-u", transfer.__file__, "serve",
                             "--port", "0", f"--namespace={os.getpid()}:{log}"],
                            stdout=subprocess.PIPE, text=True)
    try:
        ready = proc.stdout.readline()
        assert ready.startswith("ready"), ready
        port = int(ready.split()[1].rpartition(":")[2])
        result = transfer.fetch_one("127.0.0.1", port, 100_000, False, 10.0)
        # the server logs the transfer once it has seen the client go, which may come
        # after the client has its last byte: wait for the line (a loaded machine once
        # read the log before it was written)
        deadline = time.monotonic() + 10
        while '"bytes": 100000' not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    assert result.ok, result.error
    assert '"bytes": 100000' in log.read_text()
