"""Replay of a DATA_FIN inside a reinjected mapping into the lab kernel (as root, in the guest).

The sequence of `rb-drops-short`'s hung transfer (docs/reproduction/paper-settings.md,
RB point 7), played by a crafted MPTCP peer against the kernel's MPTCP listener:

1. The peer opens an MPTCP connection (MP_CAPABLE) and a second subflow (MP_JOIN).
2. It sends the whole stream on the first subflow, without DATA_FIN (the sender had not
   closed yet), and waits for the data-level ACK that covers it: the receiver's msk
   holds every byte.
3. It sends the stream's last mapping again, whole, on the second subflow, now with the
   DATA_FIN (a reinjection after the sender closed): data the msk already has plus the
   DATA_FIN.
4. It repeats a bare DATA_FIN on both subflows with backoff (``--bare``), as the sender
   in the capture did, unless the DATA_FIN was acknowledged.

Scenario ``in-order`` is the control: step 2 leaves out the last mapping, so in step 3 it
carries new data, the case Linux has always handled.

The receiving application (`receive`, in its own namespace) reads until end of stream or
its deadline. Linux 6.12 as released never acknowledges that DATA_FIN (patch 0022).

Namespaces ``dfr-k`` (the kernel's side: address 10.79.0.1, the listener) and ``dfr-p``
(the peer: an interface with no address, so its own stack stays silent; the peer reads
and writes Ethernet frames on it with a packet socket) joined by one veth pair. The
kernel's side has a permanent neighbour entry for the peer's address. Times are the
guest's CLOCK_MONOTONIC (virtual in the lab kernel), shared by all processes.

  run      one replay; prints one JSON object: the receiver's bytes and end of stream,
           the peer's timeline, the DATA_ACKs it saw
  receive  (internal) the MPTCP listener
  peer     (internal) the crafted peer

Only the standard library.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import json
import os
import select
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

NS_KERNEL, NS_PEER = "dfr-k", "dfr-p"
DEV_KERNEL, DEV_PEER = "dfr-k0", "dfr-p0"
KERNEL_ADDR, PEER_ADDR = "10.79.0.1", "10.79.0.2"
PORT = 5301
ETH_P_IP = 0x0800
PACKET_OUTGOING = 4
MPTCP_KIND = 30
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10
# DSS flags (RFC 8684, 3.3)
DSS_DATA_FIN, DSS_DSN64, DSS_MAP, DSS_ACK64, DSS_ACK = 0x10, 0x08, 0x04, 0x02, 0x01
MSS = 1400
SCENARIOS = ("reinjection", "in-order")


# --- MPTCP arithmetic (RFC 8684, 3.1-3.2; Linux: net/mptcp/crypto.c) ---------------------

def key_token_idsn(key: bytes) -> tuple[bytes, int]:
    """A key's token (the SHA-256 digest's first 32 bits) and initial data sequence
    number (its last 64 bits)."""
    digest = hashlib.sha256(key).digest()
    return digest[:4], struct.unpack("!Q", digest[24:])[0]


def join_hmac(key_a: bytes, key_b: bytes, nonce_a: bytes, nonce_b: bytes) -> bytes:
    """HMAC-SHA256 over (Key-A || Key-B) of (R-A || R-B) (RFC 8684, 3.2)."""
    return hmac.new(key_a + key_b, nonce_a + nonce_b, hashlib.sha256).digest()


def mp_capable(keys: Sequence[bytes] = ()) -> bytes:
    """MP_CAPABLE version 1, HMAC-SHA256, no checksums: SYN (no key) or third ACK."""
    body = bytes([0x01, 0x01]) + b"".join(keys)
    return bytes([MPTCP_KIND, 2 + len(body)]) + body


def mp_join_syn(token: bytes, nonce: bytes, addr_id: int = 1) -> bytes:
    return bytes([MPTCP_KIND, 12, 0x10, addr_id]) + token + nonce


def mp_join_ack(full_hmac: bytes) -> bytes:
    return bytes([MPTCP_KIND, 24, 0x10, 0]) + full_hmac[:20]


def dss(data_ack: int, dsn: int | None = None, ssn: int = 0, length: int = 0,
        data_fin: bool = False) -> bytes:
    """DSS with a 64-bit data ACK and, given `dsn`, a 64-bit mapping (no checksum)."""
    flags = DSS_ACK | DSS_ACK64
    body = struct.pack("!Q", data_ack)
    if dsn is not None:
        flags |= DSS_MAP | DSS_DSN64 | (DSS_DATA_FIN if data_fin else 0)
        body += struct.pack("!QIH", dsn, ssn, length)
    return bytes([MPTCP_KIND, 4 + len(body), 0x20, flags]) + body


def parse_mptcp(options: bytes) -> list[bytes]:
    """The MPTCP options (kind 30, whole) among TCP options."""
    found, i = [], 0
    while i < len(options):
        kind = options[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(options) or options[i + 1] < 2:
            break
        length = options[i + 1]
        if kind == MPTCP_KIND:
            found.append(options[i:i + length])
        i += length
    return found


def data_ack_of(opts: Sequence[bytes]) -> int | None:
    """The data ACK a DSS carries (64 bits, or the low 32 bits), else None."""
    for opt in opts:
        if len(opt) >= 4 and opt[2] >> 4 == 2 and opt[3] & DSS_ACK:
            if opt[3] & DSS_ACK64:
                return struct.unpack("!Q", opt[4:12])[0]
            return struct.unpack("!I", opt[4:8])[0]
    return None


# --- packets ---------------------------------------------------------------------------

def checksum(data: bytes) -> int:
    """RFC 1071's sum; the same as experiments/fabric/reach.py's, repeated because this
    script runs in the guest by path, on the standard library only."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def tcp_segment(src: str, dst: str, sport: int, dport: int, seq: int, ack: int, flags: int,
                options: bytes = b"", payload: bytes = b"", window: int = 65535) -> bytes:
    """An IPv4 packet holding one TCP segment, checksums filled in; options padded with
    NOPs in front to a multiple of 4 bytes."""
    options = b"\x01" * (-len(options) % 4) + options
    offset = (20 + len(options)) // 4
    header = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                         offset << 4, flags, window, 0, 0) + options
    saddr, daddr = socket.inet_aton(src), socket.inet_aton(dst)
    segment = header + payload
    pseudo = saddr + daddr + struct.pack("!BBH", 0, socket.IPPROTO_TCP, len(segment))
    csum = checksum(pseudo + segment)
    segment = segment[:16] + struct.pack("!H", csum) + segment[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(segment), 0, 0x4000, 64,
                     socket.IPPROTO_TCP, 0, saddr, daddr)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    return ip + segment


@dataclass
class Segment:
    """One TCP segment the kernel sent, as the peer parsed it."""
    at: float
    sport: int
    dport: int
    seq: int
    ack: int
    flags: int
    mptcp: list[bytes]
    length: int
    src: str = ""  # the sender's IPv4 address


def parse_segment(packet: bytes, at: float) -> Segment | None:
    if len(packet) < 20 or packet[0] >> 4 != 4 or packet[9] != socket.IPPROTO_TCP:
        return None
    ihl = (packet[0] & 0x0F) * 4
    total = struct.unpack("!H", packet[2:4])[0]
    tcp = packet[ihl:total]
    sport, dport, seq, ack, off, flags = struct.unpack("!HHIIBB", tcp[:14])
    doff = (off >> 4) * 4
    return Segment(at, sport, dport, seq, ack, flags, parse_mptcp(tcp[20:doff]),
                   len(tcp) - doff, socket.inet_ntoa(packet[12:16]))


def incoming(sock: socket.socket, deadline: float) -> Iterator[Segment]:
    """The TCP segments that reach a packet socket until `deadline` (monotonic); frames
    the socket's own side sent are skipped."""
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([sock], [], [], left)
        if not ready:
            return
        frame, addr = sock.recvfrom(65535)
        if addr[2] == PACKET_OUTGOING:
            continue
        seg = parse_segment(frame[14:], time.monotonic())  # past the Ethernet header
        if seg is not None:
            yield seg


# --- the crafted peer -------------------------------------------------------------------

@dataclass
class Subflow:
    sport: int
    iss: int
    snd_nxt: int = 0
    rcv_nxt: int = 0
    ssn: int = 1  # relative subflow sequence number of the next data byte


@dataclass
class Peer:
    """Frames on one interface: sends the peer's segments, reads the kernel's."""
    dev: str
    dst_mac: bytes
    src_mac: bytes
    log: list[Segment] = field(default_factory=list)
    sent: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IP))
        self.sock.bind((self.dev, ETH_P_IP))

    def send(self, sf: Subflow, flags: int, options: bytes = b"", payload: bytes = b"",
             what: str = "") -> None:
        packet = tcp_segment(PEER_ADDR, KERNEL_ADDR, sf.sport, PORT, sf.snd_nxt, sf.rcv_nxt,
                             flags, options, payload)
        self.sock.send(self.dst_mac + self.src_mac + struct.pack("!H", ETH_P_IP) + packet)
        self.sent.append({"at": time.monotonic(), "sport": sf.sport, "what": what,
                          "len": len(payload)})
        sf.snd_nxt = (sf.snd_nxt + len(payload) + (1 if flags & (SYN | FIN) else 0)) \
            & 0xFFFFFFFF

    def expect(self, match, timeout_s: float) -> Segment | None:
        """The next segment from the kernel for which `match` is true, or None after
        `timeout_s`; every segment read is logged."""
        for seg in incoming(self.sock, time.monotonic() + timeout_s):
            if seg.sport != PORT:
                continue
            self.log.append(seg)
            if seg.flags & RST:
                raise RuntimeError(f"the kernel reset subflow {seg.dport}")
            if match(seg):
                return seg
        return None

    def must(self, match, timeout_s: float, what: str) -> Segment:
        seg = self.expect(match, timeout_s)
        if seg is None:
            raise RuntimeError(f"no {what} from the kernel in {timeout_s} s")
        return seg


def run_peer(args: argparse.Namespace) -> dict:
    peer = Peer(args.dev, bytes.fromhex(args.dst_mac.replace(":", "")),
                bytes.fromhex(args.src_mac.replace(":", "")))
    key_p = os.urandom(8)
    _, idsn_p = key_token_idsn(key_p)
    first = Subflow(sport=40001, iss=int.from_bytes(os.urandom(4), "big"))
    second = Subflow(sport=40002, iss=int.from_bytes(os.urandom(4), "big"))
    for sf in (first, second):
        sf.snd_nxt = sf.iss

    # 1. MP_CAPABLE on the first subflow
    peer.send(first, SYN, mp_capable(), what="syn")
    synack = peer.must(lambda s: s.dport == first.sport and s.flags & SYN, 5, "SYN/ACK")
    mpc = [o for o in synack.mptcp if o[2] >> 4 == 0]
    if not mpc or len(mpc[0]) < 12:
        raise RuntimeError("the kernel's SYN/ACK has no MP_CAPABLE key")
    key_k = mpc[0][4:12]
    token_k, idsn_k = key_token_idsn(key_k)
    first.rcv_nxt = (synack.seq + 1) & 0xFFFFFFFF
    peer.send(first, ACK, mp_capable([key_p, key_k]), what="mpc-ack")

    # 2. MP_JOIN: the second subflow
    nonce_p = os.urandom(4)
    peer.send(second, SYN, mp_join_syn(token_k, nonce_p), what="join-syn")
    jsynack = peer.must(lambda s: s.dport == second.sport and s.flags & SYN, 5,
                        "MP_JOIN SYN/ACK")
    mpj = [o for o in jsynack.mptcp if o[2] >> 4 == 1]
    if not mpj or len(mpj[0]) != 16:
        raise RuntimeError("the kernel's SYN/ACK to the join has no MP_JOIN")
    nonce_k = mpj[0][12:16]
    if join_hmac(key_k, key_p, nonce_k, nonce_p)[:8] != mpj[0][4:12]:
        raise RuntimeError("the kernel's MP_JOIN HMAC does not check")
    second.rcv_nxt = (jsynack.seq + 1) & 0xFFFFFFFF
    peer.send(second, ACK, mp_join_ack(join_hmac(key_p, key_k, nonce_p, nonce_k)),
              what="join-ack")
    peer.must(lambda s: s.dport == second.sport and s.flags & ACK and not s.flags & SYN, 5,
              "ACK of the join's third ACK")

    # 3. the whole stream on the first subflow, no DATA_FIN (scenario in-order: all but
    # the last mapping)
    stream = bytes((i * 7) & 0xFF for i in range(args.size))
    last = min(args.last, len(stream))
    held = len(stream) if args.scenario == "reinjection" else len(stream) - last
    dsn0, kernel_ack = idsn_p + 1, idsn_k + 1
    for off in range(0, held, MSS):
        chunk = stream[off:min(off + MSS, held)]
        peer.send(first, ACK | PSH, dss(kernel_ack, dsn0 + off, first.ssn, len(chunk)), chunk,
                  what="data")
        first.ssn += len(chunk)
    end = dsn0 + len(stream)  # the DATA_FIN's sequence number
    peer.must(lambda s: (data_ack_of(s.mptcp) or 0) == (dsn0 + held) & _mask(s.mptcp), 5,
              "data ACK of the data sent")
    held_acked_at = time.monotonic()

    # 4. the last mapping (again, in scenario reinjection) on the second subflow, with the
    # DATA_FIN; in segments of at most MSS bytes, each repeating the mapping (as a Linux
    # sender's TSO segments do)
    mapping = dss(kernel_ack, end - last, second.ssn, last + 1, True)
    reinjected_at = time.monotonic()
    for off in range(len(stream) - last, len(stream), MSS):
        chunk = stream[off:min(off + MSS, len(stream))]
        peer.send(second, ACK | PSH, mapping, chunk, what="last mapping+DATA_FIN")
    second.ssn += last

    def fin_acked(s: Segment) -> bool:
        ack = data_ack_of(s.mptcp)
        return ack is not None and ack == (end + 1) & _mask(s.mptcp)

    acked = peer.expect(fin_acked, args.wait_s)
    # 5. bare DATA_FINs with backoff while none is acknowledged
    wait = args.wait_s
    for _ in range(args.bare):
        if acked:
            break
        for sf in (first, second):
            peer.send(sf, ACK, dss(kernel_ack, end, 0, 1, True), what="bare DATA_FIN")
        wait *= 2
        acked = peer.expect(fin_acked, wait)
    return {
        "held_acked_at": held_acked_at,
        "reinjected_at": reinjected_at,
        "fin_acked_at": acked.at if acked else None,
        "fin_acked_on": ("first" if acked.dport == first.sport else "second")
        if acked else None,
        "bare_sent": sum(1 for s in peer.sent if s["what"] == "bare DATA_FIN"),
        "sent": peer.sent,
        # the data ACKs the kernel sent, relative to the DATA_FIN's sequence number
        # (1: the DATA_FIN is acknowledged)
        "data_acks": [{"at": s.at, "sport": s.dport, "flags": s.flags,
                       "data_ack_rel": data_ack_of(s.mptcp) - (end & _mask(s.mptcp))}
                      for s in peer.log if data_ack_of(s.mptcp) is not None],
    }


def _mask(opts: Sequence[bytes]) -> int:
    """The mask of the data ACK a segment's DSS carries: 64 or 32 bits."""
    for opt in opts:
        if len(opt) >= 4 and opt[2] >> 4 == 2 and opt[3] & DSS_ACK:
            return 0xFFFFFFFFFFFFFFFF if opt[3] & DSS_ACK64 else 0xFFFFFFFF
    return 0xFFFFFFFFFFFFFFFF


# --- the receiving application ----------------------------------------------------------

def receive(timeout_s: float) -> dict:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_MPTCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((KERNEL_ADDR, PORT))
    listener.listen(1)
    print(json.dumps({"event": "listening"}), flush=True)
    listener.settimeout(30)
    conn, _ = listener.accept()
    accepted_at = time.monotonic()
    deadline = accepted_at + timeout_s
    total, eof_at, last_data_at = 0, None, None
    while (left := deadline - time.monotonic()) > 0:
        conn.settimeout(left)
        try:
            chunk = conn.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            eof_at = time.monotonic()
            break
        total += len(chunk)
        last_data_at = time.monotonic()
    conn.close()
    listener.close()
    return {"accepted_at": accepted_at, "bytes": total, "last_data_at": last_data_at,
            "eof_at": eof_at}


# --- the set-up -------------------------------------------------------------------------

def sh(*argv: str, ns: str | None = None, check: bool = True) -> str:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    res = subprocess.run(cmd, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited {res.returncode}: {res.stderr.strip()}")
    return res.stdout


def mac_of(ns: str, dev: str) -> str:
    return Path(f"/sys/class/net/{dev}/address").read_text().strip() if ns is None else \
        sh("cat", f"/sys/class/net/{dev}/address", ns=ns).strip()


@contextlib.contextmanager
def veth_lab(ns_kernel: str, ns_peer: str, dev_kernel: str, dev_peer: str,
             kernel_addrs: Sequence[str], peer_addr: str,
             mptcp: Sequence[Sequence[str]]) -> Iterator[tuple[str, str]]:
    """Two namespaces joined by one veth pair: the kernel's side with `kernel_addrs` and
    the `ip mptcp` commands in `mptcp`, the peer's side with no address (a permanent
    neighbour entry for `peer_addr` on the kernel's side). Yields (kernel's MAC, peer's
    MAC); the namespaces are deleted on the way out."""
    for ns in (ns_kernel, ns_peer):
        sh("ip", "netns", "del", ns, check=False)
    try:
        for ns in (ns_kernel, ns_peer):
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "link", "add", dev_kernel, "netns", ns_kernel, "type", "veth",
           "peer", "name", dev_peer, "netns", ns_peer)
        for ns, dev in ((ns_kernel, dev_kernel), (ns_peer, dev_peer)):
            sh("sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1", ns=ns)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        for addr in kernel_addrs:
            sh("ip", "-n", ns_kernel, "addr", "add", f"{addr}/24", "dev", dev_kernel)
        for cmd in mptcp:
            sh("ip", "-n", ns_kernel, "mptcp", *cmd)
        kernel_mac, peer_mac = mac_of(ns_kernel, dev_kernel), mac_of(ns_peer, dev_peer)
        sh("ip", "-n", ns_kernel, "neigh", "replace", peer_addr, "lladdr", peer_mac,
           "dev", dev_kernel, "nud", "permanent")
        yield kernel_mac, peer_mac
    finally:
        for ns in (ns_kernel, ns_peer):
            sh("ip", "netns", "del", ns, check=False)


def replay_lab() -> contextlib.AbstractContextManager[tuple[str, str]]:
    """This replay's namespaces: the kernel's listener side and the crafted peer."""
    return veth_lab(NS_KERNEL, NS_PEER, DEV_KERNEL, DEV_PEER, [KERNEL_ADDR], PEER_ADDR,
                    [("limits", "set", "subflows", "4", "add_addr_accepted", "0")])


@contextlib.contextmanager
def capture(pcap: Path | None) -> Iterator[None]:
    """tcpdump on the kernel's interface into `pcap` (nothing when None)."""
    if pcap is None:
        yield
        return
    dump = subprocess.Popen(["ip", "netns", "exec", NS_KERNEL, "tcpdump", "-i", DEV_KERNEL,
                             "-U", "-s", "200", "-w", str(pcap), "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        dump.stderr.readline()  # "listening on ...": the capture runs
        yield
    finally:
        dump.terminate()
        dump.wait()


def run(scenario: str, size: int, last: int, bare: int, wait_s: float, timeout_s: float,
        pcap: Path | None = None) -> dict:
    me = [sys.executable, str(Path(__file__).resolve())]
    with replay_lab() as (kernel_mac, peer_mac), capture(pcap):
        receiver = subprocess.Popen(["ip", "netns", "exec", NS_KERNEL, *me, "receive",
                                     "--timeout-s", str(timeout_s)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = receiver.stdout.readline()
            if json.loads(line or "{}").get("event") != "listening":
                raise RuntimeError(f"receiver did not listen: {receiver.stderr.read()}")
            peer = subprocess.run(["ip", "netns", "exec", NS_PEER, *me, "peer",
                                   "--dev", DEV_PEER, "--dst-mac", kernel_mac,
                                   "--src-mac", peer_mac, "--scenario", scenario,
                                   "--size", str(size),
                                   "--last", str(last), "--bare", str(bare),
                                   "--wait-s", str(wait_s)],
                                  capture_output=True, text=True, timeout=600)
            if peer.returncode != 0:
                raise RuntimeError(f"peer exited {peer.returncode}: {peer.stderr[-2000:]}")
            out, err = receiver.communicate(timeout=timeout_s + 60)
            if receiver.returncode != 0:
                raise RuntimeError(f"receiver exited {receiver.returncode}: {err[-2000:]}")
        finally:
            if receiver.poll() is None:
                receiver.kill()
                receiver.wait()
    got, played = json.loads(out), json.loads(peer.stdout)
    t0 = played["reinjected_at"]

    def rel(t: float | None) -> float | None:
        return None if t is None else round(t - t0, 6)

    return {
        "kernel_release": os.uname().release,
        "scenario": scenario, "size": size, "last": last,
        "bytes_received": got["bytes"],
        "eof": got["eof_at"] is not None,
        # seconds after the last mapping was sent (negative: before)
        "eof_after_s": rel(got["eof_at"]),
        # the data sent before the last mapping (all of it in scenario reinjection) was
        # acknowledged at the data level this long after it
        "held_acked_after_s": rel(played["held_acked_at"]),
        "fin_acked_after_s": rel(played["fin_acked_at"]),
        "fin_acked_on": played["fin_acked_on"],
        "bare_data_fins_sent": played["bare_sent"],
        "data_acks": [{**a, "at": rel(a["at"])} for a in played["data_acks"]],
        "sent": [{**s, "at": rel(s["at"])} for s in played["sent"]],
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("run")
    r.add_argument("--scenario", choices=SCENARIOS, default="reinjection",
                   help="reinjection: the last mapping with the DATA_FIN repeats data the "
                   "receiver holds; in-order: it carries new data (the control)")
    r.add_argument("--size", type=int, default=20_000, help="bytes in the stream")
    r.add_argument("--last", type=int, default=2_152,
                   help="bytes of the last mapping, sent again with the DATA_FIN")
    r.add_argument("--bare", type=int, default=4,
                   help="rounds of bare DATA_FINs (backoff doubling from --wait-s)")
    r.add_argument("--wait-s", type=float, default=1.0,
                   help="wait for the DATA_FIN's ACK after the last mapping")
    r.add_argument("--timeout-s", type=float, default=60.0,
                   help="the receiving application's deadline after accept()")
    r.add_argument("--pcap", type=Path, help="capture the kernel's interface into this file")
    rc = sub.add_parser("receive")
    rc.add_argument("--timeout-s", type=float, required=True)
    pe = sub.add_parser("peer")
    pe.add_argument("--dev", required=True)
    pe.add_argument("--dst-mac", required=True)
    pe.add_argument("--src-mac", required=True)
    pe.add_argument("--scenario", choices=SCENARIOS, required=True)
    pe.add_argument("--size", type=int, required=True)
    pe.add_argument("--last", type=int, required=True)
    pe.add_argument("--bare", type=int, required=True)
    pe.add_argument("--wait-s", type=float, required=True)
    args = p.parse_args(argv)
    if args.mode == "run":
        result = run(args.scenario, args.size, args.last, args.bare, args.wait_s,
                     args.timeout_s, args.pcap)
    elif args.mode == "receive":
        result = receive(args.timeout_s)
    else:
        result = run_peer(args)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
