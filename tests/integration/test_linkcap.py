"""linkcap against tcpdump on one link (two network namespaces joined by a veth pair):

- the same frames in the same order, byte for byte but the timestamps (each socket stamps
  a frame itself: microseconds apart, more where the host takes the CPU away between the
  two), ICMP and TCP both ways, nothing else;
- a file stops at its packet cap and the report says `full`; another link of the same
  process goes on;
- a stop signal ends linkcap at once, with its report, even while no packet comes.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pathdiv.analysis.capture.pcap import read_pcap
from pathdiv.experiments.fabric.linkcap import (
    LinkCapture,
    build_linkcap,
    linkcap_argv,
    parse_report,
)

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                 reason="no C compiler (cc or gcc) to build linkcap")]

SERVE = """
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.98.0.2", 5001)); s.listen(); print("ready", flush=True)
c, _ = s.accept()
while c.recv(65536): pass
"""
SEND = """
import socket
s = socket.create_connection(("10.98.0.2", 5001)); s.sendall(b"x" * 3_000_000); s.close()
"""


@pytest.fixture
def pair(root_fabric) -> Iterator[tuple[int, int]]:
    """Two namespaces (held by a sleeping process each), lcx0 10.98.0.1 -- lcx1 10.98.0.2."""
    holders = [subprocess.Popen(["unshare", "-n", "sleep", "600"]) for _ in range(2)]
    try:
        time.sleep(0.3)
        a, b = (h.pid for h in holders)
        subprocess.run(["ip", "link", "add", "lcx0", "type", "veth", "peer", "name", "lcx1"],
                       check=True)
        for pid, intf, addr in ((a, "lcx0", "10.98.0.1/24"), (b, "lcx1", "10.98.0.2/24")):
            subprocess.run(["ip", "link", "set", intf, "netns", str(pid)], check=True)
            subprocess.run(["nsenter", "-t", str(pid), "-n", "sh", "-c",
                            f"ip addr add {addr} dev {intf} && ip link set {intf} up && "
                            "ip link set lo up"], check=True)
        yield a, b
    finally:
        for h in holders:
            h.kill()
            h.wait()


def in_ns(pid: int, argv: list[str], **kw) -> subprocess.Popen:
    return subprocess.Popen(["nsenter", "-t", str(pid), "-n", *argv], **kw)


def traffic(a: int, b: int) -> None:
    """Three pings and a 3 MB TCP transfer from a to b."""
    server = in_ns(b, [sys.executable, "-c", SERVE], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None and "ready" in server.stdout.readline()
    subprocess.run(["nsenter", "-t", str(a), "-n", "ping", "-c", "3", "-i", "0.2",
                    "10.98.0.2"], check=True, capture_output=True)
    subprocess.run(["nsenter", "-t", str(a), "-n", sys.executable, "-c", SEND], check=True)
    server.wait(timeout=30)


def stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=10)
    return err


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump is not installed")
def test_linkcap_writes_the_frames_tcpdump_writes(pair, tmp_path: Path) -> None:
    a, b = pair
    binary = build_linkcap()
    links = [LinkCapture(f"/proc/{a}/ns/net", "lcx0", 100_000, tmp_path / "linkcap.pcap"),
             LinkCapture(f"/proc/{b}/ns/net", "lcx1", 10, tmp_path / "capped.pcap")]
    lc = subprocess.Popen(linkcap_argv(binary, 96, 4096, links), stderr=subprocess.PIPE,
                          text=True)
    assert lc.stderr is not None and "listening on 2 interfaces" in lc.stderr.readline()
    td = in_ns(a, ["tcpdump", "-n", "-i", "lcx0", "-s", "96", "-B", "4096", "-c", "100000",
                   "-w", str(tmp_path / "tcpdump.pcap"), "tcp or icmp"],
               stderr=subprocess.PIPE, text=True)
    assert td.stderr is not None and "listening on" in td.stderr.readline()
    traffic(a, b)
    time.sleep(2.2)  # both hand a block over 1 s after it began at the latest
    report = parse_report(stop(lc))
    assert "packets captured" in stop(td)
    ours, theirs = read_pcap(tmp_path / "linkcap.pcap"), read_pcap(tmp_path / "tcpdump.pcap")
    assert len(ours) > 50 and len(ours) == len(theirs)  # veth segments are up to 64 KB
    assert set(ours["proto"]) == {1, 6}
    # Each socket reads the clock when the kernel hands it the frame, one tap after the
    # other: microseconds apart, unless the CPU is taken away between the two taps (a
    # busy host's steal: 0.2 ms seen in CI). Most frames agree to 20 µs and none is
    # stamped on another clock.
    gap = (ours["ts"] - theirs["ts"]).abs()
    assert gap.median() < 20e-6 and gap.max() < 0.1
    same = [c for c in ours.columns if c != "ts"]
    assert ours[same].equals(theirs[same])
    assert report["captured"] == {"lcx0": len(ours), "lcx1": 10}
    assert report["files_full"] == ["lcx1"] and report["dropped_by_kernel"] == 0
    assert len(read_pcap(tmp_path / "capped.pcap")) == 10


def test_a_stop_ends_an_idle_linkcap_at_once_with_its_report(pair, tmp_path: Path) -> None:
    a, _ = pair
    links = [LinkCapture(f"/proc/{a}/ns/net", "lcx0", 1000, tmp_path / "idle.pcap")]
    lc = subprocess.Popen(linkcap_argv(build_linkcap(), 96, 1024, links),
                          stderr=subprocess.PIPE, text=True)
    assert lc.stderr is not None and "listening on 1 interfaces" in lc.stderr.readline()
    t0 = time.monotonic()
    err = stop(lc)
    assert time.monotonic() - t0 < 2 and lc.returncode == 0
    assert parse_report(err)["captured"] == {"lcx0": 0}
    assert (tmp_path / "idle.pcap").stat().st_size == 24  # the file header alone


def test_a_link_that_is_not_there_is_refused_before_anything_is_captured(
        pair, tmp_path: Path) -> None:
    a, _ = pair
    links = [LinkCapture(f"/proc/{a}/ns/net", "lcx0", 10, tmp_path / "ok.pcap"),
             LinkCapture(f"/proc/{a}/ns/net", "nosuch0", 10, tmp_path / "no.pcap")]
    done = subprocess.run(linkcap_argv(build_linkcap(), 96, 1024, links),
                          capture_output=True, text=True, timeout=10)
    assert done.returncode == 2 and "linkcap: error: no interface nosuch0" in done.stderr
