"""Reading simple_switch_CLI output (pure): table dumps, registers, counters, errors.

simple_switch_CLI prints errors instead of failing, so every batch's output is
scanned for them; what it reads back is compared with the entries we meant to
install, and every difference is reported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pathdiv.experiments.dataplane.p4.entries import TABLES, SwitchEntries, TableEntry

PROMPT = "RuntimeCmd:"
ERROR_PATTERNS = (
    re.compile(r"^Invalid "),
    re.compile(r"^Error:"),
    re.compile(r"^Traceback"),
    re.compile(r"Could not connect to thrift", re.I),
    re.compile(r"^\*\*\* Unknown syntax"),
)
_ENTRY_KEY = re.compile(r"^\*\s+(\S+)\s*:\s*(\w+)\s+([0-9a-fA-F]+)(?:/(\d+))?\s*$")
_ACTION = re.compile(r"^Action entry:\s*(\S+)\s*-\s*(.*)$")
_REGISTER = re.compile(r"^(\S+)\[(\d+)\]=\s*(-?\d+)\s*$")
_COUNTER = re.compile(r"^(\S+)\[(\d+)\]=\s*\((\d+) bytes, (\d+) packets\)\s*$")

Normalized = tuple[tuple[tuple[int, int | None], ...], str, tuple[int, ...]]


class CliOutputError(RuntimeError):
    """simple_switch_CLI output that cannot be understood."""


def clean_lines(text: str) -> list[str]:
    """Output lines without the interactive prompts the CLI prints on a pipe."""
    out = []
    for line in text.splitlines():
        while line.startswith(PROMPT):
            line = line[len(PROMPT) :].lstrip()
        out.append(line.rstrip())
    return out


def cli_errors(text: str) -> list[str]:
    return [ln for ln in clean_lines(text) if any(p.search(ln) for p in ERROR_PATTERNS)]


def parse_table_dumps(text: str) -> list[list[Normalized]]:
    """Entries of each `table_dump` in the output, in command order (default entries skipped)."""
    dumps: list[list[Normalized]] = []
    current: list[Normalized] | None = None
    keys: list[tuple[int, int | None]] = []
    in_default = False
    for line in clean_lines(text):
        if line == "TABLE ENTRIES":
            current = []
            dumps.append(current)
            in_default = False
            continue
        if current is None:
            continue
        if line == "Dumping default entry":
            in_default = True
            continue
        if line.startswith("Dumping entry"):
            keys = []
            in_default = False
            continue
        m = _ENTRY_KEY.match(line)
        if m and not in_default:
            plen = int(m.group(4)) if m.group(4) is not None else None
            keys.append((int(m.group(3), 16), plen))
            continue
        m = _ACTION.match(line)
        if m and not in_default:
            raw = m.group(2).strip()
            params = tuple(int(p.strip(), 16) for p in raw.split(",") if p.strip())
            current.append((tuple(keys), m.group(1), params))
            keys = []
    return dumps


def parse_registers(text: str) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for line in clean_lines(text):
        m = _REGISTER.match(line)
        if m:
            out[(m.group(1), int(m.group(2)))] = int(m.group(3))
    return out


@dataclass(frozen=True)
class CounterValue:
    bytes: int
    packets: int


def parse_counters(text: str) -> dict[tuple[str, int], CounterValue]:
    out: dict[tuple[str, int], CounterValue] = {}
    for line in clean_lines(text):
        m = _COUNTER.match(line)
        if m:
            out[(m.group(1), int(m.group(2)))] = CounterValue(int(m.group(3)), int(m.group(4)))
    return out


def dumped_table(command: str, tables: Iterable[str] = TABLES) -> str | None:
    """The program table a `table_dump NAME` command reads: NAME itself, or the one table
    whose name ends in `.NAME` (simple_switch_CLI takes that short form too); None for
    another command or a name the program does not have (the CLI's answer says so)."""
    words = command.split()
    if len(words) != 2 or words[0] != "table_dump":
        return None
    name = words[1]
    known = [t for t in tables if t == name or t.endswith(f".{name}")]
    return known[0] if len(known) == 1 else None


def readback_commands(expected: SwitchEntries) -> list[str]:
    """CLI commands whose output `readback_differences` checks."""
    cmds = [f"table_dump {t}" for t in TABLES]
    cmds += [f"register_read {r.register} {r.index}" for r in expected.registers]
    return cmds


def readback_differences(expected: SwitchEntries, output: str) -> list[str]:
    """Human-readable differences between the expected entries and the CLI's readback."""
    dumps = parse_table_dumps(output)
    if len(dumps) != len(TABLES):
        raise CliOutputError(
            f"switch {expected.switch}: expected {len(TABLES)} table dumps, found {len(dumps)} "
            f"in the CLI output: {' | '.join(clean_lines(output)[-5:])}"
        )
    problems: list[str] = []
    wanted = expected.by_table()
    for table, got in zip(TABLES, dumps, strict=True):
        want = {e.normalized(): e for e in wanted[table]}
        problems += _diff(table, want, got)
    regs = parse_registers(output)
    for r in expected.registers:
        value = regs.get((r.register, r.index))
        if value != r.value:
            problems.append(f"{r.register}[{r.index}] is {value}, expected {r.value}")
    return problems


def _diff(table: str, want: dict[Normalized, TableEntry], got: Iterable[Normalized]) -> list[str]:
    got_set = set(got)
    out = [f"{table}: missing `{e.cli()}`" for n, e in want.items() if n not in got_set]
    out += [f"{table}: unexpected entry {n}" for n in got_set if n not in want]
    return out
