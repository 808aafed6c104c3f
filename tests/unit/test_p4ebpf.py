"""The p4-ebpf plane's pure parts: BTF map layouts, entries as map bytes, the cb scrubber,
tool lookup, attach commands (no compiler, no root)."""

from __future__ import annotations

import ipaddress
import struct
from pathlib import Path

import pytest

from pathdiv.experiments.dataplane.p4.entries import (
    A_FORWARD,
    A_SET_GROUP,
    R_ECN_THRESHOLD,
    R_SPRAY_POLICY,
    T_ARP,
    T_GROUP,
    T_LPM,
    EntryOptions,
    TableEntry,
    Value,
    port_macs,
)
from pathdiv.experiments.dataplane.p4ebpf import btf
from pathdiv.experiments.dataplane.p4ebpf.btf import Layout, MapInfo
from pathdiv.experiments.dataplane.p4ebpf.entries import (
    ifindex_table,
    map_writes,
    psa_entries,
    register_write,
    table_write,
)
from pathdiv.experiments.dataplane.p4ebpf.layout import (
    BPF_MAP_TYPE_ARRAY,
    BPF_MAP_TYPE_HASH,
    BPF_MAP_TYPE_LPM_TRIE,
    LayoutError,
    ProgramLayout,
    action_ids,
)
from pathdiv.experiments.dataplane.p4ebpf.plane import attach_commands, parse_ip_links
from pathdiv.experiments.dataplane.p4ebpf.programs import MODE_PROGRAMS, program_digest
from pathdiv.experiments.dataplane.p4ebpf.scrub import clear_cb_program
from pathdiv.experiments.dataplane.p4ebpf.tools import RUNTIME_FILES, find_ebpf_tools
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.forwarding import forwarding_tables

# ---- a synthetic object: ELF64 with a .BTF section holding one BTF-defined map --------


class BtfBuilder:
    def __init__(self) -> None:
        self.strings = b"\0"
        self.types: list[bytes] = []

    def name(self, text: str) -> int:
        if not text:
            return 0
        off = len(self.strings)
        self.strings += text.encode() + b"\0"
        return off

    def add(self, kind: int, name: str, size_or_type: int, records: list[tuple[int, ...]],
            vlen: int | None = None) -> int:
        info = (kind << 24) | (len(records) if vlen is None else vlen)
        data = struct.pack("<III", self.name(name), info, size_or_type)
        for rec in records:
            data += struct.pack(f"<{len(rec)}I", *rec)
        self.types.append(data)
        return len(self.types)

    def struct(self, name: str, size: int, members: list[tuple[str, int, int]],
               kind: int = btf.STRUCT) -> int:
        return self.add(kind, name, size, [(self.name(n), t, off * 8) for n, t, off in members])

    def uint_member(self, u32: int, value: int) -> int:
        """libbpf's `__uint(x, value)`: a pointer to an array of `value` ints."""
        array = self.add(btf.ARRAY, "", 0, [(u32, u32, value)], vlen=0)
        return self.add(btf.PTR, "", array, [])

    def blob(self) -> bytes:
        types = b"".join(self.types)
        header = struct.pack("<HBBIIIII", btf.BTF_MAGIC, 1, 0, 24, 0, len(types), len(types),
                             len(self.strings))
        return header + types + self.strings


def elf_with(sections: dict[str, bytes]) -> bytes:
    names = b"\0" + b"".join(n.encode() + b"\0" for n in (*sections, ".shstrtab"))
    body, headers, offset = b"", [bytes(64)], 64
    name_at = 1
    for name, data in [*sections.items(), (".shstrtab", names)]:
        headers.append(struct.pack("<IIQQQQIIQQ", name_at, 1, 0, 0, offset + len(body),
                                   len(data), 0, 0, 1, 0))
        name_at += len(name) + 1
        body += data
    shoff = 64 + len(body)
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 1, 247, 1, 0, 0, shoff, 0, 64, 0, 0, 64,
                                 len(headers), len(headers) - 1)
    return header + body + b"".join(headers)


def synthetic_object() -> bytes:
    """One LPM map: key {u32 prefixlen; u32 field0}, value {u32 action; union {
    struct {} _NoAction; struct {u32 port;} PathdivIngress_forward; struct {u16 group;
    u16 members; u32 seed;} PathdivIngress_set_group;} u;} (the shape p4c-ebpf writes)."""
    b = BtfBuilder()
    u32 = b.add(btf.INT, "unsigned int", 4, [(32,)])
    u16 = b.add(btf.INT, "unsigned short", 2, [(16,)])
    key = b.struct("PathdivIngress_ipv4_lpm_key", 8, [("prefixlen", u32, 0), ("field0", u32, 4)])
    noaction = b.struct("", 0, [])
    fwd = b.struct("", 4, [("port", u32, 0)])
    group = b.struct("", 8, [("group", u16, 0), ("members", u16, 2), ("seed", u32, 4)])
    union = b.struct("", 8, [("_NoAction", noaction, 0), ("PathdivIngress_forward", fwd, 0),
                             ("PathdivIngress_set_group", group, 0)], kind=btf.UNION)
    value = b.struct("PathdivIngress_ipv4_lpm_value", 12, [("action", u32, 0), ("u", union, 4)])
    key_ptr = b.add(btf.PTR, "", key, [])
    value_ptr = b.add(btf.PTR, "", value, [])
    typ = b.uint_member(u32, BPF_MAP_TYPE_LPM_TRIE)
    size = b.uint_member(u32, 4096)
    definition = b.struct("", 32, [("type", typ, 0), ("key", key_ptr, 8),
                                   ("value", value_ptr, 16), ("max_entries", size, 24)])
    var = b.add(btf.VAR, "PathdivIngress_ipv4_lpm", definition, [(1,)], vlen=0)
    b.add(btf.DATASEC, ".maps", 32, [(var, 0, 32)])
    return elf_with({".text": b"\x95" + bytes(7), ".BTF": b.blob()})


def test_btf_gives_every_scalar_of_a_map_key_and_value_at_its_offset() -> None:
    maps = btf.read_maps(synthetic_object())
    lpm = maps["PathdivIngress_ipv4_lpm"]
    assert (lpm.map_type, lpm.max_entries) == (BPF_MAP_TYPE_LPM_TRIE, 4096)
    assert lpm.key == Layout(8, {"prefixlen": (0, 4), "field0": (4, 4)})
    assert lpm.value.size == 12
    assert lpm.value.fields == {"action": (0, 4), "u.PathdivIngress_forward.port": (4, 4),
                                "u.PathdivIngress_set_group.group": (4, 2),
                                "u.PathdivIngress_set_group.members": (6, 2),
                                "u.PathdivIngress_set_group.seed": (8, 4)}


def test_btf_refuses_what_it_cannot_read() -> None:
    with pytest.raises(btf.BtfError, match="ELF"):
        btf.read_maps(b"not an object at all, just bytes")
    with pytest.raises(btf.BtfError, match=r"no \.BTF"):
        btf.read_maps(elf_with({".text": bytes(8)}))


# ---- entries as map bytes -------------------------------------------------------------

C_DEFINES = """
struct PathdivIngress_ipv4_lpm_value {
  #define PATHDIVINGRESS_IPV4_LPM_ACT_PATHDIVINGRESS_FORWARD 1
#define PATHDIVINGRESS_IPV4_LPM_ACT_PATHDIVINGRESS_SET_GROUP 2
#define PATHDIVINGRESS_IPV4_LPM_ACT_PATHDIVINGRESS_DROP 3
"""


def layout() -> ProgramLayout:
    maps = btf.read_maps(synthetic_object())
    group = MapInfo("PathdivIngress_group_member", BPF_MAP_TYPE_HASH, 1024,
                    Layout(4, {"field0": (0, 2), "field1": (2, 2)}),
                    Layout(8, {"action": (0, 4), "u.PathdivIngress_forward.port": (4, 4)}))
    policy = MapInfo("PathdivIngress_select_member_spray_policy", BPF_MAP_TYPE_ARRAY, 1,
                     Layout(4, {"": (0, 4)}), Layout(1, {"": (0, 1)}))
    maps.update({m.name: m for m in (group, policy)})
    actions = action_ids(C_DEFINES)
    actions["PATHDIVINGRESS_GROUP_MEMBER_ACT_PATHDIVINGRESS_FORWARD"] = 1
    return ProgramLayout(maps, actions)


def test_action_numbers_come_from_the_generated_c() -> None:
    ids = action_ids(C_DEFINES)
    assert ids["PATHDIVINGRESS_IPV4_LPM_ACT_PATHDIVINGRESS_DROP"] == 3
    assert ids["PATHDIVINGRESS_IPV4_LPM_ACT_PATHDIVINGRESS_FORWARD"] == 1


def test_an_lpm_route_is_prefix_length_then_address_in_network_order() -> None:
    entry = TableEntry(T_LPM, (Value(int(ipaddress.IPv4Address("10.2.0.0")), "ipv4", 16),),
                       A_FORWARD, (Value(7),))
    w = table_write(layout(), entry)
    assert w.map_name == "PathdivIngress_ipv4_lpm"
    assert w.key == struct.pack("<I", 16) + bytes([10, 2, 0, 0])
    assert w.value == struct.pack("<II", 1, 7) + bytes(4)


def test_a_group_route_writes_each_parameter_at_its_offset_in_host_order() -> None:
    entry = TableEntry(T_LPM, (Value(0, "ipv4", 0),), A_SET_GROUP,
                       (Value(1), Value(4), Value(0x1234ABCD)))
    w = table_write(layout(), entry)
    assert w.key == bytes(8)
    assert w.value == struct.pack("<IHHI", 2, 1, 4, 0x1234ABCD)


def test_an_exact_key_is_in_host_order_and_a_register_is_index_to_value() -> None:
    w = table_write(layout(), TableEntry(T_GROUP, (Value(1), Value(3)), A_FORWARD, (Value(9),)))
    assert w.key == struct.pack("<HH", 1, 3)
    r = register_write(layout(), R_SPRAY_POLICY, 0, 1)
    assert (r.map_name, r.key, r.value) == ("PathdivIngress_select_member_spray_policy",
                                            bytes(4), b"\x01")


def test_names_the_program_lacks_are_refused_by_name() -> None:
    with pytest.raises(LayoutError, match="PathdivIngress_arp_responder"):
        table_write(layout(), TableEntry(T_ARP, (Value(1), Value(2)), A_FORWARD, (Value(1),)))
    too_wide = TableEntry(T_GROUP, (Value(1 << 16), Value(0)), A_FORWARD, (Value(1),))
    with pytest.raises(LayoutError, match="does not fit"):
        table_write(layout(), too_wide)
    with pytest.raises(LayoutError, match=r"action PathdivIngress\.drop"):
        table_write(layout(), TableEntry(T_GROUP, (Value(1), Value(0)), "PathdivIngress.drop",
                                         ()))


@pytest.fixture(scope="module")
def topo() -> FatTree:
    return FatTree(4)


def test_psa_entries_are_the_bmv2_entries_with_ifindexes_for_ports(topo) -> None:
    edge = next(s for s in topo.switches if forwarding_tables(topo, 7)[s].up)
    table = forwarding_tables(topo, run_seed=7)[edge]
    hops = {r.hop.intf: r.hop.port for r in table.down} | {h.intf: h.port for h in table.up}
    ifindex = {intf: 100 + port for intf, port in hops.items()}
    moved = ifindex_table(table, ifindex)
    assert sorted(h.port for h in moved.up) == sorted(100 + h.port for h in table.up)
    entries = psa_entries(table, port_macs(topo, table.switch), ifindex, "spray",
                          EntryOptions("roundrobin"))
    forwards = {e.params[0].value for e in entries.tables if e.action == A_FORWARD}
    assert forwards and forwards <= set(ifindex.values())
    registers = {r.register: r.value for r in entries.registers}
    assert R_ECN_THRESHOLD not in registers  # the egress qdiscs mark on this plane
    assert registers[R_SPRAY_POLICY] == 1
    with pytest.raises(LayoutError, match="no ifindex"):
        ifindex_table(table, {})


def test_map_writes_cover_the_tables_then_the_registers() -> None:
    from pathdiv.experiments.dataplane.p4.entries import RegisterWrite, SwitchEntries
    entries = SwitchEntries("e1", "spray", (
        TableEntry(T_LPM, (Value(0, "ipv4", 0),), A_SET_GROUP, (Value(1), Value(2), Value(3))),
        TableEntry(T_GROUP, (Value(1), Value(0)), A_FORWARD, (Value(5),)),
    ), (RegisterWrite(R_SPRAY_POLICY, 0, 0),))
    writes = map_writes(layout(), entries)
    assert [w.map_name for w in writes] == ["PathdivIngress_ipv4_lpm",
                                            "PathdivIngress_group_member",
                                            "PathdivIngress_select_member_spray_policy"]


# ---- the rest -------------------------------------------------------------------------

def test_the_scrubber_zeroes_the_five_cb_words_and_lets_the_next_filter_run() -> None:
    code = clear_cb_program()
    insns = [struct.unpack("<BBhi", code[i:i + 8]) for i in range(0, len(code), 8)]
    assert insns[0] == (0xB7, 2, 0, 0)  # r2 = 0
    stores = insns[1:6]
    assert [(c, regs, off) for c, regs, off, _ in stores] == \
        [(0x63, 1 | (2 << 4), 48 + 4 * i) for i in range(5)]  # *(u32 *)(r1 + cb[i]) = r2
    assert insns[6] == (0xB7, 0, 0, -1)  # TC_ACT_UNSPEC
    assert insns[7][0] == 0x95  # exit


def test_ip_link_names_map_to_ifindexes_peer_suffix_dropped() -> None:
    text = ("1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue\\    link/loopback\n"
            "417: e1-eth1@if416: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc htb\n"
            "5: e1-eth2@if9: <BROADCAST> mtu 1500\n")
    assert parse_ip_links(text) == {"lo": 1, "e1-eth1": 417, "e1-eth2": 5}


def test_attach_puts_the_scrubber_before_the_program_and_a_mode_change_replaces_one() -> None:
    first = attach_commands("e1-eth1", Path("/p/scrub"), Path("/p/prog"), first=True)
    assert first[0] == ["tc", "qdisc", "replace", "dev", "e1-eth1", "clsact"]
    prefs = [c[c.index("pref") + 1] for c in first[1:]]
    assert prefs == ["1", "2"] and first[1][-1] == "/p/scrub" and first[2][-1] == "/p/prog"
    again = attach_commands("e1-eth1", Path("/p/scrub"), Path("/p/prog2"), first=False)
    assert len(again) == 1 and again[0][2] == "replace" and again[0][-1] == "/p/prog2"


def test_flowlet_has_no_psa_program() -> None:
    assert set(MODE_PROGRAMS) == {"static", "ecmp", "spray"}
    with pytest.raises(RuntimeError, match="no PSA version"):
        program_digest("flowlet", {})


def test_the_digest_follows_the_sources_and_the_tools(tmp_path) -> None:
    src = tmp_path / "p4src"
    (src / "include").mkdir(parents=True)
    (src / "ecmp.p4").write_text("// ecmp\n")
    (src / "include" / "a.p4").write_text("// a\n")
    one = program_digest("ecmp", {"p4c-ebpf": "1"}, src)
    assert one == program_digest("ecmp", {"p4c-ebpf": "1"}, src)
    assert one != program_digest("ecmp", {"p4c-ebpf": "2"}, src)
    (src / "include" / "a.p4").write_text("// a, edited\n")
    assert one != program_digest("ecmp", {"p4c-ebpf": "1"}, src)


def _exe(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)


def test_tools_missing_are_named_and_found_ones_say_where(tmp_path) -> None:
    tools, reason = find_ebpf_tools({"PATH": str(tmp_path / "empty")})
    assert tools is None and "p4c-ebpf" in reason and "clang" in reason
    prefix = tmp_path / "p4"
    for name in ("p4c-ebpf", "clang", "llc", "tc", "nsenter"):
        _exe(prefix / "bin" / name)
    env = {"P4_PREFIX": str(prefix), "PATH": ""}
    tools, reason = find_ebpf_tools(env)
    assert tools is None and "runtime headers" in reason and "P4C_EBPF_RUNTIME" in reason
    runtime = prefix / "share" / "p4c" / "ebpf" / "runtime"
    for f in RUNTIME_FILES:
        (runtime / f).parent.mkdir(parents=True, exist_ok=True)
        (runtime / f).write_text("/* header */\n")
    tools, reason = find_ebpf_tools(env)
    if tools is None:  # the machine lacks libbpf.so.1: named
        assert "libbpf" in reason
    else:
        assert tools.compiler == prefix / "bin" / "p4c-ebpf" and tools.runtime == runtime
        assert "p4c-ebpf" in reason


def test_pins_of_a_killed_run_are_removed_and_a_living_ones_kept(tmp_path) -> None:
    import os

    from pathdiv.experiments.dataplane.p4ebpf.plane import remove_stale_pins
    alive = tmp_path / f"{os.getpid()}-abcd1234"
    dead = tmp_path / "999999999-abcd1234"
    for d in (alive, dead):
        (d / "e1").mkdir(parents=True)
    assert remove_stale_pins(tmp_path) == [dead]
    assert alive.exists() and not dead.exists()
    assert remove_stale_pins(tmp_path / "absent") == []
