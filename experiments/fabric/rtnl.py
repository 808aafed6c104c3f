"""rtnetlink from this process, inside a node's network namespace: the messages of a dump,
their attributes, and a node's queueing disciplines and classes as `tc -j` lists them.

Two readers use it: the fidelity monitor (each egress's root qdisc counters, many times a
run) and the check between two runs on one network (every qdisc and class of a node, in
place of a `tc -j -batch` process per node: `tc_listing`). Layouts from linux/netlink.h,
rtnetlink.h and pkt_sched.h.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import socket
import struct
from collections.abc import Iterator

NLMSG_ERROR, NLMSG_DONE = 2, 3
RTM_NEWQDISC, RTM_GETQDISC = 36, 38
RTM_NEWTCLASS, RTM_GETTCLASS = 40, 42
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_HDR = struct.Struct("=IHHII")
TCMSG = struct.Struct("=BBHiIII")  # family, pads, ifindex, handle, parent, info
RTATTR = struct.Struct("=HH")
TCA_KIND = 1
# what a dump reports about traffic, not configuration: stats, xstats, stats2, pad
TCA_COUNTERS = (3, 4, 7, 9)
TC_H_ROOT = 0xFFFFFFFF
CLONE_NEWNET = 0x40000000


def nlmsg_align(n: int) -> int:
    return (n + 3) & ~3


def attributes(buf: bytes, start: int, end: int) -> dict[int, bytes]:
    """Attribute type (without the nested/byte-order flags) -> payload, from start to end."""
    out = {}
    while start + RTATTR.size <= end:
        length, kind = RTATTR.unpack_from(buf, start)
        if length < RTATTR.size:
            break
        out[kind & 0x3FFF] = buf[start + RTATTR.size:start + length]
        start += nlmsg_align(length)
    return out


def dump_request(kind: int, seq: int, ifindex: int = 0) -> bytes:
    """A dump request for a tcmsg family (qdiscs, classes): of one interface or all (0)."""
    body = TCMSG.pack(0, 0, 0, ifindex, 0, 0, 0)
    return NLMSG_HDR.pack(NLMSG_HDR.size + len(body), kind, NLM_F_REQUEST | NLM_F_DUMP,
                          seq, 0) + body


def messages(buf: bytes) -> tuple[list[tuple[int, bytes]], bool]:
    """One datagram of a dump -> ([(message type, message without its header)], done).
    OSError for an error message."""
    out: list[tuple[int, bytes]] = []
    off = 0
    while off + NLMSG_HDR.size <= len(buf):
        length, kind, _, _, _ = NLMSG_HDR.unpack_from(buf, off)
        if length < NLMSG_HDR.size:
            break
        if kind == NLMSG_DONE:
            return out, True
        if kind == NLMSG_ERROR:
            err = -struct.unpack_from("=i", buf, off + NLMSG_HDR.size)[0]
            raise OSError(err, f"netlink dump: {os.strerror(err)}")
        out.append((kind, buf[off + NLMSG_HDR.size:off + length]))
        off += nlmsg_align(length)
    return out, False


def _handle(value: int) -> str:
    """A tc handle as tc prints it: 'major:minor' in hex, 'major:' for minor 0, 'root'."""
    if value == TC_H_ROOT:
        return "root"
    major, minor = value >> 16, value & 0xFFFF
    return f"{major:x}:" + (f"{minor:x}" if minor else "")


def tc_entry(kind: int, body: bytes, names: dict[int, str]) -> dict[str, object]:
    """One qdisc or class message as a comparable record: interface, handle, parent,
    kind and every attribute but the counters (hex). A qdisc's `info` is its reference
    count (not configuration), a class's the handle of its leaf qdisc."""
    _, _, _, ifindex, handle, parent, info = TCMSG.unpack_from(body, 0)
    attrs = attributes(body, TCMSG.size, len(body))
    entry: dict[str, object] = {
        "dev": names.get(ifindex, str(ifindex)), "handle": _handle(handle),
        "parent": _handle(parent), "kind": attrs.get(TCA_KIND, b"").rstrip(b"\0").decode(),
        "attrs": {str(k): v.hex() for k, v in sorted(attrs.items())
                  if k not in TCA_COUNTERS and k != TCA_KIND}}
    if kind == RTM_NEWTCLASS:
        entry["leaf"] = _handle(info) if info else None
    return entry


def tc_listing(qdiscs: list[tuple[int, bytes]], classes: dict[str, list[tuple[int, bytes]]],
               names: dict[int, str]) -> str:
    """What the snapshot's tc section holds (netstate.parse_snapshot): one JSON list of
    every qdisc, then one of each interface's classes, in the given interface order."""
    lines = [json.dumps([tc_entry(k, b, names) for k, b in qdiscs if k == RTM_NEWQDISC])]
    for msgs in classes.values():
        lines.append(json.dumps([tc_entry(k, b, names) for k, b in msgs if k == RTM_NEWTCLASS]))
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def inside(pid: int) -> Iterator[None]:
    """This thread in the network namespace of process `pid`, then back (OSError if not)."""
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            if libc.setns(target, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"cannot enter the namespace of process {pid}: "
                                   f"{os.strerror(err)}")
            try:
                yield
            finally:
                if libc.setns(home, CLONE_NEWNET) != 0:  # never stay elsewhere
                    err = ctypes.get_errno()
                    raise OSError(err, f"cannot return to this process's namespace: "
                                       f"{os.strerror(err)}")
        finally:
            os.close(target)
    finally:
        os.close(home)


class RouteSocket:
    """An rtnetlink socket opened inside the namespace of process `pid` (it stays bound to
    that namespace), with that namespace's interface names. Use from one thread."""

    def __init__(self, pid: int) -> None:
        with inside(pid):
            self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
            self.names = dict(socket.if_nameindex())
        self.sock.bind((0, 0))
        self.seq = 0

    def dump(self, kind: int, ifindex: int = 0) -> list[tuple[int, bytes]]:
        self.seq += 1
        self.sock.send(dump_request(kind, self.seq, ifindex))
        out: list[tuple[int, bytes]] = []
        done = False
        while not done:
            part, done = messages(self.sock.recv(1 << 16))
            out += part
        return out

    def tc(self, intfs: list[str]) -> str:
        """The node's qdiscs and the classes of `intfs` (tc_listing)."""
        index = {name: i for i, name in self.names.items()}
        classes = {i: self.dump(RTM_GETTCLASS, index[i]) if i in index else [] for i in intfs}
        return tc_listing(self.dump(RTM_GETQDISC), classes, self.names)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RouteSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
