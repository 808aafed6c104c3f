"""MPTCP scheduler checks between two network namespaces (as root, in the lab kernel or on a host).

Sets up namespaces ``pdlab-s`` (server, the data sender) and ``pdlab-c`` (client) joined by
one veth pair; the client has address aliases, each an MPTCP ``subflow`` endpoint, so one
connection has N subflows over one interface (the ``ndiffports`` behaviour of the study).
The scheduler under test is the server's ``net.mptcp.scheduler``.

Modes (each prints one JSON object on stdout):
  check    per scheduler: one transfer captured with tcpdump; reports completion, the
           fraction of consecutive data sequence numbers sent on different subflows, the
           fraction of consecutive packets on the wire on different subflows (the order
           they left the sender: with --rate-mbit, through a queue of its own), the
           fraction of DSNs on the same subflow as the DSN N before (N subflows: on
           equal paths, 1.0 when every packet kept its pre-allocated subflow) and
           the share of data segments that repeat a DSN (copies; --cc sets the
           congestion control of both namespaces, also for goodput and fct)
  goodput  one N-subflow transfer, no shaping: goodput in Mbit/s
  fct      F concurrent N-subflow transfers through one shallow-buffered bottleneck:
           mean flow completion time per scheduler
  share    per congestion control (net.ipv4.tcp_congestion_control of both namespaces):
           one N-subflow MPTCP connection and one TCP connection download at once
           through one bottleneck; bytes each got in a window after a warm-up, and the
           ratio MPTCP / TCP (coupled congestion control: lia ~1, uncoupled cubic ~N)
  paths    dual-homed hosts: one veth pair per path (--paths RATE:DELAY:LOSS ...), one
           subflow per interface; per scheduler one captured transfer: completion, the
           subflows seen, and per path its segments and the share that another subflow
           also carried (a redundant subflow's copies)
  orphan   one reply that pathdiv's transfer server finished writing into a large send
           buffer long before a slow path delivers it: completed, or reset (MP_FASTCLOSE,
           RST in the capture) when Linux closes the orphaned MPTCP socket
  spray    per reordering level (hosts.reordering's sysctls; gro with --hold-us): one TCP
           transfer sprayed round robin, packet by packet, over P parallel paths of
           different delays (nftables numgen marks, a prio qdisc with one netem per
           path); the sender's retransmitted share, DSACKs and goodput

Only the standard library and dpkt (capture parsing) are needed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

NS_SERVER, NS_CLIENT, NS_ROUTER = "pdlab-s", "pdlab-c", "pdlab-r"
DEV_SERVER, DEV_CLIENT = "pdlab-s0", "pdlab-c0"
SERVER_ADDR = "10.77.0.1"
PORT = 5201
SOL_MPTCP, MPTCP_INFO = 284, 1
MPTCP_OPTION, DSS_SUBTYPE = 30, 2


def client_addr(i: int) -> str:
    return f"10.77.0.{10 + i}"


def path_addr(i: int, side: str) -> str:
    """Address of the client ("c") or the server's next hop ("s") on path i (paths mode)."""
    return f"10.78.{i}.{10 if side == 'c' else 1}"


def parse_path(text: str) -> tuple[float, float, float]:
    """'RATE_MBIT:DELAY_MS:LOSS_PCT' (rate 0: unshaped) -> the three numbers."""
    parts = text.split(":")
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"{text!r}: expected RATE_MBIT:DELAY_MS:LOSS_PCT")
    try:
        rate, delay, loss = (float(x) for x in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not three numbers") from None
    if rate < 0 or delay < 0 or not 0 <= loss < 100:
        raise argparse.ArgumentTypeError(f"{text!r}: rate and delay >= 0, loss in [0, 100)")
    return rate, delay, loss


# ------------------------------------------------------------------ capture analysis (pure)


def dss_mapping(opts: bytes) -> tuple[int, int, int] | None:
    """(data_seq, subflow_seq, data_len) of the DSS mapping in raw TCP options, if any."""
    i = 0
    while i < len(opts):
        kind = opts[i]
        if kind == 0:
            return None
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(opts) or opts[i + 1] < 2:
            return None
        length = opts[i + 1]
        body = opts[i : i + length]
        if kind == MPTCP_OPTION and len(body) >= 4 and body[2] >> 4 == DSS_SUBTYPE:
            flags, off = body[3], 4
            if flags & 0x01:  # data ACK present: 8 bytes if 'a' else 4
                off += 8 if flags & 0x02 else 4
            if flags & 0x04:  # mapping present: DSN 8 bytes if 'm' else 4
                dsn_len = 8 if flags & 0x08 else 4
                if len(body) < off + dsn_len + 6:
                    return None
                dsn = int.from_bytes(body[off : off + dsn_len], "big")
                ssn, dlen = struct.unpack("!IH", body[off + dsn_len : off + dsn_len + 6])
                return dsn, ssn, dlen
            return None
        i += length
    return None


def data_packets(pcap: Path, server_port: int = PORT) -> list[tuple[int, tuple, int]]:
    """(data sequence number, subflow, payload bytes) of every server-to-client data segment.

    The DSN of a segment is its DSS mapping's DSN plus the segment's offset in the mapping
    (segments of one GSO packet share one mapping); a segment without a mapping of its own
    (the later segments of an skb TCP split to fit its window) takes the last mapping of
    its subflow that covers it. The subflow ISN comes from its SYN-ACK.
    """
    import dpkt

    isn: dict[tuple, int] = {}
    last: dict[tuple, tuple[int, int, int]] = {}
    out = []
    with pcap.open("rb") as f:
        for _, buf in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(buf).data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            if tcp.sport != server_port:
                continue
            flow = (ip.src, tcp.sport, ip.dst, tcp.dport)
            if tcp.flags & dpkt.tcp.TH_SYN:
                isn[flow] = tcp.seq
                continue
            payload = ip.len - ip.hl * 4 - tcp.off * 4
            mapping = dss_mapping(tcp.opts)
            if payload <= 0 or flow not in isn:
                continue
            if mapping is None:
                mapping = last.get(flow)
                if mapping is None or (tcp.seq - isn[flow] - mapping[1]) % 2**32 >= mapping[2]:
                    continue
            last[flow] = mapping
            dsn, ssn, _ = mapping
            offset = (tcp.seq - isn[flow] - ssn) % 2**32
            out.append(((dsn + offset) % 2**64, flow, payload))
    return out


def interleave_fraction(packets: Sequence[tuple[int, tuple, int]]) -> tuple[float, int]:
    """Share of consecutive data sequence numbers carried by different subflows.

    Packets are ordered by DSN (retransmitted copies dropped). Counting starts at the first
    packet of the last subflow to appear, so the time before all subflows joined is left out.
    Returns (fraction, number of packet pairs counted).
    """
    first: dict[int, tuple] = {}
    for dsn, flow, _ in packets:
        first.setdefault(dsn, flow)
    ordered = sorted(first.items())
    if not ordered:
        return 0.0, 0
    seen: dict[tuple, int] = {}
    for k, (_, flow) in enumerate(ordered):
        seen.setdefault(flow, k)
    start = max(seen.values())
    pairs = list(zip(ordered[start:], ordered[start + 1 :], strict=False))
    if not pairs:
        return 0.0, 0
    switches = sum(1 for (_, a), (_, b) in pairs if a != b)
    return switches / len(pairs), len(pairs)


def turn_fraction(packets: Sequence[tuple[int, tuple, int]]) -> tuple[float, int]:
    """Share of data sequence numbers carried by the same subflow as the DSN p before them,
    in DSN order, p being the number of subflows that carry the 2N DSNs around it (N: the
    subflows seen): 1.0 when the subflows take turns in one fixed order, as the rb pattern
    pre-allocates the packets with equal shares, also after a subflow left. A stand-in
    (rb's swap of two packets' subflows) counts up to four misses: the two packets and the
    two p DSNs later, compared with them. One subflow's run of DSNs also repeats itself:
    read the fraction beside interleave_fraction.

    Retransmitted copies are dropped and counting starts at the first packet of the last
    subflow to appear, as in interleave_fraction. Returns (fraction, packets counted)."""
    first: dict[int, tuple] = {}
    for dsn, flow, _ in packets:
        first.setdefault(dsn, flow)
    flows = [flow for _, flow in sorted(first.items())]
    seen: dict[tuple, int] = {}
    for k, flow in enumerate(flows):
        seen.setdefault(flow, k)
    if not seen:
        return 0.0, 0
    flows, n = flows[max(seen.values()):], len(seen)
    counted = len(flows) - n
    if counted <= 0:
        return 0.0, 0
    hits = 0
    for k in range(n, len(flows)):
        p = len(set(flows[k - n:k + n]))
        hits += flows[k] == flows[k - p]
    return hits / counted, counted


def wire_interleave_fraction(packets: Sequence[tuple[int, tuple, int]]) -> tuple[float, int]:
    """Share of consecutive data packets, in the order they were captured, on different
    subflows: how interleaved the data left the sender (one link, no reordering on it).

    A packet whose DSN an earlier one carried (a retransmission, a copy) is left out, and
    counting starts at the first packet of the last subflow to appear. Returns (fraction,
    number of packet pairs counted)."""
    seen_dsn: set[int] = set()
    flows = []
    for dsn, flow, _ in packets:
        if dsn not in seen_dsn:
            seen_dsn.add(dsn)
            flows.append(flow)
    first: dict[tuple, int] = {}
    for k, flow in enumerate(flows):
        first.setdefault(flow, k)
    if not first:
        return 0.0, 0
    pairs = list(zip(flows[max(first.values()):], flows[max(first.values()) + 1:],
                     strict=False))
    if not pairs:
        return 0.0, 0
    return sum(a != b for a, b in pairs) / len(pairs), len(pairs)


def copied_share(packets: Sequence[tuple[int, tuple, int]]) -> float:
    """Share of data segments whose DSN an earlier segment already carried: copies sent by a
    redundant subflow, and MPTCP-level retransmissions."""
    seen: set[int] = set()
    copies = 0
    for dsn, _, _ in packets:
        copies += dsn in seen
        seen.add(dsn)
    return copies / len(packets) if packets else 0.0


def path_shares(packets: Sequence[tuple[int, tuple, int]], addrs: Sequence[bytes]) -> list[dict]:
    """Per client address (one per path): data segments it received, their bytes, and the
    share of them whose DSN another subflow also carried (copies, either way round)."""
    carriers: dict[int, set[bytes]] = {}
    for dsn, flow, _ in packets:
        carriers.setdefault(dsn, set()).add(flow[2])
    out = []
    for addr in addrs:
        mine = [(dsn, n) for dsn, flow, n in packets if flow[2] == addr]
        shared = sum(1 for dsn, _ in mine if len(carriers[dsn]) > 1)
        out.append({"segments": len(mine), "bytes": sum(n for _, n in mine),
                    "shared_share": round(shared / len(mine), 4) if mine else 0.0})
    return out


# ------------------------------------------------------------------ namespaces and processes


def sh(*argv: str, ns: str | None = None, check: bool = True, stdin: str | None = None) -> str:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    res = subprocess.run(cmd, capture_output=True, text=True, input=stdin)
    if check and res.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited {res.returncode}: {res.stderr.strip()}")
    return res.stdout


def add_namespace(ns: str) -> None:
    """`ip netns add`, marked as this process's the way pathdiv marks its namespaces
    (experiments/fabric/environment.py: `pathdiv clean` deletes only marked ones)."""
    stat = Path("/proc/self/stat").read_text()
    start = stat[stat.rindex(")") + 2:].split()[19]
    sh("ip", "netns", "add", ns)
    sh("ip", "-n", ns, "link", "set", "lo", "alias", f"pathdiv-owner {os.getpid()}:{start}")


def teardown() -> None:
    for ns in (NS_SERVER, NS_CLIENT, NS_ROUTER):
        sh("ip", "netns", "del", ns, check=False)


@contextlib.contextmanager
def lab(subflows: int, delay_ms: float, rate_mbit: float, queue_pkts: int,
        router: bool = False) -> Iterator[None]:
    """Two namespaces, one veth pair, ``subflows`` client addresses as MPTCP endpoints.

    With ``router`` the pair becomes two, bridged in a third namespace whose port towards
    the client holds the shaping, and the delay is on the data path, the server's egress
    (netem orphans the packets it holds): otherwise TCP small queues, which count a
    packet against its socket until the veth's far side frees it, keep every socket to a
    few packets in the bottleneck queue, which never overflows, and the sockets share it
    equally whatever their congestion control."""
    teardown()
    try:
        for ns in (NS_SERVER, NS_CLIENT):
            add_namespace(ns)
            sh("ip", "link", "set", "lo", "up", ns=ns)
            sh("ip", "mptcp", "limits", "set", "subflow", "8", "add_addr_accepted", "8", ns=ns)
            # no run inherits ssthresh or RTT from the previous one (the TCP metrics cache)
            sh("sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1", ns=ns)
        # the devices whose egress delays packets and shapes data
        ack_side, data_side = (DEV_CLIENT, NS_CLIENT), (DEV_SERVER, NS_SERVER)
        if router:
            add_namespace(NS_ROUTER)
            sh("ip", "link", "add", "br0", "type", "bridge", ns=NS_ROUTER)
            for dev, ns, port in ((DEV_SERVER, NS_SERVER, "pdlab-rs"),
                                  (DEV_CLIENT, NS_CLIENT, "pdlab-rc")):
                sh("ip", "link", "add", dev, "netns", ns, "type", "veth", "peer", "name", port,
                   "netns", NS_ROUTER)
                sh("ip", "link", "set", port, "master", "br0", "up", ns=NS_ROUTER)
                sh("ethtool", "-K", port, "tso", "off", "gso", "off", "gro", "off",
                   ns=NS_ROUTER, check=False)
            sh("ip", "link", "set", "br0", "up", ns=NS_ROUTER)
            ack_side, data_side = (DEV_SERVER, NS_SERVER), ("pdlab-rc", NS_ROUTER)
        else:
            sh("ip", "link", "add", DEV_SERVER, "netns", NS_SERVER, "type", "veth",
               "peer", "name", DEV_CLIENT, "netns", NS_CLIENT)
        sh("ip", "addr", "add", f"{SERVER_ADDR}/24", "dev", DEV_SERVER, ns=NS_SERVER)
        for i in range(subflows):
            sh("ip", "addr", "add", f"{client_addr(i)}/24", "dev", DEV_CLIENT, ns=NS_CLIENT)
            if i:
                sh("ip", "mptcp", "endpoint", "add", client_addr(i), "dev", DEV_CLIENT,
                   "subflow", ns=NS_CLIENT)
        for ns, dev in ((NS_SERVER, DEV_SERVER), (NS_CLIENT, DEV_CLIENT)):
            sh("ip", "link", "set", dev, "up", ns=ns)
            # one segment per packet on the wire, as on a real link
            sh("ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", ns=ns, check=False)
        if delay_ms:
            sh("tc", "qdisc", "add", "dev", ack_side[0], "root", "netem", "delay",
               f"{delay_ms}ms", ns=ack_side[1])
        if rate_mbit:
            sh("tc", "qdisc", "add", "dev", data_side[0], "root", "tbf", "rate",
               f"{rate_mbit}mbit", "burst", "3028", "limit", str(queue_pkts * 1514),
               ns=data_side[1])
        yield
    finally:
        teardown()


@contextlib.contextmanager
def paths_lab(paths: Sequence[tuple[float, float, float]], queue_pkts: int) -> Iterator[None]:
    """Dual-homed hosts: one veth pair per path between the namespaces, each with its own
    rate, delay and loss, and the client's address on path i an MPTCP ``subflow`` endpoint
    on that interface (one subflow per interface, the paper's two-interface setting).

    The server's address is on its loopback, reached over every path; the client routes by
    source address (one table per path). Path i's data direction (server egress) holds
    netem (half the delay, the loss) with a tbf child (rate, ``queue_pkts``); the ACK
    direction the other half of the delay."""
    teardown()
    try:
        for ns in (NS_SERVER, NS_CLIENT):
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "set", "lo", "up", ns=ns)
            sh("ip", "mptcp", "limits", "set", "subflow", "8", "add_addr_accepted", "8", ns=ns)
            sh("sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1", ns=ns)
            for key in ("all", "default"):
                sh("sysctl", "-qw", f"net.ipv4.conf.{key}.rp_filter=0", ns=ns)
        sh("ip", "addr", "add", f"{SERVER_ADDR}/32", "dev", "lo", ns=NS_SERVER)
        for i, (rate, delay, loss) in enumerate(paths):
            dev_s, dev_c = f"pdlab-s{i}", f"pdlab-c{i}"
            sh("ip", "link", "add", dev_s, "netns", NS_SERVER, "type", "veth",
               "peer", "name", dev_c, "netns", NS_CLIENT)
            sh("ip", "addr", "add", f"{path_addr(i, 's')}/24", "dev", dev_s, ns=NS_SERVER)
            sh("ip", "addr", "add", f"{path_addr(i, 'c')}/24", "dev", dev_c, ns=NS_CLIENT)
            for ns, dev in ((NS_SERVER, dev_s), (NS_CLIENT, dev_c)):
                sh("ip", "link", "set", dev, "up", ns=ns)
                sh("ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", ns=ns,
                   check=False)
            table = str(100 + i)
            sh("ip", "route", "add", f"{SERVER_ADDR}/32", "via", path_addr(i, "s"), "dev",
               dev_c, "table", table, ns=NS_CLIENT)
            sh("ip", "rule", "add", "from", path_addr(i, "c"), "table", table, ns=NS_CLIENT)
            if i == 0:
                sh("ip", "route", "add", f"{SERVER_ADDR}/32", "via", path_addr(i, "s"), "dev",
                   dev_c, ns=NS_CLIENT)
            else:
                sh("ip", "mptcp", "endpoint", "add", path_addr(i, "c"), "dev", dev_c,
                   "subflow", ns=NS_CLIENT)
            netem = ["delay", f"{delay / 2}ms"] + (["loss", f"{loss}%"] if loss else [])
            sh("tc", "qdisc", "add", "dev", dev_s, "root", "handle", "1:", "netem", *netem,
               "limit", "10000", ns=NS_SERVER)
            if rate:
                sh("tc", "qdisc", "add", "dev", dev_s, "parent", "1:", "handle", "2:", "tbf",
                   "rate", f"{rate}mbit", "burst", "3028", "limit", str(queue_pkts * 1514),
                   ns=NS_SERVER)
            if delay:
                sh("tc", "qdisc", "add", "dev", dev_c, "root", "netem", "delay",
                   f"{delay / 2}ms", ns=NS_CLIENT)
        yield
    finally:
        teardown()


def paths_transfer(scheduler: str, size: int, paths: int, out: Path) -> dict:
    """One MPTCP fetch of ``size`` bytes over the paths lab, captured on every client
    interface: completion, goodput, subflows and what each path carried."""
    set_scheduler(scheduler)
    local = Path(tempfile.mkdtemp(prefix="pdlab-"))
    dumps = []
    for i in range(paths):
        pcap = local / f"{scheduler}-path{i}.pcap"
        dumps.append((pcap, subprocess.Popen(
            ["ip", "netns", "exec", NS_CLIENT, "tcpdump", "-i", f"pdlab-c{i}", "-s", "160",
             "-B", "16384", "-w", str(pcap), "tcp", "port", str(PORT)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    deadline = time.monotonic() + 20
    while not all(p.exists() for p, _ in dumps) and time.monotonic() < deadline:
        time.sleep(0.05)
    server = subprocess.Popen(server_cmd(1, paths), stdout=subprocess.PIPE, text=True)
    try:
        wait_listening()
        res = subprocess.run(client_cmd(size, 1), capture_output=True, text=True, timeout=600)
        if res.returncode != 0:
            raise RuntimeError(f"client failed ({res.returncode}): {res.stderr.strip()}")
        fetched = json.loads(res.stdout)
        server_out, _ = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
        time.sleep(0.5)  # let tcpdump drain what the kernel queued
        for _, dump in dumps:
            dump.terminate()
            dump.wait(timeout=30)
    packets = []
    for pcap, _ in dumps:
        packets += data_packets(pcap)
        shutil.move(pcap, out / pcap.name)
    shutil.rmtree(local, ignore_errors=True)
    addrs = [socket.inet_aton(path_addr(i, "c")) for i in range(paths)]
    return {"scheduler": scheduler, **fetched, "server": json.loads(server_out or "{}"),
            "subflows_seen": len({flow for _, flow, _ in packets}),
            "copied_share": round(copied_share(packets), 4),
            "paths": path_shares(packets, addrs)}


def set_sysctls(*settings: str) -> None:
    for ns in (NS_SERVER, NS_CLIENT):
        if settings:
            sh("sysctl", "-qw", *settings, ns=ns)


def set_cc(cc: str) -> None:
    """The congestion control of both namespaces (allowed first: a namespace may only pick
    an allowed one unless the kernel marks it non-restricted)."""
    allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
    if cc not in allowed.read_text().split():
        allowed.write_text(f"{allowed.read_text().strip()} {cc}")
    set_sysctls(f"net.ipv4.tcp_congestion_control={cc}")


@contextlib.contextmanager
def spray_lab(delays_ms: Sequence[float], rate_mbit: float, queue_pkts: int,
              ack_delay_ms: float) -> Iterator[None]:
    """Two namespaces, one veth pair; server-to-client packets sprayed round robin over
    len(delays_ms) paths, each a netem of its own delay at ``rate_mbit``."""
    teardown()
    try:
        for ns in (NS_SERVER, NS_CLIENT):
            add_namespace(ns)
            sh("ip", "link", "set", "lo", "up", ns=ns)
        sh("ip", "link", "add", DEV_SERVER, "netns", NS_SERVER, "type", "veth",
           "peer", "name", DEV_CLIENT, "netns", NS_CLIENT)
        sh("ip", "addr", "add", f"{SERVER_ADDR}/24", "dev", DEV_SERVER, ns=NS_SERVER)
        sh("ip", "addr", "add", f"{client_addr(0)}/24", "dev", DEV_CLIENT, ns=NS_CLIENT)
        for ns, dev in ((NS_SERVER, DEV_SERVER), (NS_CLIENT, DEV_CLIENT)):
            sh("ip", "link", "set", dev, "up", ns=ns)
            sh("ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", ns=ns, check=False)
        paths = len(delays_ms)
        sh("tc", "qdisc", "add", "dev", DEV_SERVER, "root", "handle", "1:", "prio", "bands",
           str(paths), "priomap", *["0"] * 16, ns=NS_SERVER)
        for i, delay in enumerate(delays_ms):
            sh("tc", "filter", "add", "dev", DEV_SERVER, "parent", "1:", "protocol", "ip",
               "prio", "1", "handle", str(i + 1), "fw", "flowid", f"1:{i + 1}", ns=NS_SERVER)
            sh("tc", "qdisc", "add", "dev", DEV_SERVER, "parent", f"1:{i + 1}", "handle",
               f"{10 + i}:", "netem", "delay", f"{delay}ms", "rate", f"{rate_mbit}mbit",
               "limit", str(queue_pkts), ns=NS_SERVER)
        sh("nft", "-f", "-", ns=NS_SERVER, stdin=(
            "table ip pdspray {\n chain out {\n  type filter hook output priority 0;\n"
            f"  tcp sport {PORT} meta mark set numgen inc mod {paths} offset 1\n }}\n}}\n"))
        if ack_delay_ms:
            sh("tc", "qdisc", "add", "dev", DEV_CLIENT, "root", "netem", "delay",
               f"{ack_delay_ms}ms", ns=NS_CLIENT)
        yield
    finally:
        teardown()


def set_scheduler(name: str) -> None:
    for ns in (NS_SERVER, NS_CLIENT):
        sh("sysctl", "-qw", f"net.mptcp.scheduler={name}", ns=ns)


def server_cmd(connections: int, subflows: int) -> list[str]:
    return ["ip", "netns", "exec", NS_SERVER, sys.executable, __file__, "serve",
            "--connections", str(connections), "--subflows", str(subflows)]


def client_cmd(size: int, flows: int) -> list[str]:
    return ["ip", "netns", "exec", NS_CLIENT, sys.executable, __file__, "fetch",
            "--size", str(size), "--flows", str(flows)]


def wait_listening(timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if f":{PORT}" in sh("ss", "-Hltn", ns=NS_SERVER):
            return
        time.sleep(0.05)
    raise RuntimeError(f"server did not listen on port {PORT} within {timeout_s} s")


def transfer(scheduler: str, size: int, flows: int, subflows: int,
             capture: Path | None = None) -> dict:
    """Run ``flows`` concurrent fetches of ``size`` bytes under ``scheduler``."""
    set_scheduler(scheduler)
    dump = None
    if capture:
        # capture to local storage first: a shared folder (9p) is too slow for tcpdump
        local = Path(tempfile.mkdtemp(prefix="pdlab-")) / capture.name
        dump = subprocess.Popen(
            ["ip", "netns", "exec", NS_CLIENT, "tcpdump", "-i", DEV_CLIENT, "-s", "160",
             "-B", "16384", "-w", str(local), "tcp", "port", str(PORT)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        while not local.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    server = subprocess.Popen(server_cmd(flows, subflows), stdout=subprocess.PIPE, text=True)
    try:
        wait_listening()
        res = subprocess.run(client_cmd(size, flows), capture_output=True, text=True,
                             timeout=600)
        if res.returncode != 0:
            raise RuntimeError(f"client failed ({res.returncode}): {res.stderr.strip()}")
        fetched = json.loads(res.stdout)
        server_out, _ = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
        if dump:
            time.sleep(0.5)  # let tcpdump drain what the kernel queued
            dump.terminate()
            _, dump_err = dump.communicate(timeout=30)
    report = {"scheduler": scheduler, **fetched, "server": json.loads(server_out or "{}")}
    if capture:
        shutil.move(local, capture)
        shutil.rmtree(local.parent, ignore_errors=True)
        dropped = [line for line in dump_err.splitlines() if "dropped by kernel" in line]
        report["capture_dropped"] = int(dropped[0].split()[0]) if dropped else None
        packets = data_packets(capture)
        frac, pairs = interleave_fraction(packets)
        wire, _ = wire_interleave_fraction(packets)
        turns, _ = turn_fraction(packets)
        report.update(interleave_fraction=round(frac, 4), packet_pairs=pairs,
                      wire_interleave_fraction=round(wire, 4), turn_fraction=round(turns, 4),
                      subflows_seen=len({flow for _, flow, _ in packets}),
                      copied_share=round(copied_share(packets), 4))
    return report


# ------------------------------------------------------------------ server and client


def serve(connections: int, subflows: int) -> None:
    """Answer ``connections`` requests (8-byte size) with that many bytes, concurrently."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_MPTCP)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((SERVER_ADDR, PORT))
    srv.listen(64)
    joined: list[int] = []

    def answer(conn: socket.socket) -> None:
        with conn:
            size = struct.unpack("!Q", conn.recv(8, socket.MSG_WAITALL))[0]
            # send only once the client's extra subflows joined (bounded wait)
            deadline = time.monotonic() + 5
            n = 0
            while time.monotonic() < deadline:
                n = conn.getsockopt(SOL_MPTCP, MPTCP_INFO, 64)[0]
                if n >= subflows - 1:
                    break
                time.sleep(0.01)
            joined.append(n + 1)
            chunk = b"\x5a" * 65536
            while size:
                size -= conn.send(chunk[: min(size, len(chunk))])
            conn.shutdown(socket.SHUT_WR)
            conn.recv(1)

    threads = []
    for _ in range(connections):
        conn, _ = srv.accept()
        t = threading.Thread(target=answer, args=(conn,))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    srv.close()
    print(json.dumps({"subflows_at_start": joined}))


# struct tcp_info (include/uapi/linux/tcp.h): byte offsets of the fields the spray mode reads
TCP_INFO_FIELDS = {"reordering": (88, "I"), "total_retrans": (100, "I"),
                   "data_segs_out": (156, "I"), "bytes_sent": (200, "Q"),
                   "bytes_retrans": (208, "Q"), "dsack_dups": (216, "I"),
                   "reord_seen": (220, "I")}


def tcp_info(sock: socket.socket) -> dict[str, int]:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    return {name: struct.unpack_from(fmt, raw, off)[0]
            for name, (off, fmt) in TCP_INFO_FIELDS.items() if off + struct.calcsize(fmt)
            <= len(raw)}


def serve_tcp() -> None:
    """Answer one plain-TCP request with that many bytes; print the sender's tcp_info."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((SERVER_ADDR, PORT))
    srv.listen(4)
    conn, _ = srv.accept()
    with conn:
        size = struct.unpack("!Q", conn.recv(8, socket.MSG_WAITALL))[0]
        chunk = b"\x5a" * 65536
        while size:
            size -= conn.send(chunk[: min(size, len(chunk))])
        conn.shutdown(socket.SHUT_WR)
        conn.recv(1)  # the client closes once it has every byte: all data is acked
        info = tcp_info(conn)
    srv.close()
    print(json.dumps(info))


def stream(connections: int, subflows: int) -> None:
    """Send to each of ``connections`` clients until it closes. A client asks with one byte:
    ``m`` (MPTCP: data starts once ``subflows`` subflows are up, at most 10 s) or ``t``."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_MPTCP)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((SERVER_ADDR, PORT))
    srv.listen(16)

    def pour(conn: socket.socket) -> None:
        chunk = b"\x5a" * 65536
        with conn:
            if conn.recv(1) == b"m":
                deadline = time.monotonic() + 10
                while (time.monotonic() < deadline
                       and conn.getsockopt(SOL_MPTCP, MPTCP_INFO, 64)[0] < subflows - 1):
                    time.sleep(0.01)
            with contextlib.suppress(OSError):
                while True:
                    conn.sendall(chunk)

    threads = []
    for _ in range(connections):
        conn, _ = srv.accept()
        t = threading.Thread(target=pour, args=(conn,))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    srv.close()


def race(warmup_s: float, window_s: float) -> None:
    """One MPTCP and one TCP download at once; bytes each received in the window."""
    out: dict[str, dict] = {}
    barrier = threading.Barrier(2)

    def one(name: str, proto: int) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto) as s:
            barrier.wait()
            start = time.monotonic()
            s.connect((SERVER_ADDR, PORT))
            s.sendall(b"m" if proto == socket.IPPROTO_MPTCP else b"t")
            got, mark, end = 0, None, None
            while chunk := s.recv(1 << 16):
                got += len(chunk)
                now = time.monotonic() - start
                if mark is None and now >= warmup_s:
                    mark = (now, got)
                if now >= warmup_s + window_s:
                    end = (now, got)
                    break
            subflows = (s.getsockopt(SOL_MPTCP, MPTCP_INFO, 64)[0] + 1
                        if proto == socket.IPPROTO_MPTCP else 1)
        if mark is None or end is None:
            out[name] = {"bytes": got, "error": "the transfer ended before the window"}
            return
        window_bytes = end[1] - mark[1]
        out[name] = {"window_bytes": window_bytes, "subflows": subflows,
                     "mbps": round(8 * window_bytes / (end[0] - mark[0]) / 1e6, 3)}

    threads = [threading.Thread(target=one, args=("mptcp", socket.IPPROTO_MPTCP)),
               threading.Thread(target=one, args=("tcp", socket.IPPROTO_TCP))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(out))


def share_run(cc: str, subflows: int, warmup_s: float, window_s: float) -> dict:
    """The ``share`` mode for one congestion control (set in both namespaces)."""
    set_cc(cc)
    # receive buffers far above bandwidth x delay + queue: the senders are window limited
    # by their congestion windows, so the bottleneck drops and the congestion controls
    # decide the shares (with autotuned buffers they settle below the drop point and
    # the receive windows decide)
    sh("sysctl", "-qw", "net.ipv4.tcp_rmem=4096 4194304 8388608", ns=NS_CLIENT)
    server = subprocess.Popen(["ip", "netns", "exec", NS_SERVER, sys.executable, __file__,
                               "stream", "--connections", "2", "--subflows", str(subflows)])
    try:
        wait_listening()
        res = subprocess.run(["ip", "netns", "exec", NS_CLIENT, sys.executable, __file__,
                              "race", "--warmup-s", str(warmup_s), "--window-s",
                              str(window_s)], capture_output=True, text=True, timeout=3600)
        if res.returncode != 0:
            raise RuntimeError(f"client failed ({res.returncode}): {res.stderr.strip()}")
        flows = json.loads(res.stdout)
    finally:  # the server pours until killed (a closed MPTCP peer need not reset it)
        if server.poll() is None:
            server.kill()
    m, t = flows["mptcp"].get("mbps"), flows["tcp"].get("mbps")
    return {"cc": cc, **flows, "mptcp_to_tcp": round(m / t, 3) if m and t else None}


def spray_run(level: str, size: int, hold_us: int) -> dict:
    """The ``spray`` mode for one hosts.reordering level."""
    from pathdiv.experiments.fabric.hostsetup import HOLD_SYSCTL, reordering_sysctls

    defaults = ["net.ipv4.tcp_reordering=3", "net.ipv4.tcp_max_reordering=300",
                "net.ipv4.tcp_recovery=1", "net.ipv4.tcp_dsack=1"]
    if Path("/proc/sys", *HOLD_SYSCTL.split(".")).exists():
        defaults.append(f"{HOLD_SYSCTL}=0")
    set_sysctls(*defaults)  # a level's settings replace the previous level's
    set_sysctls(*reordering_sysctls(level, hold_us))
    server = subprocess.Popen(["ip", "netns", "exec", NS_SERVER, sys.executable, __file__,
                               "serve-tcp"], stdout=subprocess.PIPE, text=True)
    try:
        wait_listening()
        res = subprocess.run(["ip", "netns", "exec", NS_CLIENT, sys.executable, __file__,
                              "fetch", "--tcp", "--size", str(size)], capture_output=True,
                             text=True, timeout=3600)
        if res.returncode != 0:
            raise RuntimeError(f"client failed ({res.returncode}): {res.stderr.strip()}")
        fetched = json.loads(res.stdout)
        info = json.loads(server.communicate(timeout=60)[0])
    finally:
        if server.poll() is None:
            server.kill()
    retrans = info["bytes_retrans"] / info["bytes_sent"] if info.get("bytes_sent") else None
    return {"reordering": level, "hold_us": hold_us if level == "gro" else None,
            "complete": fetched["complete"],
            "goodput_mbps": fetched["goodput_mbps"], "fct_s": fetched["fct_s"][0],
            "retrans_share": None if retrans is None else round(retrans, 5), "sender": info}


def fetch(size: int, flows: int, proto: int = socket.IPPROTO_MPTCP) -> None:
    """``flows`` concurrent fetches (MPTCP unless told) of ``size`` bytes; FCTs, goodput."""
    results: list[dict] = [{} for _ in range(flows)]
    barrier = threading.Barrier(flows)

    def one(k: int) -> None:
        barrier.wait()
        start = time.monotonic()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto) as s:
            s.connect((SERVER_ADDR, PORT))
            s.sendall(struct.pack("!Q", size))
            got = 0
            while chunk := s.recv(1 << 20):
                got += len(chunk)
        fct = time.monotonic() - start
        results[k] = {"bytes": got, "fct_s": fct}

    threads = [threading.Thread(target=one, args=(k,)) for k in range(flows)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    complete = all(r.get("bytes") == size for r in results)
    fcts = [r["fct_s"] for r in results if "fct_s" in r]
    print(json.dumps({
        "complete": complete,
        "bytes": [r.get("bytes", 0) for r in results],
        "fct_s": [round(f, 4) for f in fcts],
        "mean_fct_s": round(sum(fcts) / len(fcts), 4) if fcts else None,
        "goodput_mbps": round(8 * size * flows / max(fcts) / 1e6, 2) if fcts else None,
    }))


# ------------------------------------------------------------------ modes


MPTCP_FASTCLOSE = 7  # the MP_FASTCLOSE option's subtype


def fastcloses(pcap: Path) -> tuple[int, int]:
    """(segments carrying MP_FASTCLOSE, segments with RST) in a capture."""
    import dpkt

    fast = rst = 0
    with open(pcap, "rb") as fh:
        for _, buf in dpkt.pcap.Reader(fh):
            ip = dpkt.ethernet.Ethernet(buf).data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            rst += bool(tcp.flags & dpkt.tcp.TH_RST)
            for kind, data in dpkt.tcp.parse_opts(tcp.opts):
                if kind == MPTCP_OPTION and data and data[0] >> 4 == MPTCP_FASTCLOSE:
                    fast += 1
    return fast, rst


def orphan_run(size: int, sndbuf: int, timeout_s: float, out: Path,
               server_script: Path | None = None) -> dict:
    """One fetch with pathdiv's own transfer tool (experiments/traffic/transfer.py, serve
    and fetch) over the lab, the server's send buffer `sndbuf` from the start
    (net.ipv4.tcp_wmem): its application writes the reply into it and is done long
    before a slow path delivers it. Captured on the client's interface: whether the
    connection was reset (MP_FASTCLOSE, RST) and when."""
    sh("sysctl", "-qw", f"net.ipv4.tcp_wmem=4096 {sndbuf} {sndbuf}", ns=NS_SERVER)
    tool = [sys.executable, "-m", "pathdiv.experiments.traffic.transfer"]
    local = Path(tempfile.mkdtemp(prefix="pdlab-")) / "orphan.pcap"
    dump = subprocess.Popen(
        ["ip", "netns", "exec", NS_CLIENT, "tcpdump", "-i", DEV_CLIENT, "-s", "160",
         "-B", "16384", "-w", str(local), "tcp", "port", str(PORT)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not local.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    serve = [sys.executable, str(server_script)] if server_script else tool
    server = subprocess.Popen(["ip", "netns", "exec", NS_SERVER, *serve, "serve", "--mptcp",
                               "--address", SERVER_ADDR, "--port", str(PORT)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_listening()
        res = subprocess.run(["ip", "netns", "exec", NS_CLIENT, *tool, "fetch", "--mptcp",
                              "--timeout", str(timeout_s), f"{SERVER_ADDR}:{PORT}:{size}"],
                             capture_output=True, text=True, timeout=timeout_s + 120)
        fetched = json.loads(res.stdout.splitlines()[0])
    finally:
        server.kill()
        time.sleep(0.5)  # let tcpdump drain what the kernel queued
        dump.terminate()
        dump.wait(timeout=30)
    capture = out / "orphan.pcap"
    shutil.move(local, capture)
    shutil.rmtree(local.parent, ignore_errors=True)
    fast, rst = fastcloses(capture)
    return {"ok": fetched["ok"], "error": fetched["error"], "received": fetched["received"],
            "size": size, "seconds": round(fetched["end_s"] - fetched["start_s"], 3),
            "fastclose_segments": fast, "rst_segments": rst, "capture": str(capture)}


def available() -> list[str]:
    try:
        return Path("/proc/sys/net/mptcp/available_schedulers").read_text().split()
    except FileNotFoundError:
        return []


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    for name in ("check", "goodput", "fct"):
        m = sub.add_parser(name)
        m.add_argument("--schedulers", nargs="+", default=["default", "rb", "roundrobin"])
        m.add_argument("--subflows", type=int, default=4)
        m.add_argument("--size", type=int, default={"check": 2_000_000, "goodput": 50_000_000,
                                                    "fct": 500_000}[name])
        m.add_argument("--flows", type=int, default=16 if name == "fct" else 1)
        m.add_argument("--delay-ms", type=float, default={"fct": 2.0, "check": 5.0}.get(name, 1.0))
        m.add_argument("--rate-mbit", type=float, default=20.0 if name == "fct" else 0.0)
        m.add_argument("--queue-pkts", type=int, default=10)
        m.add_argument("--out", type=Path, default=Path("."))
        m.add_argument("--cc", default="", help="net.ipv4.tcp_congestion_control of both "
                       "namespaces (default: the kernel's)")
    s = sub.add_parser("serve")
    s.add_argument("--connections", type=int, default=1)
    s.add_argument("--subflows", type=int, default=4)
    f = sub.add_parser("fetch")
    f.add_argument("--size", type=int, required=True)
    f.add_argument("--flows", type=int, default=1)
    f.add_argument("--tcp", action="store_true", help="plain TCP instead of MPTCP")
    sub.add_parser("serve-tcp")
    st = sub.add_parser("stream")
    st.add_argument("--connections", type=int, default=2)
    st.add_argument("--subflows", type=int, default=4)
    r = sub.add_parser("race")
    r.add_argument("--warmup-s", type=float, default=5.0)
    r.add_argument("--window-s", type=float, default=20.0)
    sh_ = sub.add_parser("share")
    sh_.add_argument("--ccs", nargs="+", default=["cubic", "lia"])
    sh_.add_argument("--subflows", type=int, default=4)
    sh_.add_argument("--rate-mbit", type=float, default=20.0)
    sh_.add_argument("--delay-ms", type=float, default=40.0)
    sh_.add_argument("--queue-pkts", type=int, default=60)
    sh_.add_argument("--warmup-s", type=float, default=10.0)
    sh_.add_argument("--window-s", type=float, default=60.0)
    pa = sub.add_parser("paths")
    pa.add_argument("--paths", type=parse_path, nargs="+",
                    default=[(20.0, 10.0, 0.0), (20.0, 10.0, 0.0)],
                    help="RATE_MBIT:DELAY_MS:LOSS_PCT per path (RTT = delay)")
    pa.add_argument("--schedulers", nargs="+", default=["default", "arp"])
    pa.add_argument("--cc", default="", help="net.ipv4.tcp_congestion_control of both hosts")
    pa.add_argument("--size", type=int, default=4_000_000)
    pa.add_argument("--queue-pkts", type=int, default=50)
    pa.add_argument("--out", type=Path, default=Path("."))
    sp = sub.add_parser("spray")
    sp.add_argument("--levels", nargs="+", default=["default", "tuned"])
    sp.add_argument("--size", type=int, default=10_000_000)
    sp.add_argument("--delays-ms", type=float, nargs="+", default=[1.0, 2.0, 3.0, 4.0])
    sp.add_argument("--rate-mbit", type=float, default=5.0, help="per path")
    sp.add_argument("--queue-pkts", type=int, default=100, help="per path")
    sp.add_argument("--ack-delay-ms", type=float, default=1.0)
    sp.add_argument("--hold-us", type=int, default=20000,
                    help="bound of the reorder hold (level gro): above the reordering the "
                    "paths cause, which with their queues is 12-20 ms here (measured)")
    o = sub.add_parser("orphan", help="a reply its server application finished writing "
                       "long before a slow path delivers it (pathdiv's transfer tool)")
    o.add_argument("--size", type=int, default=4_000_000)
    o.add_argument("--sndbuf", type=int, default=4_194_304,
                   help="the server's send buffer from the start (net.ipv4.tcp_wmem)")
    o.add_argument("--rate-mbit", type=float, default=0.4)
    o.add_argument("--delay-ms", type=float, default=10.0)
    o.add_argument("--queue-pkts", type=int, default=100)
    o.add_argument("--subflows", type=int, default=2)
    o.add_argument("--timeout", type=float, default=300.0)
    o.add_argument("--out", type=Path, default=Path("."))
    o.add_argument("--server-script", type=Path, default=None,
                   help="serve with this copy of transfer.py (e.g. an earlier revision's)")
    args = p.parse_args(argv)

    if args.mode == "serve":
        serve(args.connections, args.subflows)
        return 0
    if args.mode == "fetch":
        fetch(args.size, args.flows, socket.IPPROTO_TCP if args.tcp else socket.IPPROTO_MPTCP)
        return 0
    if args.mode == "serve-tcp":
        serve_tcp()
        return 0
    if args.mode == "stream":
        stream(args.connections, args.subflows)
        return 0
    if args.mode == "race":
        race(args.warmup_s, args.window_s)
        return 0
    kernel = sh("uname", "-r").strip()
    if args.mode == "share":
        with lab(args.subflows, args.delay_ms, args.rate_mbit, args.queue_pkts, router=True):
            runs = [share_run(cc, args.subflows, args.warmup_s, args.window_s)
                    for cc in args.ccs]
        print(json.dumps({"mode": "share", "kernel": kernel, "rate_mbit": args.rate_mbit,
                          "runs": runs}, indent=1))
        return 0
    if args.mode == "paths":
        args.out.mkdir(parents=True, exist_ok=True)
        with paths_lab(args.paths, args.queue_pkts):
            if args.cc:
                set_cc(args.cc)
            runs = [paths_transfer(s, args.size, len(args.paths), args.out)
                    for s in args.schedulers]
        print(json.dumps({"mode": "paths", "kernel": kernel, "cc": args.cc or None,
                          "paths": [dict(zip(("rate_mbit", "delay_ms", "loss_pct"), p,
                                             strict=True)) for p in args.paths],
                          "runs": runs}, indent=1))
        return 0
    if args.mode == "orphan":
        args.out.mkdir(parents=True, exist_ok=True)
        with lab(args.subflows, args.delay_ms, args.rate_mbit, args.queue_pkts):
            run = orphan_run(args.size, args.sndbuf, args.timeout, args.out,
                             args.server_script)
        print(json.dumps({"mode": "orphan", "kernel": kernel, "rate_mbit": args.rate_mbit,
                          "sndbuf": args.sndbuf, **run}, indent=1))
        return 0
    if args.mode == "spray":
        with spray_lab(args.delays_ms, args.rate_mbit, args.queue_pkts, args.ack_delay_ms):
            runs = [spray_run(level, args.size, args.hold_us) for level in args.levels]
        print(json.dumps({"mode": "spray", "kernel": kernel, "delays_ms": args.delays_ms,
                          "rate_mbit_per_path": args.rate_mbit, "runs": runs}, indent=1))
        return 0
    report: dict = {"mode": args.mode, "kernel": kernel, "cc": args.cc or None,
                    "available_schedulers": available(), "runs": []}
    args.out.mkdir(parents=True, exist_ok=True)
    with lab(args.subflows, args.delay_ms, args.rate_mbit, args.queue_pkts):
        if args.cc:
            set_cc(args.cc)
        for sched in args.schedulers:
            capture = args.out / f"{sched}.pcap" if args.mode == "check" else None
            report["runs"].append(transfer(sched, args.size, args.flows, args.subflows, capture))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
