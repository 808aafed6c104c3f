"""The userspace path manager's requests are each answered by their own reply.

The kernel answers a request for data (CTRL_CMD_GETFAMILY, sent with NLM_F_ACK) with the
data and then an acknowledgement. Reading one message per request left that
acknowledgement for the first SUBFLOW_CREATE, and from there every create read the
answer to the one before it: in seed 004's runs with subflows joined before data, the
first extra subflow (refused with ENOTCONN: the connection was not fully established)
looked opened, the retries of the next one opened it twice (EADDRINUSE), and a later
create failed with EINVAL ("did not match address and id"), on disjoint paths 2 subflows
ran as 1 and 4 as 3. `FakeKernel` answers as the kernel does.
"""

from __future__ import annotations

import errno
import struct
from collections import deque

import pytest

from pathdiv.experiments.traffic import mptcp_pm as pm

FAMILY_ID = 0x1F


def error_message(err: int, request: bytes, reason: str = "", capped: bool = True) -> bytes:
    """An NLMSG_ERROR as Linux sends it with NETLINK_EXT_ACK and NETLINK_CAP_ACK (without
    NETLINK_CAP_ACK, `capped=False`: the whole request echoed)."""
    _, _, _, seq, port = struct.unpack_from("=IHHII", request, 0)
    flags = (pm.NLM_F_CAPPED if capped else 0) | (pm.NLM_F_ACK_TLVS if reason else 0)
    tlvs = pm.nla(pm.NLMSGERR_ATTR_MSG, reason.encode() + b"\0") if reason else b""
    echoed = request[:16] if capped else request + bytes(-len(request) % 4)
    body = struct.pack("=i", -err) + echoed + tlvs
    return struct.pack("=IHHII", 16 + len(body), pm.NLMSG_ERROR, flags, seq, port) + body


class FakeKernel:
    """A generic netlink socket: GETFAMILY gets the family and an acknowledgement (two
    datagrams); each SUBFLOW_CREATE gets the next scripted (errno, reason), 0 = done."""

    def __init__(self, creates: list[tuple[int, str]]) -> None:
        self.creates = deque(creates)
        self.queue: deque[bytes] = deque()

    def send(self, data: bytes, /) -> int:
        _, kind, _, seq, _ = struct.unpack_from("=IHHII", data, 0)
        err, reason = 0, ""
        if kind == pm.GENL_ID_CTRL:
            attrs = pm.nla(pm.CTRL_ATTR_FAMILY_ID, struct.pack("=H", FAMILY_ID))
            attrs += pm.nla(pm.CTRL_ATTR_FAMILY_NAME, pm.FAMILY.encode() + b"\0")
            body = struct.pack("=BBH", 1, 2, 0) + attrs
            self.queue.append(struct.pack("=IHHII", 20 + len(attrs), pm.GENL_ID_CTRL, 0,
                                          seq, 0) + body)
        else:
            err, reason = self.creates.popleft()
        self.queue.append(error_message(err, data, reason))
        return len(data)

    def recv(self, bufsize: int, /) -> bytes:
        return self.queue.popleft()


def create(manager: pm.PathManager, n: int) -> None:
    manager.create_subflow(0xD493BC4B, (f"10.0.0.{2 + 32 * n}", 24000 + n), n,
                           ("10.1.0.2", 8080))


def test_each_create_gets_its_own_answer_after_the_family_lookup():
    kernel = FakeKernel([(errno.ENOTCONN, ""), (0, ""),
                         (errno.EINVAL, "did not match address and id"), (0, "")])
    manager = pm.PathManager(sock=kernel)
    assert manager.family.id == FAMILY_ID
    # the first create is refused, and says so (not the lookup's acknowledgement) ...
    with pytest.raises(pm.PathManagerError) as refused:
        create(manager, 1)
    assert refused.value.errno == errno.ENOTCONN
    create(manager, 1)  # ... its retry is done
    with pytest.raises(pm.PathManagerError) as invalid:
        create(manager, 2)
    # the kernel's reason and the local id are in the message
    assert invalid.value.errno == errno.EINVAL
    assert "did not match address and id" in str(invalid.value)
    assert "local id 2" in str(invalid.value)
    create(manager, 3)
    assert not kernel.queue  # every answer was read, none is left for a later request


def test_messages_of_other_requests_are_skipped():
    request = pm.subflow_message(FAMILY_ID, pm.CMD_SUBFLOW_CREATE, 7, ("10.0.0.2", 1),
                                 1, ("10.1.0.2", 8080), seq=5)
    earlier = pm.subflow_message(FAMILY_ID, pm.CMD_SUBFLOW_CREATE, 7, ("10.0.0.2", 1),
                                 1, ("10.1.0.2", 8080), seq=4)
    stale, mine = error_message(0, earlier), error_message(errno.EADDRINUSE, request)
    sock = FakeKernel([])
    sock.send = lambda data, /: len(data)  # type: ignore[method-assign]
    sock.queue.extend([stale + mine])  # two messages in one datagram, the stale one first
    replies, ack = pm.exchange(sock, request)
    assert replies == [] and pm.ack_error(ack) == errno.EADDRINUSE
    assert pm.split_messages(stale + mine) == [stale, mine]


def test_a_reason_is_read_only_where_the_kernel_gave_one():
    request = pm.genl_message(FAMILY_ID, pm.CMD_SUBFLOW_CREATE, b"", seq=3)
    assert pm.ack_reason(error_message(errno.EINVAL, request, "invalid token")) == \
        "invalid token"
    assert pm.ack_reason(error_message(errno.EINVAL, request)) == ""
    assert pm.ack_reason(error_message(0, request)) == ""


def test_a_kernel_without_the_acknowledgement_options_is_done_without_and_said():
    """Before Linux 4.12 NETLINK_EXT_ACK is refused (ENOPROTOOPT), before 4.3
    NETLINK_CAP_ACK too: the path manager works without them, replies are read the same
    (a reason after an echoed request), and a refusal without a reason says why."""
    asked = []

    def old_kernel(level: int, option: int, value: int) -> None:
        asked.append(option)
        if option == pm.NETLINK_EXT_ACK:
            raise OSError(errno.ENOPROTOOPT, "Protocol not available")

    refused = pm.ack_options(old_kernel)
    assert asked == [pm.NETLINK_EXT_ACK, pm.NETLINK_CAP_ACK]
    assert list(refused) == [pm.NETLINK_EXT_ACK]
    assert refused[pm.NETLINK_EXT_ACK] == (
        "this kernel refused NETLINK_EXT_ACK (Protocol not available; Linux 4.12 on has "
        "it), so no reason in a refusal")
    assert pm.ack_options(lambda level, option, value: None) == {}

    manager = pm.PathManager(sock=FakeKernel([(errno.EINVAL, "")]), refused=refused)
    with pytest.raises(pm.PathManagerError) as invalid:
        create(manager, 1)
    assert invalid.value.errno == errno.EINVAL
    assert str(invalid.value).endswith("Invalid argument (this kernel refused "
                                       "NETLINK_EXT_ACK (Protocol not available; Linux "
                                       "4.12 on has it), so no reason in a refusal)")
    request = pm.subflow_message(FAMILY_ID, pm.CMD_SUBFLOW_CREATE, 7, ("10.0.0.2", 1),
                                 1, ("10.1.0.2", 8080), seq=3)
    uncapped = error_message(errno.EINVAL, request, "invalid token", capped=False)
    assert len(uncapped) > len(error_message(errno.EINVAL, request, "invalid token"))
    assert pm.ack_reason(uncapped) == "invalid token"


class ScriptedManager:
    """A PathManager whose creates fail with the next scripted errno (0 = opened)."""

    def __init__(self, errors: list[int]) -> None:
        self.errors = deque(errors)
        self.calls: list[tuple[tuple[str, int], int]] = []

    def create_subflow(self, token: int, local: tuple[str, int], local_id: int,
                       remote: tuple[str, int]) -> None:
        self.calls.append((local, local_id))
        err = self.errors.popleft()
        if err:
            raise pm.PathManagerError(err, "scripted")

    def close(self) -> None:
        pass


def test_placed_subflows_opened_before_data_are_the_ones_the_kernel_accepted(monkeypatch):
    from pathdiv.experiments.traffic import transfer

    # joined before data: ENOTCONN until the connection is fully established, then the
    # second subflow's first port is taken (EADDRINUSE) and its next one is used
    manager = ScriptedManager([errno.ENOTCONN, errno.ENOTCONN, 0, errno.EADDRINUSE, 0, 0])
    monkeypatch.setattr(transfer.mptcp_pm, "PathManager", lambda: manager)
    monkeypatch.setattr(transfer.mptcp_pm, "connection_token", lambda _sock: 7)
    monkeypatch.setattr(transfer.time, "sleep", lambda _s: None)
    extra = [transfer.PlannedSubflow("10.0.0.34", (20001, 20005)),
             transfer.PlannedSubflow("10.0.0.66", (21001, 21003)),
             transfer.PlannedSubflow("10.0.0.98", (22001,))]
    opened = transfer._open_subflows(object(), extra, ("10.1.0.2", 8080),  # type: ignore[arg-type]
                                     wait_s=60.0)
    assert opened == ["10.0.0.34:20001", "10.0.0.66:21003", "10.0.0.98:22001"]
    # local ids 1, 2, 3 in order, each retried under its own id
    assert [i for _, i in manager.calls] == [1, 1, 1, 2, 2, 3]
    # any other refusal ends the fetch with the kernel's error
    manager = ScriptedManager([errno.EINVAL])
    monkeypatch.setattr(transfer.mptcp_pm, "PathManager", lambda: manager)
    with pytest.raises(pm.PathManagerError):
        transfer._open_subflows(object(), extra, ("10.1.0.2", 8080))  # type: ignore[arg-type]
