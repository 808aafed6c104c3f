"""Every P4 program compiles warning-free, and the control plane's names exist in it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from pathdiv.experiments.dataplane.bmv2.programs import compile_program
from pathdiv.experiments.dataplane.bmv2.tools import find_p4_tools
from pathdiv.experiments.dataplane.p4 import entries as pe
from pathdiv.experiments.dataplane.p4.sources import DEFAULT_CACHE


@pytest.fixture(scope="module")
def tools():
    found, reason = find_p4_tools()
    if found is None:
        pytest.skip(f"p4c-bm2-ss/simple_switch not available: {reason}")
    return found


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """The shared cache when we may write it (root), else a private one."""
    if os.geteuid() == 0:
        return DEFAULT_CACHE
    return tmp_path_factory.mktemp("p4cache")


def p4info_names(text: str) -> set[str]:
    return set(re.findall(r'^\s*name:\s*"([^"]+)"', text, re.M))


@pytest.mark.parametrize("program", pe.PROGRAMS)
def test_program_compiles_without_warnings(tools, cache, program) -> None:
    compiled = compile_program(program, tools, cache)
    assert compiled.warnings == []
    assert json.loads(compiled.json.read_text())["program"].endswith(f"{program}.p4")
    assert compile_program(program, tools, cache) == compiled  # second call: from the cache


@pytest.mark.parametrize("program", pe.PROGRAMS)
def test_control_plane_names_exist_in_the_program(tools, cache, program) -> None:
    names = p4info_names(compile_program(program, tools, cache).p4info.read_text())
    wanted = {*pe.TABLES, pe.A_ARP_REPLY, pe.A_FORWARD, pe.A_SET_GROUP, pe.A_SET_MACS, pe.A_DROP,
              pe.R_ECN_THRESHOLD, pe.C_PORT_RX, pe.C_PORT_TX}
    wanted |= {"spray": {pe.R_SPRAY_POLICY}, "flowlet": {pe.R_FLOWLET_GAP}}.get(program, set())
    assert wanted - names == set()
