"""The BPF maps of a compiled eBPF object and the byte layout of their keys and values (pure).

p4c-ebpf declares every map in libbpf's BTF style (`__uint(type, ...)`, `KEY *key`,
`VALUE *value`, `__uint(max_entries, ...)` in section `.maps`), and clang writes the
types into the object's `.BTF` section. Reading that section tells, for every map, its
kind, size and where each scalar of its key and value lies, exactly as the compiler laid
them out (padding, alignment, unions). The control plane then writes entries as bytes
(`p4ebpf/entries.py`) without parsing C.

A layout is flat: a dotted path of each scalar (`action`, `u.PathdivIngress_forward.port`,
`field0`) -> (byte offset, byte size). Arrays (of bytes) count as one scalar.

The formats (ELF64 little-endian; BTF as in the kernel's include/uapi/linux/btf.h):
  ELF header: e_shoff at 0x28, e_shentsize/e_shnum/e_shstrndx at 0x3a/0x3c/0x3e;
  section header: sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, ...;
  BTF: magic 0xeb9f, version, flags, hdr_len, type_off, type_len, str_off, str_len;
  each type: name_off, info (vlen bits 0-15, kind bits 24-28, kind_flag bit 31),
  size_or_type, then kind-specific records.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

BTF_MAGIC = 0xEB9F
# kind -> bytes of the records that follow a btf_type (vlen scales the *_PER ones)
INT, PTR, ARRAY, STRUCT, UNION, ENUM, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT = range(1, 12)
FUNC, FUNC_PROTO, VAR, DATASEC, FLOAT, DECL_TAG, TYPE_TAG, ENUM64 = range(12, 20)
_FIXED = {INT: 4, ARRAY: 12, VAR: 4, DECL_TAG: 4}
_PER_VLEN = {STRUCT: 12, UNION: 12, ENUM: 8, FUNC_PROTO: 8, DATASEC: 12, ENUM64: 12}
_QUALIFIERS = (TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG)
MAPS_SECTION = ".maps"


class BtfError(ValueError):
    """The object has no BTF, or BTF this reader does not understand."""


@dataclass(frozen=True)
class Layout:
    """A key or value: its size in bytes and every scalar's (offset, size) by dotted path."""

    size: int
    fields: dict[str, tuple[int, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {"size": self.size, "fields": {k: list(v) for k, v in self.fields.items()}}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Layout:
        fields = data["fields"]
        assert isinstance(fields, dict)
        size = data["size"]
        assert isinstance(size, int)
        return cls(size, {str(k): (int(v[0]), int(v[1])) for k, v in fields.items()})


@dataclass(frozen=True)
class MapInfo:
    name: str
    map_type: int  # BPF_MAP_TYPE_*
    max_entries: int
    key: Layout
    value: Layout

    def to_json(self) -> dict[str, object]:
        return {"type": self.map_type, "max_entries": self.max_entries,
                "key": self.key.to_json(), "value": self.value.to_json()}

    @classmethod
    def from_json(cls, name: str, data: dict[str, object]) -> MapInfo:
        key, value = data["key"], data["value"]
        assert isinstance(key, dict) and isinstance(value, dict)
        return cls(name, int(str(data["type"])), int(str(data["max_entries"])),
                   Layout.from_json(key), Layout.from_json(value))


@dataclass(frozen=True)
class _Type:
    kind: int
    name: str
    size_or_type: int
    vlen: int
    kind_flag: bool
    records: tuple[tuple[int, ...], ...]  # the kind-specific records, as integers


def elf_section(data: bytes, wanted: str) -> bytes | None:
    """The contents of section `wanted` of a 64-bit little-endian ELF file, or None."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise BtfError("not a 64-bit little-endian ELF file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    for name_off, _type, _flags, _addr, offset, size in headers:
        end = data.index(b"\0", names_at + name_off)
        if data[names_at + name_off:end].decode() == wanted:
            return data[offset:offset + size]
    return None


def parse_types(btf: bytes) -> dict[int, _Type]:
    """Type id -> type of a raw `.BTF` section."""
    if len(btf) < 24:
        raise BtfError("BTF section too short")
    magic, _version, _flags, hdr_len = struct.unpack_from("<HBBI", btf, 0)
    if magic != BTF_MAGIC:
        raise BtfError(f"bad BTF magic {magic:#x}")
    type_off, type_len, str_off, str_len = struct.unpack_from("<IIII", btf, 8)
    strings = btf[hdr_len + str_off:hdr_len + str_off + str_len]

    def name(off: int) -> str:
        return strings[off:strings.index(b"\0", off)].decode()

    types: dict[int, _Type] = {}
    pos, end, tid = hdr_len + type_off, hdr_len + type_off + type_len, 1
    while pos < end:
        name_off, info, size_or_type = struct.unpack_from("<III", btf, pos)
        pos += 12
        kind, vlen, kind_flag = (info >> 24) & 0x1F, info & 0xFFFF, bool(info >> 31)
        if kind in _FIXED:
            width, count = _FIXED[kind], 1
        elif kind in _PER_VLEN:
            width, count = _PER_VLEN[kind], vlen
        elif kind in (PTR, FWD, FUNC, FLOAT, *_QUALIFIERS):
            width, count = 0, 0
        else:
            raise BtfError(f"BTF kind {kind} (type {tid}) is not known to this reader")
        records = tuple(struct.unpack_from(f"<{width // 4}I", btf, pos + i * width)
                        for i in range(count))
        pos += width * count
        types[tid] = _Type(kind, name(name_off), size_or_type, vlen, kind_flag, records)
        tid += 1
    return types


class _Reader:
    def __init__(self, types: dict[int, _Type], strings_of: dict[int, list[str]]) -> None:
        self.types = types
        self.member_names = strings_of

    def strip(self, tid: int) -> int:
        while tid and self.types[tid].kind in _QUALIFIERS:
            tid = self.types[tid].size_or_type
        return tid

    def size(self, tid: int) -> int:
        t = self.types[self.strip(tid)]
        if t.kind in (INT, STRUCT, UNION, ENUM, ENUM64, FLOAT):
            return t.size_or_type
        if t.kind == PTR:
            return 8
        if t.kind == ARRAY:
            elem, _index, nelems = t.records[0]
            return self.size(elem) * nelems
        raise BtfError(f"type {tid} ({t.name or 'anonymous'}) has no size")

    def flatten(self, tid: int, prefix: str = "", base: int = 0) -> dict[str, tuple[int, int]]:
        tid = self.strip(tid)
        t = self.types[tid]
        if t.kind not in (STRUCT, UNION):
            return {prefix: (base, self.size(tid))}
        out: dict[str, tuple[int, int]] = {}
        names = self.member_names[tid]
        for (_name_off, member, offset), name in zip(t.records, names, strict=True):
            bits = offset & 0xFFFFFF if t.kind_flag else offset
            if bits % 8:
                raise BtfError(f"{t.name}.{name} is a bitfield, which map layouts never hold")
            path = f"{prefix}.{name}" if prefix else name
            out.update(self.flatten(member, path, base + bits // 8))
        return out

    def layout(self, tid: int) -> Layout:
        return Layout(self.size(tid), self.flatten(tid))

    def pointee(self, tid: int) -> int:
        t = self.types[self.strip(tid)]
        if t.kind != PTR:
            raise BtfError(f"map definition member of type {tid} is not a pointer")
        return t.size_or_type

    def uint_value(self, tid: int) -> int:
        """The N of libbpf's `__uint(x, N)`: `int (*x)[N]`."""
        array = self.types[self.strip(self.pointee(tid))]
        if array.kind != ARRAY:
            raise BtfError(f"map definition member of type {tid} is not __uint(...)")
        return array.records[0][2]


def read_maps(obj: bytes) -> dict[str, MapInfo]:
    """Every BTF-defined map of an eBPF object file, by name."""
    btf = elf_section(obj, ".BTF")
    if btf is None:
        raise BtfError("the object has no .BTF section (compile with clang -g)")
    types = parse_types(btf)
    hdr_len = struct.unpack_from("<I", btf, 4)[0]
    str_off, str_len = struct.unpack_from("<II", btf, 16)
    strings = btf[hdr_len + str_off:hdr_len + str_off + str_len]

    def name(off: int) -> str:
        return strings[off:strings.index(b"\0", off)].decode()

    member_names = {tid: [name(r[0]) for r in t.records]
                    for tid, t in types.items() if t.kind in (STRUCT, UNION)}
    reader = _Reader(types, member_names)
    sections = [t for t in types.values() if t.kind == DATASEC and t.name == MAPS_SECTION]
    if not sections:
        raise BtfError(f"the object's BTF has no {MAPS_SECTION} section: no BTF-defined maps")
    out: dict[str, MapInfo] = {}
    for var_id, _offset, _size in sections[0].records:
        var = types[var_id]
        definition = reader.strip(var.size_or_type)
        members = dict(zip(member_names.get(definition, []),
                           (r[1] for r in types[definition].records), strict=False))
        if "key" in members:
            key = reader.layout(reader.pointee(members["key"]))
        elif "key_size" in members:
            key = Layout(reader.uint_value(members["key_size"]))
        else:
            raise BtfError(f"map {var.name} has neither key nor key_size")
        value = (reader.layout(reader.pointee(members["value"])) if "value" in members
                 else Layout(0))
        out[var.name] = MapInfo(var.name, reader.uint_value(members["type"]),
                                reader.uint_value(members["max_entries"]), key, value)
    return out
