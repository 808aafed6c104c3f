"""Every PSA program compiles for eBPF, holds every map the control plane writes, and
loads into this machine's kernel with every switch's entries (no namespaces needed)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pathdiv.experiments.dataplane.p4 import entries as pe
from pathdiv.experiments.dataplane.p4.sources import DEFAULT_CACHE
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


class ScriptNode:
    """A switch node as the plane sees it, without a namespace: `ip -o link` lists the
    switch's ports with made-up ifindexes."""

    pid = 0

    def __init__(self, ports: list[str]) -> None:
        self.ports = ports

    def cmd(self, command: str) -> str:
        assert command.startswith("ip -o link"), command
        return "1: lo: <LOOPBACK,UP>\n" + "".join(
            f"{100 + i}: {p}@if{900 + i}: <BROADCAST,UP>\n" for i, p in enumerate(self.ports))


@pytest.mark.root
def test_the_plane_fills_every_switch_changes_mode_and_leaves_no_pins(tools, tmp_path,
                                                                      monkeypatch) -> None:
    """EbpfDataPlane's own steps on all 20 switches, short of tc in namespaces (the
    scripts are written, not run): compile, load, initialise, fill and read back; a mode
    change loads the other program and swaps the filter; a spray policy change writes
    the register; the maps read back as written until an entry is changed under the
    plane (what a reused network's check sees); stop unpins."""
    if os.geteuid() != 0:
        pytest.skip("loading BPF programs needs root")
    from pathdiv.experiments.dataplane.p4ebpf import plane as ebpf
    from pathdiv.experiments.dataplane.p4ebpf.plane import EbpfDataPlane
    from pathdiv.experiments.fabric.nodescript import write

    ran: list[str] = []
    monkeypatch.setattr(ebpf, "run_in_netns", lambda scripts: [
        (write(r, path), ran.append(name)) for name, _, path, r in scripts])

    topo = FatTree(4)
    tables = forwarding_tables(topo, run_seed=9)
    net = {sw: ScriptNode([h.intf for h in pe.switch_ports(tables[sw])])
           for sw in topo.switches}
    dp = EbpfDataPlane(topo, tables, tmp_path, tools)
    dp.switching = {"spray": "random"}
    dp.start(net, "ecmp", "random")
    try:
        assert len(dp.loaded) == 20 and dp.program == "ecmp" and len(ran) == 20
        attach = (tmp_path / "switches" / "e1.attach.2.tc").read_text()
        assert str(dp.loaded["e1"].programs["tc_ingress_func"]) in attach
        assert attach.count("clsact") == len(net["e1"].ports)
        ecmp_pins = dp.loaded["e1"].pin_dir
        dp.set_mode("spray", "roundrobin")
        assert dp.program == "spray" and not ecmp_pins.exists()
        swap = (tmp_path / "switches" / "e1.mode.1.tc").read_text()
        assert "clsact" not in swap and str(dp.loaded["e1"].programs["tc_ingress_func"]) in swap
        dp.set_mode("spray", "random")  # same program: one register
        assert dp.mode == "spray" and dp.spray == "random"
        # what a reused network's check reads: every switch's maps as written (the new
        # spray policy included), then one entry changed under the plane
        assert dp.state_problems() == {}
        write = dp.writes["e1"][0]
        fd = dp.bpf_.open_pinned(dp.loaded["e1"].maps[write.map_name])
        try:
            dp.bpf_.update(fd, write.key, bytes(len(write.value)), "a planted change")
        finally:
            os.close(fd)
        assert list(dp.state_problems()) == ["e1"]
    finally:
        dp.stop()
    assert not dp.pin_root.exists()


@pytest.mark.root
def test_programs_load_where_the_kernel_demands_aligned_packet_loads(tools, cache,
                                                                    tmp_path) -> None:
    """The lab kernel (UML) declares no efficient unaligned access, so its verifier checks
    alignment as BPF_F_STRICT_ALIGNMENT asks here: p4c-ebpf's parser is then refused, and
    BPF_F_ANY_ALIGNMENT (what the plane loads with) lets it load."""
    if os.geteuid() != 0:
        pytest.skip("loading BPF programs needs root")
    from pathdiv.experiments.dataplane.p4ebpf.libbpf import (
        BPF_F_ANY_ALIGNMENT,
        BPF_F_STRICT_ALIGNMENT,
        LibbpfError,
    )

    compiled = compile_program("ecmp", tools, cache)
    bpf = Libbpf(tools.libbpf)
    pin_root = BPFFS / f"pathdiv-test-{os.getpid()}"
    try:
        with pytest.raises(LibbpfError, match="misaligned packet access"):
            bpf.load(compiled.obj, pin_root / "strict", (TC_PROGRAM,), BPF_F_STRICT_ALIGNMENT)
        loaded = bpf.load(compiled.obj, pin_root / "any", (TC_PROGRAM,),
                          BPF_F_STRICT_ALIGNMENT | BPF_F_ANY_ALIGNMENT)
        assert loaded.programs[TC_PROGRAM].exists()
    finally:
        shutil.rmtree(pin_root, ignore_errors=True)
