"""What the control plane must know of a program compiled by p4c-ebpf (pure).

Two facts, both taken from the compiler's output rather than assumed: the BPF maps with
the byte layout of their keys and values (from the object's BTF, `btf.py`), and the
number each action has in each table (the `#define <TABLE>_ACT_<ACTION> <n>` lines of
the generated C; 0 is NoAction). They are saved beside the object (`layout.json`) when
the program is compiled, so a switch needs neither the C nor the compiler to be filled.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from pathdiv.experiments.dataplane.p4ebpf.btf import MapInfo, read_maps

_ACTION_ID = re.compile(r"^\s*#define\s+(\w+_ACT_\w+)\s+(\d+)\s*$", re.M)

BPF_MAP_TYPE_HASH = 1
BPF_MAP_TYPE_ARRAY = 2
BPF_MAP_TYPE_LPM_TRIE = 11


class LayoutError(ValueError):
    """A name the control plane uses is not in the compiled program."""


def c_name(p4_name: str) -> str:
    """The C identifier p4c-ebpf derives from a fully qualified P4 name (dots to '_')."""
    return p4_name.lstrip(".").replace(".", "_")


def action_ids(c_source: str) -> dict[str, int]:
    """`<TABLE>_ACT_<ACTION>` -> action number, from the generated C."""
    return {m.group(1): int(m.group(2)) for m in _ACTION_ID.finditer(c_source)}


@dataclass(frozen=True)
class ProgramLayout:
    maps: dict[str, MapInfo]
    actions: dict[str, int]

    @classmethod
    def from_files(cls, c_file: Path, obj: Path) -> ProgramLayout:
        return cls(read_maps(obj.read_bytes()), action_ids(c_file.read_text()))

    def to_json(self) -> str:
        return json.dumps({"maps": {n: m.to_json() for n, m in sorted(self.maps.items())},
                           "actions": dict(sorted(self.actions.items()))}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> ProgramLayout:
        data = json.loads(text)
        return cls({n: MapInfo.from_json(n, m) for n, m in data["maps"].items()},
                   {str(k): int(v) for k, v in data["actions"].items()})

    def map_for(self, p4_name: str) -> MapInfo:
        """The map of a table or register named as in P4 (`PathdivIngress.ipv4_lpm`)."""
        wanted = c_name(p4_name)
        for name in (wanted, f"_{wanted}"):
            if name in self.maps:
                return self.maps[name]
        raise LayoutError(f"no map {wanted!r} for {p4_name} in the compiled program "
                          f"(maps: {', '.join(sorted(self.maps))})")

    def action(self, table: MapInfo, p4_action: str) -> tuple[int, str]:
        """(number, union member in the value) of `p4_action` in `table`'s value."""
        wanted = c_name(p4_action)
        member = next((m for m in (wanted, f"_{wanted}")
                       if any(f.startswith(f"u.{m}.") or f == f"u.{m}"
                              for f in table.value.fields)), None)
        define = f"{table.name.upper()}_ACT_{(member or wanted).upper()}"
        if define not in self.actions:
            raise LayoutError(f"action {p4_action} is not one of table {table.name}'s "
                              f"(no {define} in the generated C)")
        return self.actions[define], member or wanted
