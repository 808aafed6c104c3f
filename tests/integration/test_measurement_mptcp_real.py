"""Measurement on real Linux MPTCP traffic, without the fat tree: two namespaces joined
by a veth pair, the client with three alias addresses as MPTCP subflow endpoints, two
transfers fetched over 4 subflows each, captured by tcpdump on the server's end.

The capture is analysed as the h1 ↔ h2 pair of a k=4 fat tree (both hang off edge e1),
so it goes through the same code as a run's captures. Checks: the kernel's MP_JOINs
find their connection by token; each transfer's subflows carry its whole payload;
goodput × FCT = payload; throughput ≥ goodput; the capture's bytes equal the veth's
interface counters within 2%.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pathdiv.analysis.capture.flows import group_connections, read_link_captures, split_subflows
from pathdiv.analysis.metrics.table import compute_transfer_metrics, run_topology

pytestmark = pytest.mark.root

SIZE = 2_000_000
CLIENT, SERVER, PORT = "10.0.0.2", "10.0.0.3", 8080  # h1 and h2 of a k=4 fat tree
ALIASES = ("10.0.0.34", "10.0.0.66", "10.0.0.98")  # h1's alias addresses

SERVER_PY = f"""
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("{SERVER}", {PORT})); s.listen(8)
print("ready", flush=True)
for _ in range(2):
    c, _ = s.accept()
    c.recv(100)
    c.sendall(b"x" * {SIZE})
    c.close()
"""

CLIENT_PY = f"""
import socket, sys, time, csv
w = csv.writer(open(sys.argv[1], "w", newline=""))
w.writerow("transfer_id,group_id,flow_type,transport,client,server,client_addr,server_addr,"
           "server_port,client_port,size_bytes,start_s,end_s,ok,error,subflows".split(","))
for i in range(2):
    t0 = time.time()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
    s.connect(("{SERVER}", {PORT}))
    port = s.getsockname()[1]
    time.sleep(0.3)  # let the path manager open the extra subflows
    s.sendall(b"GET")
    got = 0
    while (b := s.recv(65536)):
        got += len(b)
    s.close()
    w.writerow([i + 1, i + 1, "short", "mptcp", "h1", "h2", "{CLIENT}", "{SERVER}", {PORT},
                port, got, t0, time.time(), got == {SIZE}, "", 4])
"""


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    for tool in ("ip", "tcpdump"):
        if shutil.which(tool) is None:
            return f"{tool} not installed"
    try:
        if Path("/proc/sys/net/mptcp/enabled").read_text().strip() != "1":
            return "MPTCP disabled (sysctl net.mptcp.enabled=0)"
    except OSError:
        return "kernel without MPTCP (/proc/sys/net/mptcp missing)"
    return None


def _ns(ns: str, *argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], check=True,
                          capture_output=True, text=True, **kw)


def _dev_bytes(ns: str, intf: str) -> int:
    for line in _ns(ns, "cat", "/proc/net/dev").stdout.splitlines():
        name, _, rest = line.partition(":")
        if name.strip() == intf:
            f = rest.split()
            return int(f[0]) + int(f[8])
    raise AssertionError(f"{intf} not in /proc/net/dev of {ns}")


def _wait_until_still(path: Path, quiet_s: float = 2.5, timeout_s: float = 30) -> None:
    """Wait until the file has stopped growing for quiet_s: longer than libpcap's 1 s
    buffer timeout (tcpdump -U without --immediate-mode hands packets over a block at a
    time), or the last block is still in the kernel when SIGINT drops it (seen at 0.6 s:
    a fifth of the bytes missing, 0 'dropped by kernel')."""
    deadline = time.monotonic() + timeout_s
    size, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = path.stat().st_size if path.exists() else 0
        if now != size:
            size, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.1)
    raise AssertionError(f"{path} still growing after {timeout_s} s")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    tag = f"pdm{os.getpid() % 100000}"
    nc, nsv, vc, vs = f"{tag}c", f"{tag}s", f"{tag}c0", f"{tag}s0"
    d = tmp_path_factory.mktemp("mptcp-real")
    (d / "captures").mkdir()
    procs: list[subprocess.Popen] = []
    try:
        subprocess.run(["ip", "netns", "add", nc], check=True)
        subprocess.run(["ip", "netns", "add", nsv], check=True)
        subprocess.run(["ip", "link", "add", vc, "type", "veth", "peer", "name", vs], check=True)
        subprocess.run(["ip", "link", "set", vc, "netns", nc], check=True)
        subprocess.run(["ip", "link", "set", vs, "netns", nsv], check=True)
        for addr in (CLIENT, *ALIASES):
            _ns(nc, "ip", "addr", "add", f"{addr}/24", "dev", vc)
        _ns(nsv, "ip", "addr", "add", f"{SERVER}/24", "dev", vs)
        for ns, intf in ((nc, vc), (nsv, vs)):
            _ns(ns, "ip", "link", "set", intf, "up")
            _ns(ns, "ip", "mptcp", "limits", "set", "subflows", "8", "add_addr_accepted", "8")
            if shutil.which("ethtool"):  # wire-sized segments, as in the fabric
                _ns(ns, "ethtool", "-K", intf, "tso", "off", "gso", "off", "gro", "off")
        for addr in ALIASES:
            _ns(nc, "ip", "mptcp", "endpoint", "add", addr, "dev", vc, "subflow")
        # The study's 20 Mbit/s, so tcpdump keeps up on a busy machine.
        _ns(nsv, "tc", "qdisc", "add", "dev", vs, "root", "tbf", "rate", "20mbit",
            "burst", "16kb", "latency", "200ms")
        pcap = d / "captures" / "e1-eth0.pcap"
        dump = subprocess.Popen(
            ["ip", "netns", "exec", nsv, "tcpdump", "-n", "-i", vs, "-s", "160", "-U",
             "-B", "8192", "-Z", "root", "-w", str(pcap), "tcp"],
            stderr=subprocess.PIPE, text=True,
        )
        procs.append(dump)
        assert "listening on" in dump.stderr.readline()
        before = _dev_bytes(nsv, vs)
        server = subprocess.Popen(["ip", "netns", "exec", nsv, sys.executable, "-c", SERVER_PY],
                                  stdout=subprocess.PIPE, text=True)
        procs.append(server)
        assert server.stdout.readline().strip() == "ready"
        _ns(nc, sys.executable, "-c", CLIENT_PY, str(d / "transfers.csv"), timeout=120)
        server.wait(timeout=30)
        _wait_until_still(pcap)  # tcpdump drains its buffer; SIGINT would drop the rest
        after = _dev_bytes(nsv, vs)
        dump.send_signal(2)
        _, err = dump.communicate(timeout=10)
        dropped = [ln for ln in err.splitlines() if "dropped by kernel" in ln]
        assert dropped and dropped[0].startswith("0 "), f"tcpdump lost packets: {err}"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for ns in (nc, nsv):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    # Both access links of h1 -> h2 (e1-eth0, e1-eth1) see the same packets here.
    shutil.copy(pcap, d / "captures" / "e1-eth1.pcap")
    manifest = {
        "run_id": "real", "factors": {"switching": "ecmp-mptcp"}, "repetition": 0, "seed": 1,
        "status": "complete",
        "config": {"topology": {"kind": "fattree", "k": 4},
                   "hosts": {"transport": "mptcp", "subflows": 4},
                   "workload": {"pattern": "silent"}},
        "interface_counters_delta": after - before,
    }
    (d / "manifest.json").write_text(json.dumps(manifest))
    return d


def test_kernel_joins_find_their_connection_by_token(run_dir: Path) -> None:
    topo = run_topology(json.loads((run_dir / "manifest.json").read_text())["config"])
    _, table = split_subflows(read_link_captures(run_dir / "captures", topo))
    table = group_connections(table)
    assert table["token_resolved"].all(), table
    assert sorted(table.groupby("conn").size()) == [4, 4]


def test_transfers_measured_whole(run_dir: Path) -> None:
    with open(run_dir / "transfers.csv") as fh:
        assert all(row["ok"] == "True" for row in csv.DictReader(fh))
    tm = compute_transfer_metrics(run_dir)
    assert tm["measured"].all()
    assert (tm["subflows_opened"] == 4).all()
    delivered = tm["goodput_mbps"] * 1e6 * tm["fct_s"] / 8
    assert (delivered - SIZE).abs().max() < 1e-3
    assert ((tm["data_bytes_sent"] - tm["retrans_bytes"]) >= SIZE).all()
    assert (tm["throughput_mbps"] >= tm["goodput_mbps"]).all()
    # The app's span, from before connect() to after close(): subflow FINs may follow
    # the DATA_FIN the client's close() waited for by a fraction of a millisecond.
    assert (tm["fct_s"] <= tm["end_s"] - tm["start_s"] + 0.01).all()


def test_capture_bytes_match_interface_counters(run_dir: Path) -> None:
    topo = run_topology(json.loads((run_dir / "manifest.json").read_text())["config"])
    pk = read_link_captures(run_dir / "captures", topo)
    counted = json.loads((run_dir / "manifest.json").read_text())["interface_counters_delta"]
    link = topo.links.index(topo.link_of_intf("e1-eth0"))
    captured = int(pk.loc[pk["link"] == link, "wire_len"].sum())
    assert captured == pytest.approx(counted, rel=0.02)
