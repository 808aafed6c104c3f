"""The thin RPC behind `api.network` on the lab kernel (experiments/api/lab.py,
lab_serve.py, wire.py), without a lab kernel: the guest's server runs in a thread on a
pseudo-terminal, as it runs on the guest's console, over a stand-in network; the host's
side asks it for a transfer, counters and a command and gets its errors back as such."""

from __future__ import annotations

import os
import threading
import tty
from contextlib import contextmanager
from pathlib import Path

import pytest

from pathdiv.experiments import api
from pathdiv.experiments.api import lab, lab_serve, wire
from pathdiv.experiments.api.live import Transfer
from pathdiv.experiments.running import NetworkError

CFG = api.load_config("class-probe", {"hosts.kernel": "lab", "hosts.transport": "tcp"})
PATH = ("h1", "e1", "a1", "c1", "a7", "e8", "h16")


class StandIn:
    """What the guest's KernelNetwork answers, without namespaces."""

    dataplane = "kernel (stand-in)"

    def transfer(self, src, dst, size, transport=None):
        if dst not in CFG.topology().hosts:
            raise KeyError(f"{dst!r} is not a host")
        return Transfer(src, dst, size, transport, 0.5, size * 8 / 0.5 / 1e6, size, [PATH],
                        {PATH: size}, {("e8", "h16"): size + 40}, {"received": size})

    def link_bytes(self):
        return {("e8", "h16"): 7, ("h16", "e8"): 3}

    def cmd(self, name, argv, check=True):
        if check and argv[0] == "false":
            raise RuntimeError("false exited 1")
        return " ".join(argv[1:]) + "\n"


@pytest.fixture
def guest(tmp_path, monkeypatch):
    """A Guest whose 'lab kernel' is lab_serve.serve in a thread on the pty's far side."""
    @contextmanager
    def stand_in(cfg, workdir):
        yield StandIn()

    monkeypatch.setattr(lab_serve, "local_network", stand_in)
    (tmp_path / lab_serve.CONFIG_FILE).write_text(CFG.to_yaml())
    g = lab.Guest(CFG, tmp_path)
    far = os.dup(g.slave)
    tty.setraw(far)
    done: list[int] = []
    g.thread = threading.Thread(target=lambda: done.append(lab_serve.serve(tmp_path, far, far)),
                                daemon=True)
    g.thread.start()
    g.greeting = g.wait(0, 10, "building")
    yield g
    g.close(graceful=True)
    os.close(far)
    assert done == [0]  # the server closed on request


def test_a_transfer_and_counters_come_back_as_on_the_host_kernel(guest):
    assert guest.greeting["dataplane"] == "kernel (stand-in)"
    net = lab.LabNetwork(CFG, guest, guest.greeting)
    t = net.transfer("h1", "h16", "2MB")
    assert (t.received, t.paths, t.path_bytes[PATH]) == (2_000_000, [PATH], 2_000_000)
    assert t.goodput_mbps == pytest.approx(32.0)
    assert net.link_bytes() == {("e8", "h16"): 7, ("h16", "e8"): 3}
    assert net.cmd("h1", ["echo", "hi"]) == "hi\n"
    assert net.draw(t).count('class="path"') == 1


def test_errors_in_the_guest_are_raised_here(guest):
    net = lab.LabNetwork(CFG, guest, guest.greeting)
    with pytest.raises(KeyError, match="h99"):  # checked here, before the guest is asked
        net.transfer("h1", "h99", 1000)
    with pytest.raises(KeyError, match="h77"):  # raised in the guest
        guest.call("transfer", src="h1", dst="h77", size=10, transport="tcp")
    with pytest.raises(NetworkError, match="false exited 1"):
        net.cmd("h1", ["false"])
    assert net.cmd("h2", ["echo", "still", "up"]) == "still up\n"


def test_a_stopped_guest_is_an_error_not_a_hang(tmp_path):
    g = lab.Guest(CFG, tmp_path)
    g.thread = threading.Thread(target=lambda: None)
    g.thread.start()
    g.thread.join()
    with pytest.raises(NetworkError, match="stopped while booting"):
        g.wait(0, 5, "booting")
    g.close(graceful=False)


def test_messages_survive_the_wire():
    n, op, args = wire.parse_request(wire.request(3, "transfer", src="h1", size=5).decode())
    assert (n, op, args) == (3, "transfer", {"src": "h1", "size": 5})
    with pytest.raises(wire.WireError, match="op 'reboot'"):
        wire.request(1, "reboot")
    lines = wire.Lines()
    noise = b"mount: noise\r\n" + wire.answer(4, {"x": 1})[:9]
    assert [wire.parse_answer(x) for x in lines.feed(noise)] == [None]
    (doc,) = [wire.parse_answer(x) for x in lines.feed(wire.answer(4, {"x": 1})[9:])]
    assert doc == {"id": 4, "ok": {"x": 1}}
    err = wire.parse_answer(wire.answer(5, error=KeyError("'h9' is not a host")).decode())
    assert err == {"id": 5, "error": "'h9' is not a host", "kind": "KeyError"}


def test_the_guest_server_refuses_to_start_without_its_share(tmp_path: Path):
    assert lab_serve.main([]) == 2


@pytest.mark.parametrize("raised,graceful", [(None, True), (KeyboardInterrupt, False),
                                             (RuntimeError, False)])
def test_the_guest_is_closed_or_stopped_and_the_share_removed(monkeypatch, raised, graceful):
    closed: list[bool] = []
    shares: list[Path] = []

    def boot(self):
        shares.append(self.share)
        return {"dataplane": "kernel", "release": "6.12-pathdiv"}

    monkeypatch.setattr(lab.Guest, "boot", boot)
    monkeypatch.setattr(lab.Guest, "close", lambda self, graceful: closed.append(graceful))
    try:
        with lab.lab_network(CFG) as net:
            assert shares[0].is_dir() and net.kernel_release == "6.12-pathdiv"
            if raised is not None:
                raise raised()
    except (KeyboardInterrupt, RuntimeError) as exc:
        assert type(exc) is raised
    assert closed == [graceful]  # asked to close only when the block ended normally
    assert not shares[0].exists()
