"""The bmv2 plane's entries, written as BPF map entries of the PSA program (pure).

The entries themselves are the bmv2 plane's (`experiments/dataplane/p4/entries.py`,
from the topology's forwarding tables), computed on a table whose ports are the
interfaces' ifindexes: on PSA for eBPF a port *is* the ifindex (`bpf_redirect` takes
it), in the switch's own network namespace. Each entry then becomes bytes in the
layout the compiler chose (`layout.py`):

  exact table   key fields field0, field1, ... in host byte order;
  LPM table     prefixlen, then the address in network byte order (BPF_MAP_TYPE_LPM_TRIE);
  value         `action` (the table's number for it), then the action's parameters at
                `u.<action>.<param>`, in declaration order, host byte order;
  register      index -> value (an array map).

The PSA programs have no ECN register (the egress qdiscs mark, as on the nftables plane).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pathdiv.experiments.dataplane.p4.entries import (
    R_ECN_THRESHOLD,
    EntryOptions,
    SwitchEntries,
    TableEntry,
    switch_entries,
)
from pathdiv.experiments.dataplane.p4ebpf.btf import Layout
from pathdiv.experiments.dataplane.p4ebpf.layout import (
    BPF_MAP_TYPE_LPM_TRIE,
    LayoutError,
    ProgramLayout,
)
from pathdiv.topologies.forwarding import NextHop, SwitchTable

LPM_PREFIX_FIELD = "prefixlen"
PSA_WITHOUT = (R_ECN_THRESHOLD,)  # registers of the v1model programs only


@dataclass(frozen=True)
class MapWrite:
    """One entry: `key` -> `value` in map `map_name`; `what` says which, for errors."""

    map_name: str
    key: bytes
    value: bytes
    what: str


def ifindex_table(table: SwitchTable, ifindex: Mapping[str, int]) -> SwitchTable:
    """`table` with every port number replaced by its interface's ifindex."""
    missing = sorted({h.intf for h in _hops(table)} - set(ifindex))
    if missing:
        raise LayoutError(f"switch {table.switch}: no ifindex for {', '.join(missing)}")

    def hop(h: NextHop) -> NextHop:
        return dataclasses.replace(h, port=ifindex[h.intf])

    return dataclasses.replace(
        table,
        down=tuple(dataclasses.replace(r, hop=hop(r.hop)) for r in table.down),
        up=tuple(hop(h) for h in table.up),
        static=tuple(dataclasses.replace(r, hop=hop(r.hop)) for r in table.static),
    )


def _hops(table: SwitchTable) -> list[NextHop]:
    return [r.hop for r in (*table.down, *table.static)] + list(table.up)


def psa_entries(table: SwitchTable, macs: Mapping[int, tuple[str, str]],
                ifindex: Mapping[str, int], program: str,
                options: EntryOptions | None = None) -> SwitchEntries:
    """The bmv2 plane's entries for `program` with ifindexes for ports; `macs` is keyed
    by port number (as `p4.entries.port_macs` returns it)."""
    by_number = {h.port: h.intf for h in _hops(table)}
    macs_by_ifindex = {ifindex[by_number[p]]: m for p, m in macs.items() if p in by_number}
    entries = switch_entries(ifindex_table(table, ifindex), macs_by_ifindex, program, options)
    registers = tuple(r for r in entries.registers if r.register not in PSA_WITHOUT)
    return dataclasses.replace(entries, registers=registers)


def _put(buf: bytearray, layout: Layout, path: str, value: int,
         order: Literal["little", "big"] = "little") -> None:
    if path not in layout.fields:
        raise LayoutError(f"no field {path!r} in a layout with {', '.join(layout.fields)}")
    offset, size = layout.fields[path]
    if value < 0 or value >= 1 << (8 * size):
        raise LayoutError(f"{value} does not fit field {path!r} of {size} bytes")
    buf[offset:offset + size] = value.to_bytes(size, order)


def key_fields(layout: Layout) -> list[str]:
    """The match fields of a table key (field0, field1, ...), in order."""
    return sorted((f for f in layout.fields if f.startswith("field")),
                  key=lambda f: int(f[len("field"):] or 0))


def table_write(layout: ProgramLayout, entry: TableEntry) -> MapWrite:
    table = layout.map_for(entry.table)
    key = bytearray(table.key.size)
    fields = key_fields(table.key)
    if len(fields) != len(entry.match):
        raise LayoutError(f"{entry.table}: {len(entry.match)} match values for key fields "
                          f"{fields}")
    lpm = table.map_type == BPF_MAP_TYPE_LPM_TRIE
    for name, v in zip(fields, entry.match, strict=False):
        if lpm and v.prefix_len is not None:
            _put(key, table.key, LPM_PREFIX_FIELD, v.prefix_len)
        _put(key, table.key, name, v.value, "big" if lpm else "little")
    number, member = layout.action(table, entry.action)
    value = bytearray(table.value.size)
    _put(value, table.value, "action", number)
    params = [f for f in table.value.fields if f.startswith(f"u.{member}.")]
    if len(params) != len(entry.params):
        raise LayoutError(f"{entry.table}: action {entry.action} takes {params}, "
                          f"got {len(entry.params)} values")
    for name, v in zip(params, entry.params, strict=False):
        _put(value, table.value, name, v.value)
    return MapWrite(table.name, bytes(key), bytes(value), entry.cli())


def register_write(layout: ProgramLayout, register: str, index: int, value: int) -> MapWrite:
    reg = layout.map_for(register)
    key, val = bytearray(reg.key.size), bytearray(reg.value.size)
    _put(key, reg.key, _only(reg.key, register), index)
    _put(val, reg.value, _only(reg.value, register), value)
    return MapWrite(reg.name, bytes(key), bytes(val), f"register {register}[{index}] = {value}")


def _only(layout: Layout, what: str) -> str:
    if len(layout.fields) != 1:
        raise LayoutError(f"{what}: expected one scalar, found {', '.join(layout.fields)}")
    return next(iter(layout.fields))


def map_writes(layout: ProgramLayout, entries: SwitchEntries) -> list[MapWrite]:
    """Every map entry that installs `entries`, tables first."""
    return ([table_write(layout, e) for e in entries.tables]
            + [register_write(layout, r.register, r.index, r.value)
               for r in entries.registers])
