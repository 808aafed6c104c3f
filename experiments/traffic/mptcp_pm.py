"""MPTCP's userspace path manager, spoken over generic netlink (family `mptcp_pm`).

iproute2 6.1 has no `ip mptcp subflow` command, so the transfer tool sends the two
messages it needs itself: MPTCP_PM_CMD_SUBFLOW_CREATE (a subflow from a chosen local
address *and port*, which the in-kernel path manager cannot do) and
MPTCP_PM_CMD_SUBFLOW_DESTROY. Both exist with these attributes from Linux 5.19 on, so
on the host kernel (6.18) and the lab kernel (6.12) alike. The namespace must run the
userspace path manager (`net.mptcp.pm_type=1`); a connection accepts joins only while
some socket of its namespace listens to the `mptcp_pm_events` group
(`mptcp_userspace_pm_active`), which `EventDrain` provides for the server side.

Message encoding and reply matching are pure (`subflow_message`, `exchange`: each
request is answered by the acknowledgement carrying its own sequence number, with the
kernel's reason when it refuses); `PathManager` owns the socket. It asks for extended
acknowledgements (NETLINK_EXT_ACK, Linux 4.12 on: a refusal carries the kernel's reason)
and capped ones (NETLINK_CAP_ACK, 4.3 on: the request is not echoed back); a kernel that
refuses either is done without (`ack_options`): replies are read either way, and a
refusal without a reason then says why it has none.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

NETLINK_GENERIC = 16
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID = 1
CTRL_ATTR_FAMILY_NAME = 2
CTRL_ATTR_MCAST_GROUPS = 7
CTRL_ATTR_MCAST_GRP_NAME = 1
CTRL_ATTR_MCAST_GRP_ID = 2
NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLMSG_ERROR = 0x2
NLMSG_HDRLEN = 16
NLA_F_NESTED = 0x8000
NLM_F_CAPPED = 0x100  # in an NLMSG_ERROR: the request's payload is not echoed
NLM_F_ACK_TLVS = 0x200  # in an NLMSG_ERROR: extended-ack attributes follow
NLMSGERR_ATTR_MSG = 1  # the kernel's reason, a NUL-terminated string
SOL_NETLINK = 270
NETLINK_ADD_MEMBERSHIP = 1
NETLINK_CAP_ACK = 10
NETLINK_EXT_ACK = 11

FAMILY = "mptcp_pm"
EVENTS_GROUP = "mptcp_pm_events"
CMD_SUBFLOW_CREATE = 10
CMD_SUBFLOW_DESTROY = 11
ATTR_ADDR = 1
ATTR_TOKEN = 4
ATTR_ADDR_REMOTE = 6
ADDR_ATTR_FAMILY = 1
ADDR_ATTR_ID = 2
ADDR_ATTR_ADDR4 = 3
ADDR_ATTR_PORT = 5

SOL_MPTCP = 284
MPTCP_INFO = 1
MPTCP_INFO_TOKEN_OFFSET = 12  # struct mptcp_info: six __u8, __u32 flags, __u32 token


REPLY_WAIT_S = 10.0  # the kernel answers at once; a socket that never does is a fault


class PathManagerError(OSError):
    """The kernel refused a path-manager request (message says which and why)."""


def _align(n: int) -> int:
    return (n + 3) & ~3


def nla(kind: int, payload: bytes) -> bytes:
    """One netlink attribute, padded to 4 bytes."""
    head = struct.pack("=HH", 4 + len(payload), kind)
    return head + payload + bytes(_align(len(payload)) - len(payload))


def endpoint_attr(kind: int, address: str, port: int, local_id: int | None) -> bytes:
    inner = nla(ADDR_ATTR_FAMILY, struct.pack("=H", socket.AF_INET))
    if local_id is not None:
        inner += nla(ADDR_ATTR_ID, struct.pack("=B", local_id))
    inner += nla(ADDR_ATTR_ADDR4, ipaddress.IPv4Address(address).packed)
    inner += nla(ADDR_ATTR_PORT, struct.pack("=H", port))
    return nla(kind | NLA_F_NESTED, inner)


def genl_message(family_id: int, cmd: int, attrs: bytes, seq: int, version: int = 1) -> bytes:
    body = struct.pack("=BBH", cmd, version, 0) + attrs
    return struct.pack("=IHHII", 16 + len(body), family_id, NLM_F_REQUEST | NLM_F_ACK, seq,
                       0) + body


def subflow_message(family_id: int, cmd: int, token: int, local: tuple[str, int],
                    local_id: int | None, remote: tuple[str, int], seq: int) -> bytes:
    """SUBFLOW_CREATE / SUBFLOW_DESTROY for connection `token` from local (addr, port)
    to remote (addr, port); the local id (1..255) names the address in the connection."""
    attrs = nla(ATTR_TOKEN, struct.pack("=I", token))
    attrs += endpoint_attr(ATTR_ADDR, *local, local_id)
    attrs += endpoint_attr(ATTR_ADDR_REMOTE, *remote, None)
    return genl_message(family_id, cmd, attrs, seq)


def parse_attrs(data: bytes) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    pos = 0
    while pos + 4 <= len(data):
        length, kind = struct.unpack_from("=HH", data, pos)
        if length < 4:
            break
        out[kind & ~NLA_F_NESTED] = data[pos + 4 : pos + length]
        pos += _align(length)
    return out


def ack_error(reply: bytes) -> int:
    """The errno of an NLMSG_ERROR reply (0 for a plain ACK)."""
    _, kind = struct.unpack_from("=IH", reply, 0)
    if kind != NLMSG_ERROR:
        return 0
    return -struct.unpack_from("=i", reply, 16)[0]


def ack_reason(reply: bytes) -> str:
    """The kernel's reason in an NLMSG_ERROR reply's extended ack ('' when it gave none):
    the error code, the request's header (and its payload unless NLM_F_CAPPED), then
    attributes."""
    length, kind, flags = struct.unpack_from("=IHH", reply, 0)
    if kind != NLMSG_ERROR or not flags & NLM_F_ACK_TLVS or len(reply) < 36:
        return ""
    start = 36 if flags & NLM_F_CAPPED else 20 + _align(struct.unpack_from("=I", reply, 20)[0])
    raw = parse_attrs(reply[start:min(length, len(reply))]).get(NLMSGERR_ATTR_MSG, b"")
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


# (option, its name, the first Linux with it, what a socket without it gets)
ACK_OPTIONS = ((NETLINK_EXT_ACK, "NETLINK_EXT_ACK", "4.12", "no reason in a refusal"),
               (NETLINK_CAP_ACK, "NETLINK_CAP_ACK", "4.3", "the request echoed in a refusal"))


def ack_options(setsockopt: Callable[[int, int, int], None]) -> dict[int, str]:
    """Turn on each of ACK_OPTIONS with `setsockopt` (a netlink socket's); those the
    kernel refuses are done without: {option: why, for a message} of the refused ones.
    `ack_reason` and `exchange` read replies with or without them."""
    refused = {}
    for option, name, since, without in ACK_OPTIONS:
        try:
            setsockopt(SOL_NETLINK, option, 1)
        except OSError as exc:
            said = os.strerror(exc.errno) if exc.errno else str(exc)
            refused[option] = (f"this kernel refused {name} ({said}; Linux {since} on has "
                               f"it), so {without}")
    return refused


class Datagrams(Protocol):
    """What `exchange` needs of a netlink socket."""

    def send(self, data: bytes, /) -> int: ...

    def recv(self, bufsize: int, /) -> bytes: ...


def split_messages(datagram: bytes) -> list[bytes]:
    """The netlink messages of one datagram, in order (one datagram may hold several)."""
    out = []
    pos = 0
    while pos + NLMSG_HDRLEN <= len(datagram):
        length = struct.unpack_from("=I", datagram, pos)[0]
        if length < NLMSG_HDRLEN or pos + length > len(datagram):
            break
        out.append(datagram[pos : pos + length])
        pos += _align(length)
    return out


def exchange(sock: Datagrams, request: bytes) -> tuple[list[bytes], bytes]:
    """Send one request that asks for an acknowledgement (NLM_F_ACK) and read up to that
    acknowledgement: (the replies before it, the acknowledgement itself, an NLMSG_ERROR
    whose code is 0 on success).

    A message is this request's only if it carries the request's sequence number;
    others are skipped. The kernel answers a request for data (CTRL_CMD_GETFAMILY) with
    the data *and* an acknowledgement, so reading one message per request leaves that
    acknowledgement for the next request to take as its own answer, and every later
    request then reads its predecessor's: a subflow refused (ENOTCONN before the
    connection is fully established) looks opened, and the request after it fails with
    the refused one's errno."""
    seq = struct.unpack_from("=I", request, 8)[0]
    sock.send(request)
    replies: list[bytes] = []
    while True:
        datagram = sock.recv(65536)
        if not datagram:
            raise PathManagerError(errno.EPROTO, "netlink socket closed before the "
                                   "acknowledgement")
        for message in split_messages(datagram):
            _, kind, _, seen = struct.unpack_from("=IHHI", message, 0)
            if seen != seq:
                continue
            if kind == NLMSG_ERROR:
                return replies, message
            replies.append(message)


def connection_token(sock: socket.socket) -> int:
    """The local token of an MPTCP socket (MPTCP_INFO), naming it to the path manager."""
    info = sock.getsockopt(SOL_MPTCP, MPTCP_INFO, 16)
    if len(info) < MPTCP_INFO_TOKEN_OFFSET + 4:
        raise PathManagerError(errno.EPROTO, "MPTCP_INFO too short: did MPTCP fall back?")
    return struct.unpack_from("=I", info, MPTCP_INFO_TOKEN_OFFSET)[0]


@dataclass
class _Family:
    id: int
    groups: dict[str, int]


def _resolve(sock: Datagrams) -> _Family:
    name = FAMILY.encode() + b"\0"
    replies, ack = exchange(sock, genl_message(GENL_ID_CTRL, CTRL_CMD_GETFAMILY,
                                               nla(CTRL_ATTR_FAMILY_NAME, name), 1,
                                               version=1))
    err = ack_error(ack) or (0 if replies else errno.ENOENT)
    if err:
        raise PathManagerError(err, f"generic netlink family {FAMILY!r} not found "
                               f"({os.strerror(err)}): is MPTCP built into this kernel?")
    attrs = parse_attrs(replies[0][20:])
    groups: dict[str, int] = {}
    raw = attrs.get(CTRL_ATTR_MCAST_GROUPS, b"")
    for grp in parse_attrs(raw).values():
        g = parse_attrs(grp)
        gname = g.get(CTRL_ATTR_MCAST_GRP_NAME, b"").rstrip(b"\0").decode()
        if CTRL_ATTR_MCAST_GRP_ID in g:
            groups[gname] = struct.unpack("=I", g[CTRL_ATTR_MCAST_GRP_ID])[0]
    return _Family(struct.unpack("=H", attrs[CTRL_ATTR_FAMILY_ID][:2])[0], groups)


class PathManager:
    """Requests to this namespace's userspace path manager (one netlink socket)."""

    def __init__(self, sock: Datagrams | None = None,
                 refused: dict[int, str] | None = None) -> None:
        """`sock`: a netlink socket to use instead of a new one, `refused`: the
        acknowledgement options its kernel refused (`ack_options`; tests)."""
        self.refused = dict(refused or {})
        if sock is None:
            own = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
            own.bind((0, 0))
            own.settimeout(REPLY_WAIT_S)
            # errors carry the kernel's reason, without the request echoed back
            self.refused = ack_options(own.setsockopt)
            sock = own
        self.sock = sock
        self.family = _resolve(self.sock)
        self._seq = 1
        self._lock = threading.Lock()

    def close(self) -> None:
        if isinstance(self.sock, socket.socket):
            self.sock.close()

    def _request(self, cmd: int, token: int, local: tuple[str, int], local_id: int | None,
                 remote: tuple[str, int]) -> None:
        with self._lock:
            self._seq += 1
            _, reply = exchange(self.sock, subflow_message(self.family.id, cmd, token,
                                                           local, local_id, remote,
                                                           self._seq))
        err = ack_error(reply)
        if err:
            what = "create" if cmd == CMD_SUBFLOW_CREATE else "destroy"
            reason = ack_reason(reply) or self.refused.get(NETLINK_EXT_ACK, "")
            raise PathManagerError(err, f"subflow {what} {local[0]}:{local[1]} "
                                   f"(local id {local_id}) -> {remote[0]}:{remote[1]} "
                                   f"(token {token:#x}): {os.strerror(err)}"
                                   + (f" ({reason})" if reason else ""))

    def create_subflow(self, token: int, local: tuple[str, int], local_id: int,
                       remote: tuple[str, int]) -> None:
        self._request(CMD_SUBFLOW_CREATE, token, local, local_id, remote)

class EventDrain:
    """Listens to `mptcp_pm_events` and discards them: while it runs, connections of
    the namespace that use the userspace path manager accept MP_JOINs."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
        self.sock.bind((0, 0))
        family = _resolve(self.sock)
        group = family.groups.get(EVENTS_GROUP)
        if group is None:
            raise PathManagerError(errno.ENOENT, f"no {EVENTS_GROUP!r} group in "
                                   f"{FAMILY!r} (groups: {sorted(family.groups)})")
        self.sock.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, group)
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while True:
            try:
                if not self.sock.recv(65536):
                    return
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:  # events overflowed: nothing is lost to us
                    continue
                return
