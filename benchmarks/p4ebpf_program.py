"""What one packet costs a p4-ebpf switch: the PSA program's time per forwarded frame.

Each PSA program (p4src/, compiled by p4c-ebpf) is loaded for one edge switch of the k=4
fat tree with that switch's entries, and run on one UDP frame towards another pod (ECMP
and spray: the up group; static: its /32 route) `--repeat` times through the kernel's
BPF_PROG_TEST_RUN, which reports the mean time per run; the cb scrubber (7 instructions,
every port runs it first) gives the floor of what a test run costs. Also printed: the
size of each program as the kernel holds it (`bpftool prog show`: translated and, where
the kernel has a JIT, native bytes). On this machine's kernel the programs run JIT
compiled; the lab kernel (UML) has no BPF JIT and interprets them, which this script
cannot measure from the host. Root; no network namespaces.

    python benchmarks/p4ebpf_program.py [--runs 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO.parent))
from pathdiv.experiments.dataplane.p4 import entries as pe  # noqa: E402
from pathdiv.experiments.dataplane.p4ebpf.entries import map_writes, psa_entries  # noqa: E402
from pathdiv.experiments.dataplane.p4ebpf.libbpf import Libbpf  # noqa: E402
from pathdiv.experiments.dataplane.p4ebpf.programs import (  # noqa: E402
    INITIALIZER,
    PSA_PROGRAMS,
    TC_PROGRAM,
    compile_program,
)
from pathdiv.experiments.dataplane.p4ebpf.scrub import NAME, clear_cb_program  # noqa: E402
from pathdiv.experiments.dataplane.p4ebpf.tools import require_ebpf_tools  # noqa: E402
from pathdiv.topologies.fattree import FatTree  # noqa: E402
from pathdiv.topologies.forwarding import forwarding_tables  # noqa: E402

PIN = Path("/sys/fs/bpf") / f"pathdiv-bench-{os.getpid()}"


def frame(topo: FatTree, table, macs) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    hop = table.down[0].hop
    pod = topo.nodes[table.switch].pod
    dst = next(h for h in topo.hosts if topo.nodes[h].pod != pod)
    return bytes(Ether(src=macs[hop.port][1], dst=macs[hop.port][0])
                 / IP(src=topo.nodes[hop.node].address, dst=topo.nodes[dst].address)
                 / UDP(sport=20000, dport=7000) / (b"x" * 1400))


def sizes(pinned: Path) -> str:
    if not shutil.which("bpftool"):
        return "size unknown (no bpftool)"
    out = subprocess.run(["bpftool", "-j", "prog", "show", "pinned", str(pinned)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return "size unknown"
    info = json.loads(out.stdout)
    return (f"{info.get('bytes_xlated', 0) // 8} instructions translated, "
            f"{info.get('bytes_jited', 0)} bytes native")


def timed(bpf: Libbpf, program: Path, data: bytes, runs: int) -> tuple[int, str]:
    """(return value, 'median ns (p10-p90)') of `runs` single test runs."""
    times, rc = [], 0
    for _ in range(runs):
        rc, _ = bpf.test_run(program, data)
        times.append(bpf.last_duration_ns)
    q = statistics.quantiles(times, n=10)
    return rc, f"{statistics.median(times):.0f} ns median ({q[0]:.0f}-{q[-1]:.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20_000)
    args = parser.parse_args()
    tools = require_ebpf_tools()
    topo = FatTree(4)
    tables = forwarding_tables(topo, run_seed=5)
    edge = next(s for s in topo.switches if tables[s].up and tables[s].down[0].direct)
    table, macs = tables[edge], pe.port_macs(topo, edge)
    ifindex = {h.intf: 1 if h.intf == table.down[0].hop.intf else 40 + i
               for i, h in enumerate(pe.switch_ports(table))}
    data = frame(topo, table, macs)
    bpf = Libbpf(tools.libbpf)
    print(f"kernel {os.uname().release}, bpf_jit_enable "
          f"{Path('/proc/sys/net/core/bpf_jit_enable').read_text().strip()}, "
          f"{args.runs} runs each, {len(data)}-byte UDP frame from {edge}'s host port")
    try:
        scrub = bpf.load_instructions(NAME, clear_cb_program(), PIN / NAME)
        print(f"cb scrubber: {timed(bpf, scrub, data, args.runs)[1]}; {sizes(scrub)}")
        for name in PSA_PROGRAMS:
            compiled = compile_program(name, tools)
            loaded = bpf.load(compiled.obj, PIN / name, (TC_PROGRAM, INITIALIZER))
            bpf.run_once(loaded.programs[INITIALIZER], bytes(64))
            entries = psa_entries(table, macs, ifindex, name)
            for w in map_writes(compiled.layout(), entries):
                fd = bpf.open_pinned(loaded.maps[w.map_name])
                try:
                    bpf.update(fd, w.key, w.value, w.what)
                finally:
                    os.close(fd)
            rc, figures = timed(bpf, loaded.programs[TC_PROGRAM], data, args.runs)
            print(f"{name:<7} {figures} per forwarded frame (returns {rc}, 7 = redirected); "
                  f"{sizes(loaded.programs[TC_PROGRAM])}")
    finally:
        shutil.rmtree(PIN, ignore_errors=True)


if __name__ == "__main__":
    main()
