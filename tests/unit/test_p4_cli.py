"""Reading simple_switch_CLI output and comparing it with the intended entries."""

from __future__ import annotations

import pytest

from pathdiv.experiments.dataplane.bmv2.cli import (
    CliOutputError,
    CounterValue,
    cli_errors,
    dumped_table,
    parse_counters,
    parse_registers,
    parse_table_dumps,
    readback_differences,
)
from pathdiv.experiments.dataplane.p4.entries import (
    A_FORWARD,
    R_ECN_THRESHOLD,
    T_LPM,
    RegisterWrite,
    SwitchEntries,
    TableEntry,
    Value,
)

# The shape simple_switch_CLI prints on a pipe (prompts glued to the first line);
# the real CLI also leaves a space after the last '-'.
LPM_DUMP = """RuntimeCmd: ==========
TABLE ENTRIES
**********
Dumping entry 0x0
Match key:
* hdr.ipv4.dst_addr   : LPM       0a000002/32
Action entry: PathdivIngress.forward - 00
**********
Dumping entry 0x1
Match key:
* hdr.ipv4.dst_addr   : LPM       00000000/0
Action entry: PathdivIngress.set_group - 01, 02, 1234abcd
==========
Dumping default entry
Action entry: PathdivIngress.drop -
==========
"""
EMPTY_DUMP = """RuntimeCmd: ==========
TABLE ENTRIES
==========
Dumping default entry
Action entry: PathdivIngress.drop -
==========
"""


def expected(entries: list[TableEntry], ecn: int = 0) -> SwitchEntries:
    return SwitchEntries("e1", "ecmp", tuple(entries), (RegisterWrite(R_ECN_THRESHOLD, 0, ecn),))


def lpm_forward(addr: int, plen: int, port: int) -> TableEntry:
    return TableEntry(T_LPM, (Value(addr, "ipv4", plen),), A_FORWARD, (Value(port),))


SET_GROUP = TableEntry(
    T_LPM, (Value(0, "ipv4", 0),), "PathdivIngress.set_group",
    (Value(1), Value(2), Value(0x1234ABCD)),
)


def test_a_table_dump_names_the_full_table_it_reads() -> None:
    assert dumped_table("table_dump PathdivIngress.ipv4_lpm") == T_LPM
    assert dumped_table("table_dump  ipv4_lpm") == T_LPM
    assert dumped_table("table_dump neighbor_mac") == "PathdivEgress.neighbor_mac"
    assert dumped_table("table_dump lpm") is None  # a suffix must be a whole name part
    assert dumped_table("table_dump nosuch") is None
    assert dumped_table("register_read PathdivEgress.ecn_threshold 0") is None
    assert dumped_table("table_dump x", ("A.x", "B.x")) is None  # ambiguous, as in the CLI


def test_table_dump_entries_are_parsed_as_integers() -> None:
    (dump,) = parse_table_dumps(LPM_DUMP)
    assert dump == [
        (((0x0A000002, 32),), "PathdivIngress.forward", (0,)),
        (((0, 0),), "PathdivIngress.set_group", (1, 2, 0x1234ABCD)),
    ]


def test_exact_keys_and_several_dumps_in_order() -> None:
    text = EMPTY_DUMP + """RuntimeCmd: ==========
TABLE ENTRIES
**********
Dumping entry 0x0
Match key:
* meta.group          : EXACT     0001
* meta.member         : EXACT     0001
Action entry: PathdivIngress.forward - 03
==========
Dumping default entry
Action entry: PathdivIngress.drop -
==========
"""
    assert parse_table_dumps(text) == [[], [(((1, None), (1, None)), "PathdivIngress.forward",
                                             (3,))]]


def test_registers_and_counters() -> None:
    text = ("RuntimeCmd: PathdivEgress.ecn_threshold[0]= 30\n"
            "RuntimeCmd: PathdivIngress.port_rx[2]=  (1500 bytes, 10 packets)\n")
    assert parse_registers(text) == {("PathdivEgress.ecn_threshold", 0): 30}
    assert parse_counters(text) == {("PathdivIngress.port_rx", 2): CounterValue(1500, 10)}


def test_errors_are_found_even_after_a_prompt() -> None:
    text = ("RuntimeCmd: Error: Table 'PathdivIngress.ipv4_lmp' not found\n"
            "RuntimeCmd: Invalid table operation (DUPLICATE_ENTRY)\nRuntimeCmd: \n")
    assert cli_errors(text) == ["Error: Table 'PathdivIngress.ipv4_lmp' not found",
                                "Invalid table operation (DUPLICATE_ENTRY)"]
    assert cli_errors(LPM_DUMP) == []


def readback(lpm: str, ecn: int = 0) -> str:
    """Dumps in TABLES order (arp, lpm, group, neighbor), then the register."""
    register = f"RuntimeCmd: PathdivEgress.ecn_threshold[0]= {ecn}\n"
    return EMPTY_DUMP + lpm + EMPTY_DUMP * 2 + register


def test_identical_readback_has_no_differences() -> None:
    want = expected([lpm_forward(0x0A000002, 32, 0), SET_GROUP])
    assert readback_differences(want, readback(LPM_DUMP)) == []


def test_missing_extra_and_register_differences_are_all_reported() -> None:
    want = expected([lpm_forward(0x0A000003, 32, 1), SET_GROUP], ecn=40)
    problems = readback_differences(want, readback(LPM_DUMP, ecn=0))
    assert (f"{T_LPM}: missing `table_add {T_LPM} {A_FORWARD} 10.0.0.3/32 => 1`"
            in problems)
    assert any(p.startswith(f"{T_LPM}: unexpected entry") and "167772162" in p
               for p in problems)
    assert f"{R_ECN_THRESHOLD}[0] is 0, expected 40" in problems
    assert len(problems) == 3


def test_truncated_output_is_an_error_not_an_empty_table() -> None:
    with pytest.raises(CliOutputError, match="expected 4 table dumps, found 1"):
        readback_differences(expected([]), LPM_DUMP)


def test_bmv2_reads_the_counters_of_several_switches_in_one_batch(tmp_path) -> None:
    # Network.wait_quiet reads the switches it watches several times a second: each read
    # of a switch is a simple_switch_CLI process, so one batch starts them all together
    from pathlib import Path

    from pathdiv.experiments.dataplane.bmv2.plane import Bmv2DataPlane
    from pathdiv.experiments.dataplane.bmv2.tools import P4Tools
    from pathdiv.experiments.dataplane.p4.entries import C_PORT_RX, C_PORT_TX, switch_ports
    from pathdiv.topologies.fattree import FatTree
    from pathdiv.topologies.forwarding import forwarding_tables

    topo = FatTree(4)
    tables = forwarding_tables(topo)
    tools = P4Tools(Path("/nonexistent/simple_switch"), Path("/nonexistent/cli"), Path("/x"))
    plane = Bmv2DataPlane(topo, tables, tmp_path, tools=tools)
    plane.net = object()  # running; the CLI is replaced below
    batches: list[dict[str, list[str]]] = []

    def cli_all(commands: dict[str, list[str]], label: str) -> dict[str, str]:
        batches.append(commands)
        return {sw: "".join(f"RuntimeCmd: {c}[{h.port}]=  ({100 * h.port} bytes, {h.port}"
                            f"{'' if c == C_PORT_RX else '0'} packets)\n"
                            for h in switch_ports(tables[sw]) for c in (C_PORT_RX, C_PORT_TX))
                for sw in commands}

    plane._cli_all = cli_all  # type: ignore[method-assign]
    wanted = topo.cores[:3]
    read = plane.ports_counters(wanted)
    assert len(batches) == 1 and sorted(batches[0]) == sorted(wanted)
    assert sorted(read) == sorted(wanted)
    for sw in wanted:
        hops = switch_ports(tables[sw])
        assert sorted(read[sw]) == sorted(h.intf for h in hops)
        for h in hops:
            c = read[sw][h.intf]
            assert (c.rx_packets, c.tx_packets, c.rx_bytes) == (h.port, 10 * h.port, 100 * h.port)
    assert plane.port_counters(wanted[0]) == read[wanted[0]] and len(batches) == 2
