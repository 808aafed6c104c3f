"""Can every host reach every other? ICMP echo from each host's namespace, in-process.

A fresh network is checked before its first run: every ordered host pair must answer a
ping. Running `ping` once per pair costs a process start per pair (240 at k=4, 16,256 at
k=8), and in the lab kernel (User-Mode Linux) a process start costs tens of
milliseconds of host time. Here the runner opens one raw ICMP socket in each host's
namespace (a thread enters it with setns(2) just to open the socket, as the fidelity
monitor does) and sends the echo requests itself, in rounds: in round r host i pings
host (i + r) mod n, so every host sends one request and receives one in each round and
no queue sees a burst. A pair that got no reply is asked again, up to RETRIES times
(a lossy link may lose one echo), each time waiting `timeout_s`.

Pure parts first (`rounds`, `checksum`, `echo_request`, `parse_reply`); `ping_pairs`
sends and receives.
"""

from __future__ import annotations

import ctypes
import os
import select
import socket
import struct
import time
from collections.abc import Mapping

RETRIES = 5
ICMP_ECHO_REPLY, ICMP_ECHO_REQUEST = 0, 8
CLONE_NEWNET = 0x40000000


def rounds(hosts: list[str]) -> list[list[tuple[str, str]]]:
    """Every ordered pair of `hosts` once, in n - 1 rounds; in each round every host is
    the source of one pair and the destination of one."""
    n = len(hosts)
    return [[(hosts[i], hosts[(i + r) % n]) for i in range(n)] for r in range(1, n)]


def checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of `data`."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def echo_request(ident: int, seq: int, payload: bytes = b"pathdiv-reach") -> bytes:
    """An ICMP echo request (type 8) with its checksum."""
    head = struct.pack("!BBHHH", ICMP_ECHO_REQUEST, 0, 0, ident & 0xFFFF, seq & 0xFFFF)
    total = checksum(head + payload)
    return struct.pack("!BBHHH", ICMP_ECHO_REQUEST, 0, total, ident & 0xFFFF,
                       seq & 0xFFFF) + payload


def parse_reply(packet: bytes) -> tuple[str, int, int] | None:
    """(source address, identifier, sequence) of an IPv4 packet carrying an ICMP echo
    reply (what a raw ICMP socket reads), None for anything else."""
    if len(packet) < 20 or packet[0] >> 4 != 4:
        return None
    start = (packet[0] & 0x0F) * 4
    if len(packet) < start + 8 or packet[start] != ICMP_ECHO_REPLY:
        return None
    ident, seq = struct.unpack_from("!HH", packet, start + 4)
    return socket.inet_ntoa(packet[12:16]), ident, seq


# ---- side effects ----------------------------------------------------------------------
def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def icmp_socket(pid: int) -> socket.socket:
    """A raw ICMP socket in the network namespace of process `pid` (this thread enters
    the namespace to open it and returns; the socket stays in that namespace)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        _setns(target)
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        finally:
            _setns(own)
    finally:
        os.close(own)
        os.close(target)
    sock.setblocking(False)
    return sock


def ping_pairs(pids: Mapping[str, int], addresses: Mapping[str, str],
               timeout_s: float = 2.0) -> list[tuple[str, str]]:
    """Ping every ordered pair of the hosts in `pids` (host -> a process in its
    namespace; `addresses`: host -> the address it answers on); the pairs with no reply
    after RETRIES more tries."""
    hosts = sorted(pids)
    socks = {h: icmp_socket(pids[h]) for h in hosts}
    owner = {addresses[h]: h for h in hosts}
    ident = os.getpid() & 0xFFFF
    poller = select.poll()
    by_fd = {}
    for h, s in socks.items():
        poller.register(s, select.POLLIN)
        by_fd[s.fileno()] = h
    seq_of: dict[tuple[str, str], int] = {}
    try:
        batches = rounds(hosts)  # first every pair once, round by round
        for _ in range(1 + RETRIES):
            missing: list[tuple[str, str]] = []
            for batch in batches:
                for src, dst in batch:
                    seq = seq_of.setdefault((src, dst), len(seq_of) + 1)
                    socks[src].sendto(echo_request(ident, seq), (addresses[dst], 0))
                missing += _collect(poller, socks, by_fd, owner, ident, seq_of, batch,
                                    timeout_s)
            if not missing:
                return []
            batches = [missing]  # then the pairs that did not answer, all at once
        return sorted(missing)
    finally:
        for s in socks.values():
            s.close()


def _collect(poller: select.poll, socks: Mapping[str, socket.socket],
             by_fd: Mapping[int, str], owner: Mapping[str, str], ident: int,
             seq_of: Mapping[tuple[str, str], int], batch: list[tuple[str, str]],
             timeout_s: float) -> list[tuple[str, str]]:
    """Read replies until every pair of `batch` answered or `timeout_s` passed; the
    pairs that did not."""
    want = set(batch)
    deadline = time.monotonic() + timeout_s
    while want:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        for fd, _ in poller.poll(left * 1000):
            src = by_fd[fd]
            while True:
                try:
                    packet = socks[src].recv(2048)
                except BlockingIOError:
                    break
                reply = parse_reply(packet)
                if reply is None or reply[1] != ident or reply[0] not in owner:
                    continue
                pair = (src, owner[reply[0]])
                if pair in want and seq_of.get(pair) == reply[2]:
                    want.discard(pair)
    return sorted(want)
