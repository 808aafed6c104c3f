"""Every PSA program compiles for eBPF, holds every map the control plane writes, and
loads into this machine's kernel with every switch's entries (no namespaces needed)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pathdiv.experiments.dataplane.p4 import entries as pe
from pathdiv.experiments.dataplane.p4.programs import DEFAULT_CACHE
from pathdiv.experiments.dataplane.p4ebpf.entries import map_writes, psa_entries
from pathdiv.experiments.dataplane.p4ebpf.libbpf import Libbpf
from pathdiv.experiments.dataplane.p4ebpf.programs import (
    INITIALIZER,
    PSA_PROGRAMS,
    TC_PROGRAM,
    compile_program,
)
from pathdiv.experiments.dataplane.p4ebpf.tools import find_ebpf_tools
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.forwarding import forwarding_tables

BPFFS = Path("/sys/fs/bpf")


@pytest.fixture(scope="module")
def tools():
    found, reason = find_ebpf_tools()
    if found is None:
        pytest.skip(f"p4-ebpf not available: {reason}")
    return found


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """The shared cache when we may write it (root), else a private one."""
    if os.geteuid() == 0:
        return DEFAULT_CACHE
    return tmp_path_factory.mktemp("p4cache")


@pytest.mark.parametrize("program", PSA_PROGRAMS)
def test_psa_program_compiles_and_holds_the_control_planes_maps(tools, cache, program) -> None:
    compiled = compile_program(program, tools, cache)
    # p4c's warnings about our P4 (clang's about p4c's generated C are p4c's business);
    # p4c-ebpf itself says every array-based Register's index type gets replaced by u32
    warnings = [ln for ln in compiled.log.read_text().splitlines()
                if "[--Wwarn=" in ln and "replacing with u32" not in ln]
    assert warnings == []
    layout = compiled.layout()
    for table in (pe.T_ARP, pe.T_LPM, pe.T_GROUP, pe.T_NEIGHBOR):
        layout.map_for(table)
    if program == "spray":
        layout.map_for(pe.R_SPRAY_POLICY)
    assert compile_program(program, tools, cache) == compiled  # second call: from the cache


@pytest.mark.root
@pytest.mark.parametrize("program", PSA_PROGRAMS)
def test_psa_program_loads_and_takes_every_switchs_entries(tools, cache, program,
                                                           tmp_path) -> None:
    if os.geteuid() != 0:
        pytest.skip("loading BPF programs needs root")
    if not any(line.split()[1:3] == [str(BPFFS), "bpf"] for line in open("/proc/mounts")):
        pytest.skip(f"{BPFFS} is not a BPF file system here")
    compiled = compile_program(program, tools, cache)
    layout = compiled.layout()
    topo = FatTree(4)
    tables = forwarding_tables(topo, run_seed=3)
    bpf = Libbpf(tools.libbpf)
    pin_root = BPFFS / f"pathdiv-test-{os.getpid()}"
    try:
        for sw in (topo.switches[0], topo.switches[-1]):  # an edge, a core
            table = tables[sw]
            ifindex = {h.intf: 10 + i for i, h in enumerate(pe.switch_ports(table))}
            loaded = bpf.load(compiled.obj, pin_root / sw, (TC_PROGRAM, INITIALIZER))
            assert set(loaded.programs) == {TC_PROGRAM, INITIALIZER}
            bpf.run_once(loaded.programs[INITIALIZER], bytes(64))
            entries = psa_entries(table, pe.port_macs(topo, sw), ifindex, program)
            writes = map_writes(layout, entries)
            assert len(writes) == len(entries.tables) + len(entries.registers)
            for w in writes:
                fd = bpf.open_pinned(loaded.maps[w.map_name])
                try:
                    bpf.update(fd, w.key, w.value, w.what)
                    assert bpf.lookup(fd, w.key, len(w.value)) == w.value, w.what
                finally:
                    os.close(fd)
    finally:
        shutil.rmtree(pin_root, ignore_errors=True)
