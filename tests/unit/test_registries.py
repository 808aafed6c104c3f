"""The registries of extension points: switching modes (flowlet selectable; a new mode is one
entry and one P4 file), and the schedulers and congestion controls of the lab kernel's
patches, and the workload patterns."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest

from pathdiv.experiments.config.load import ConfigError, validate
from pathdiv.experiments.config.schema import SCHEMA
from pathdiv.experiments.config.switching import MODES
from pathdiv.experiments.config.workloads import PATTERNS
from pathdiv.experiments.dataplane import select
from pathdiv.experiments.dataplane.bmv2.programs import MODE_PROGRAMS
from pathdiv.experiments.dataplane.p4.entries import (
    R_FLOWLET_GAP,
    EntryOptions,
    network_entries,
)
from pathdiv.experiments.dataplane.p4.sources import P4SRC, program_sources
from pathdiv.experiments.plan.designations import SHAPES
from pathdiv.experiments.plan.runs import expand
from pathdiv.kernels.abilities import LAB_ONLY_CCS, LAB_SCHEDULERS, lab_kernel_abilities
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.forwarding import forwarding_tables
from tests.conftest import REPO


def test_the_schema_the_p4_programs_and_the_data_planes_read_one_registry():
    switching = SCHEMA.fields["switching"].fields
    assert switching["mode"].choices == ("static", "ecmp", "spray", "flowlet")
    assert MODE_PROGRAMS == {name: mode.program for name, mode in MODES.items()}
    for mode in MODES.values():
        assert program_sources(mode.program)[0] == P4SRC / f"{mode.program}.p4"
        for param in mode.params:
            assert switching[param.key].default == param.default


def test_flowlet_is_a_mode_a_config_selects_with_its_gap():
    cfg = validate({"dataplane": "bmv2",
                    "switching": {"mode": "flowlet", "flowlet_gap_us": 250}})
    topo = FatTree(4)
    entries = network_entries(topo, forwarding_tables(topo), MODE_PROGRAMS[cfg.mode],
                              _options(cfg.data["switching"]))
    gaps = {(r.register, r.value) for e in entries.values() for r in e.registers
            if r.register == R_FLOWLET_GAP}
    assert gaps == {(R_FLOWLET_GAP, 250)}


def _options(switching):
    return EntryOptions(switching["spray"], switching["flowlet_gap_us"])


def test_flowlet_on_the_nftables_plane_is_refused_at_check_naming_the_key():
    with pytest.raises(ConfigError) as err:
        validate({"dataplane": "nftables", "switching": {"mode": "flowlet"}})
    assert "dataplane: nftables: switching.mode: 'flowlet' cannot run on nftables: the " \
           "nftables plane keeps no per-flow idle-gap state; use dataplane: bmv2" in \
           str(err.value)
    with pytest.raises(ConfigError, match=r"switching.flowlet_gap_us: 0 .*>= 1"):
        validate({"dataplane": "bmv2", "switching": {"mode": "flowlet", "flowlet_gap_us": 0}})
    with pytest.raises(ConfigError, match=r"switching.flowlet_gap_us: 10000001 .*<= 10000000"):
        validate({"dataplane": "bmv2",
                  "switching": {"mode": "flowlet", "flowlet_gap_us": 10_000_001}})


def test_flowlet_with_auto_and_no_bmv2_is_refused_before_a_run():
    found = {"nftables": (True, "Linux"), "bmv2": (False, "simple_switch not found"),
             "p4-ebpf": (True, "p4c-ebpf at /opt/p4/bin")}
    runs = expand(validate({"dataplane": "auto", "switching": {"mode": "flowlet"}}))
    (problem,) = select.plane_problems(runs, found)
    assert problem.startswith(
        "dataplane: auto: no plane here can run it: switching.mode: 'flowlet' cannot run on "
        "nftables: the nftables plane keeps no per-flow idle-gap state; use dataplane: "
        "bmv2; p4-ebpf: switching.mode: 'flowlet' cannot run on p4-ebpf: its P4 program "
        "has no PSA version")
    assert "bmv2: simple_switch not found" in problem
    assert select.plane_problems(expand(validate({"dataplane": "auto"})), found) == []


PLANTED_ENTRY = '''
MODES["sportpin"] = SwitchingMode(
    "sportpin", "the source port alone picks the path", "sportpin", up_group=True,
    registers=lambda switching: {"sport_seed": int(switching.get("sportpin_seed", 7))},
    params=(Param("sportpin_seed", 7, "hash seed of mode sportpin"),),
)
'''

PLANTED_RULES = '''
MODE_RULES["sportpin"] = lambda group, switching: [
    f"meta l4proto tcp meta mark set jhash th sport mod {group.members} "
    f"seed {switching.get('sportpin_seed', 7)} offset 1"]
'''

PLANTED_CHECKS = '''
import sys
sys.path.insert(0, sys.argv[1])
import pathdiv.experiments.config.switching as sw
assert sw.__file__.startswith(sys.argv[1]), sw.__file__
from pathdiv.experiments.config.load import validate
from pathdiv.experiments.config.schema import SCHEMA
from pathdiv.experiments.dataplane.nftables.rules import nft_ruleset
from pathdiv.experiments.dataplane.p4.entries import EntryOptions, network_entries
from pathdiv.experiments.dataplane.bmv2.programs import MODE_PROGRAMS
from pathdiv.experiments.dataplane.p4.sources import program_sources
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.forwarding import forwarding_tables

cfg = validate({"switching": {"mode": "sportpin", "sportpin_seed": 11}})
print("choices", SCHEMA.fields["switching"].fields["mode"].choices)
topo = FatTree(4)
tables = forwarding_tables(topo)
print("nftables", nft_ruleset(tables["e1"], "sportpin", "random").count("jhash th sport"))
entries = network_entries(topo, tables, MODE_PROGRAMS["sportpin"])
print("registers", sorted({r.register for e in entries.values() for r in e.registers}))
print("program", program_sources("sportpin")[0].name)
'''


def test_a_planted_mode_needs_only_a_registry_entry_a_p4_file_and_its_nftables_rules(tmp_path):
    """A copy of the product gets a new mode: an entry appended to the registry,
    p4src/sportpin.p4, and its rules appended to the nftables plane's; no other file
    changes. Config, the nftables rules, P4 entries and the program's sources all take it."""
    pkg = tmp_path / "pathdiv"
    for folder in ("topologies", "experiments", "analysis", "kernels", "p4src"):
        shutil.copytree(REPO / folder, pkg / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "linux-*"))
    (pkg / "__init__.py").write_text("")
    registry = pkg / "experiments" / "config" / "switching.py"
    registry.write_text(registry.read_text() + PLANTED_ENTRY)
    rules = pkg / "experiments" / "dataplane" / "nftables" / "rules.py"
    rules.write_text(rules.read_text() + PLANTED_RULES)
    (pkg / "p4src" / "sportpin.p4").write_text(
        (REPO / "p4src" / "ecmp.p4").read_text().replace("pathdiv ecmp", "pathdiv sportpin"))
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(PLANTED_CHECKS), str(tmp_path)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    out = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    assert out["choices"] == "('static', 'ecmp', 'spray', 'flowlet', 'sportpin')"
    assert out["nftables"] == "1"
    assert "'PathdivIngress.select_member.sport_seed'" in out["registers"]
    assert out["program"] == "sportpin.p4"


PLANTED_SCHEDULER = """--- /dev/null
+++ b/net/mptcp/sched_arp.c
+static struct mptcp_sched_ops mptcp_sched_arp = {
+\t.name\t\t= "arp",
+};
"""


def test_schedulers_and_congestion_controls_a_config_may_name_come_from_the_patches(tmp_path):
    hosts = SCHEMA.fields["hosts"].fields
    lab = lab_kernel_abilities()
    assert hosts["scheduler"].choices == LAB_SCHEDULERS
    assert set(LAB_SCHEDULERS) == set(lab.schedulers)
    assert set(LAB_ONLY_CCS) <= set(hosts["cc"].choices) and "lia" in LAB_ONLY_CCS
    # a new patch in the series that registers a scheduler: it is a choice of the lab kernel
    shutil.copytree(REPO / "kernels" / "patches", tmp_path / "patches")
    (tmp_path / "patches" / "0099-mptcp-add-the-arp-scheduler.patch").write_text(
        PLANTED_SCHEDULER)
    shutil.copy(REPO / "kernels" / "uml.config", tmp_path / "uml.config")
    planted = lab_kernel_abilities(tmp_path, tmp_path / "uml.config")
    assert planted.schedulers == lab.schedulers | {"arp"}


def test_every_workload_pattern_of_the_registry_has_its_shape_or_arrivals():
    assert SCHEMA.fields["workload"].fields["pattern"].choices == tuple(PATTERNS)
    closed = [name for name, p in PATTERNS.items() if not p.open_loop]
    assert list(SHAPES) == closed
    assert [name for name, p in PATTERNS.items() if p.open_loop] == ["poisson"]
