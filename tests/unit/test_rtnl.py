"""rtnetlink messages as the check between runs compares them (fabric/rtnl.py): a qdisc or
class record keeps its configuration and drops its counters, and the tc section holds
the qdiscs, then each interface's classes."""

from __future__ import annotations

import json
import struct

import pytest

from pathdiv.experiments.fabric.netstate import parse_snapshot, section
from pathdiv.experiments.fabric.rtnl import (
    RTM_NEWQDISC,
    RTM_NEWTCLASS,
    messages,
    tc_entry,
    tc_listing,
)


def attr(kind: int, payload: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(payload), kind) + payload
    return raw + bytes(-len(raw) % 4)


def tcmsg(ifindex: int, handle: int, parent: int, info: int, *attrs: bytes) -> bytes:
    return struct.pack("=BBHiIII", 0, 0, 0, ifindex, handle, parent, info) + b"".join(attrs)


def nlmsg(kind: int, body: bytes) -> bytes:
    return struct.pack("=IHHII", 16 + len(body), kind, 2, 1, 0) + body


HTB_ROOT = tcmsg(3, 0x10000, 0xFFFFFFFF, 2, attr(1, b"htb\0"), attr(2, b"\x01\x02"),
                 attr(7, b"\x09" * 12), attr(3, b"\x07" * 8))
HTB_CLASS = tcmsg(3, 0x10001, 0x10000, 0x100000, attr(1, b"htb\0"), attr(2, b"\x0a"),
                  attr(4, b"\x05" * 20))
NAMES = {3: "e1-eth2"}


def test_a_record_keeps_configuration_and_drops_counters_and_reference_counts():
    assert tc_entry(RTM_NEWQDISC, HTB_ROOT, NAMES) == {
        "dev": "e1-eth2", "handle": "1:", "parent": "root", "kind": "htb",
        "attrs": {"2": "0102"}}
    assert tc_entry(RTM_NEWTCLASS, HTB_CLASS, NAMES) == {
        "dev": "e1-eth2", "handle": "1:1", "parent": "1:", "kind": "htb",
        "attrs": {"2": "0a"}, "leaf": "10:"}
    busier = tcmsg(3, 0x10000, 0xFFFFFFFF, 7, attr(1, b"htb\0"), attr(2, b"\x01\x02"),
                   attr(7, b"\x01" * 12))
    assert tc_entry(RTM_NEWQDISC, busier, NAMES) == tc_entry(RTM_NEWQDISC, HTB_ROOT, NAMES)
    changed = tcmsg(3, 0x10000, 0xFFFFFFFF, 2, attr(1, b"htb\0"), attr(2, b"\x01\x03"))
    assert tc_entry(RTM_NEWQDISC, changed, NAMES) != tc_entry(RTM_NEWQDISC, HTB_ROOT, NAMES)


def test_the_tc_section_parses_into_the_snapshots_qdisc_and_class_lists():
    text = tc_listing([(RTM_NEWQDISC, HTB_ROOT)], {"e1-eth2": [(RTM_NEWTCLASS, HTB_CLASS)],
                                                   "e1-eth3": []}, NAMES)
    state = parse_snapshot(section("tc", text) + section("end", ""), is_host=False)
    assert state.sections["qdisc"] == [json.dumps(tc_entry(RTM_NEWQDISC, HTB_ROOT, NAMES),
                                                  sort_keys=True)]
    assert [len(c) for c in state.sections["class"]] == [1, 0]
    assert not [e for e in state.errors if "tc" in e]


def test_a_dump_ends_at_done_and_an_error_message_raises():
    msgs, done = messages(nlmsg(RTM_NEWQDISC, HTB_ROOT) + nlmsg(3, bytes(4)))
    assert done and msgs == [(RTM_NEWQDISC, HTB_ROOT)]
    assert messages(nlmsg(RTM_NEWQDISC, HTB_ROOT)) == ([(RTM_NEWQDISC, HTB_ROOT)], False)
    with pytest.raises(OSError, match="netlink dump"):
        messages(nlmsg(2, struct.pack("=i", -19) + bytes(16)))
