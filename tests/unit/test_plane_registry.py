"""The data-plane registry (config/planes.py) and `dataplane: auto` (dataplane/select.py):
every plane one entry and one module, read by the schema, the check, the estimate, the
network reuse rule and the lab kernel's preparation; auto's choice for every combination
of P4 tools present and absent (stand-in tools on PATH), its cost bound, and a planted
plane that touches only its own module and the registry."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pathdiv.experiments.config.load import ConfigError, load, validate
from pathdiv.experiments.config.planes import (
    AUTO_BOUND,
    BASELINE,
    PLANES,
    PlaneCost,
    choices,
    lookup,
)
from pathdiv.experiments.config.schema import SCHEMA
from pathdiv.experiments.config.switching import MODES
from pathdiv.experiments.dataplane import select
from pathdiv.experiments.dataplane.bmv2.tools import CLI, COMPILER, SWITCH
from pathdiv.experiments.dataplane.nftables.rules import MODE_RULES
from pathdiv.experiments.dataplane.p4ebpf import tools as ebpf_tools
from pathdiv.experiments.dataplane.p4ebpf.programs import MODE_PROGRAMS as PSA_PROGRAMS
from pathdiv.experiments.plan.runs import Run, expand
from tests.conftest import REPO

BMV2_TOOLS = (SWITCH, CLI, COMPILER)
EBPF_TOOLS = ("p4c-ebpf", "clang", "llc")


def test_every_entry_names_a_module_whose_switches_carry_its_name():
    for name, plane in PLANES.items():
        impl = select.implementation(plane)
        assert impl.switches.name == name
        assert lookup(name) is plane
    assert lookup("kernel") is PLANES[BASELINE]  # the former name stays an alias
    field = SCHEMA.fields["dataplane"]
    assert field.choices == choices() == ("nftables", "p4-ebpf", "bmv2", "kernel", "auto")
    assert all(name in field.doc for name in PLANES)


def test_what_a_plane_refuses_is_in_its_entry_and_nowhere_else():
    """The nftables plane has rules for every mode its entry does not refuse; p4-ebpf has
    a PSA program for every mode its entry does not refuse."""
    nft = PLANES["nftables"].refused_modes
    assert set(MODE_RULES) == {m for m in MODES if m not in nft}
    psa = PLANES["p4-ebpf"].refused_modes
    assert set(PSA_PROGRAMS) == {m for m in MODES if m not in psa}
    with pytest.raises(ConfigError, match=r"dataplane: nftables: switching.mode: 'flowlet' "
                       r"cannot run on nftables: the nftables plane keeps no per-flow"):
        validate({"dataplane": "nftables", "switching": {"mode": "flowlet"}})
    with pytest.raises(ConfigError, match=r"dataplane: kernel: switching.mode: 'flowlet'"):
        validate({"dataplane": "kernel", "switching": {"mode": "flowlet"}})
    with pytest.raises(ConfigError, match=r"dataplane: 'ovs' is not allowed; choose one of "
                       r"nftables, p4-ebpf, bmv2, kernel, auto"):
        validate({"dataplane": "ovs"})


# ---- auto, with stand-in tools ----------------------------------------------------------
def stand_ins(folder: Path, names: tuple[str, ...]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        exe = folder / name
        exe.write_text("#!/bin/sh\necho 'Version 1.2.5.16 (stand-in)'\n")
        exe.chmod(0o755)


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A machine whose PATH holds only the stand-ins asked for: `machine(bmv2=True,
    ebpf=False)` returns what `select.find_tools` finds there."""
    monkeypatch.delenv("P4_PREFIX", raising=False)
    runtime = tmp_path / "runtime"
    for rel in ebpf_tools.RUNTIME_FILES:
        (runtime / rel).parent.mkdir(parents=True, exist_ok=True)
        (runtime / rel).write_text("/* stand-in */\n")
    monkeypatch.setenv("P4C_EBPF_RUNTIME", str(runtime))
    monkeypatch.setattr(ebpf_tools, "find_libbpf", lambda: "libbpf.so.1")  # not on PATH

    def make(bmv2: bool, ebpf: bool) -> select.Found:
        bindir = tmp_path / f"bin-{int(bmv2)}{int(ebpf)}"
        stand_ins(bindir, (BMV2_TOOLS if bmv2 else ()) + (EBPF_TOOLS if ebpf else ()))
        monkeypatch.setenv("PATH", str(bindir))
        return select.find_tools()

    return make


def lab_run(flow: str = "query", **overrides) -> Run:
    cfg = load(REPO / "configs/noisy.yaml").with_overrides(list(overrides.items()))
    return next(r for r in expand(cfg, repetitions=1) if r.flow_type == flow)


def host_run(flow: str = "short", **overrides) -> Run:
    cfg = load(REPO / "configs/class-quick.yaml").with_overrides(
        [("dataplane", "auto"), *overrides.items()])
    return next(r for r in expand(cfg) if r.flow_type == flow)


INSTALL = "scripts/install-p4.sh"


@pytest.mark.parametrize(("bmv2", "ebpf", "lab_plane", "host_plane"), [
    (False, False, "nftables", "nftables"),
    (True, False, "nftables", "bmv2"),  # bmv2 on the lab kernel: far above the bound
    (False, True, "p4-ebpf", "p4-ebpf"),
    (True, True, "p4-ebpf", "p4-ebpf"),  # the cheaper P4 plane
])
def test_auto_picks_the_p4_plane_it_can_afford_for_each_set_of_tools(
        machine, bmv2, ebpf, lab_plane, host_plane):
    found = machine(bmv2, ebpf)
    assert found["bmv2"][0] is bmv2 and found["p4-ebpf"][0] is ebpf
    for run in (lab_run("query"), lab_run("long")):  # a cell's flow types land alike
        choice = select.choose(run, found)
        assert choice.plane == lab_plane, choice.reason
    host = select.choose(host_run(), found)
    assert host.plane == host_plane, host.reason
    lab = select.choose(lab_run(), found)
    if lab_plane == "p4-ebpf":
        assert lab.cell_ratio <= AUTO_BOUND and lab.rule.startswith("auto: the cheapest")
        assert lab.hint == ""  # on the fastest P4 plane: nothing to install
    else:  # what was passed over and why, and the one thing to install
        assert "p4-ebpf: p4c-ebpf" in lab.rule and "not found" in lab.rule
        assert lab.hint.endswith(PLANES["p4-ebpf"].install) and INSTALL in lab.hint
    if bmv2 and not ebpf:
        assert "bmv2: above auto's bound" in lab.rule
        assert lab.too_dear[0][0] == "bmv2" and lab.too_dear[0][1] > 5 * AUTO_BOUND
        assert host.cell_ratio <= AUTO_BOUND and INSTALL in host.hint


def test_auto_holds_a_plane_to_the_bound_on_its_cell(machine, monkeypatch):
    """A p4-ebpf that paid more per switch and per packet would stay unused; at the bound
    it is taken."""
    found = machine(bmv2=False, ebpf=True)
    run = lab_run("query")
    cost = PLANES["p4-ebpf"].cost("lab")

    def with_cost(scale: float) -> select.Choice:
        entry = dataclasses.replace(PLANES["p4-ebpf"], costs={"lab": PlaneCost(
            cost.per_switch_s * scale, cost.per_switch_mb_s * scale)})
        monkeypatch.setitem(PLANES, "p4-ebpf", entry)
        return select.choose(run, found)

    assert with_cost(1.0).plane == "p4-ebpf"
    dear = with_cost(40.0)
    assert dear.plane == "nftables" and dear.hint == ""  # p4-ebpf is there, just too dear
    assert "p4-ebpf: above auto's bound" in dear.rule
    assert dear.too_dear == (("p4-ebpf", select.cell_ratio(run, "p4-ebpf")),)
    # the largest scale that keeps the cell within the bound is taken, the next is not
    lo, hi = 1.0, 40.0
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if with_cost(mid).plane == "p4-ebpf" else (lo, mid)
    assert with_cost(hi).plane == "nftables"
    assert select.cell_ratio(run, "p4-ebpf") > AUTO_BOUND
    assert with_cost(lo).plane == "p4-ebpf"
    assert select.cell_ratio(run, "p4-ebpf") == pytest.approx(AUTO_BOUND, rel=1e-3)


def test_explicit_planes_mean_what_they_say(machine):
    found = machine(bmv2=True, ebpf=False)
    bmv2 = select.choose(lab_run("long", dataplane="bmv2"), found)
    assert bmv2.plane == "bmv2" and bmv2.rule == "as configured" and bmv2.ratio > 10
    ebpf = select.choose(lab_run(dataplane="p4-ebpf"), found)
    assert ebpf.plane is None and "p4c-ebpf, clang, llc not found" in ebpf.rule
    assert INSTALL in ebpf.rule
    old = select.choose(lab_run(dataplane="kernel"), found)
    assert old.plane == "nftables" and "former name" in old.rule and old.hint == ""


def test_a_mode_only_bmv2_carries_goes_to_bmv2_and_says_what_it_costs(machine):
    flowlet = {"switching.mode": "flowlet", "factors": {}}
    run = lab_run("long", **flowlet)
    with_bmv2 = select.choose(run, machine(bmv2=True, ebpf=True))
    assert with_bmv2.plane == "bmv2" and "the only plane found that carries it" in \
        with_bmv2.rule and with_bmv2.cell_ratio > AUTO_BOUND
    none = select.choose(run, machine(bmv2=False, ebpf=True))
    assert none.plane is None and "no plane here can run it" in none.rule
    assert select.plane_problems([run], machine(bmv2=False, ebpf=True)) == [
        f"dataplane: auto: {none.rule}"]


def test_the_guest_finds_what_each_plane_needs_in_its_environment():
    env = {"P4_PREFIX": "/opt/p4", "P4C_EBPF_RUNTIME": "/opt/rt", "HOME": "/root"}
    assert select.guest_env(env) == {"P4_PREFIX": "/opt/p4", "P4C_EBPF_RUNTIME": "/opt/rt"}


# ---- a planted plane ---------------------------------------------------------------------
PLANTED_MODULE = '''
"""A planted plane: the nftables plane's switches under another name, a tool of its own."""
from collections.abc import Mapping
from typing import Any

from pathdiv.experiments.dataplane.base import PlaneImplementation
from pathdiv.experiments.dataplane.flows import FiveTuple
from pathdiv.experiments.dataplane.nftables.plane import NftablesDataPlane


class MirrorDataPlane(NftablesDataPlane):
    name = "mirror"


def find_tools(env: Mapping[str, str]) -> tuple[Any, str]:
    tool = env.get("MIRROR_TOOL")
    return (tool, f"mirror at {tool}") if tool else (None, "MIRROR_TOOL is not set")


def member(t: FiveTuple, seed: int, members: int) -> int:
    return members - 1


def prepare() -> str:
    return "mirror prepared on the host"


IMPLEMENTATION = PlaneImplementation(MirrorDataPlane, find_tools, member, prepare)
'''

PLANTED_ENTRY = '''
PLANES["mirror"] = Plane(
    "mirror", "a planted P4 plane", "mirror.plane", p4=True, install="set MIRROR_TOOL",
    refused_modes={"spray": "mirror does not spray"},
    costs={"lab": PlaneCost(per_switch_s=0.01)}, guest_env=("MIRROR_TOOL",))
'''

PLANTED_CHECKS = '''
import os, sys
sys.path.insert(0, sys.argv[1])
import pathdiv.experiments.config.planes as planes
assert planes.__file__.startswith(sys.argv[1]), planes.__file__
from pathdiv.experiments.config.load import load, validate
from pathdiv.experiments.config.schema import SCHEMA
from pathdiv.experiments.dataplane import select
from pathdiv.experiments.dataplane.ecmp_model import FiveTuple, PathModel
from pathdiv.experiments.fabric.netstate import reuse_key
from pathdiv.experiments.plan.estimate import expected_run_s
from pathdiv.experiments.plan.runs import expand

print("choices", SCHEMA.fields["dataplane"].choices)
cfg = load(os.path.join(sys.argv[2], "configs", "noisy.yaml"))
run = [r for r in expand(cfg, repetitions=1) if r.config.mode == "ecmp"][0]
spray = [r for r in expand(cfg, repetitions=1) if r.config.mode == "spray"][0]
os.environ["PATH"] = "/nonexistent"
os.environ.pop("P4_PREFIX", None)
print("without", select.choose(run).plane, "|", select.choose(run).hint)
os.environ["MIRROR_TOOL"] = "/opt/mirror"
print("with", select.choose(run).plane, "|", select.choose(run).found)
print("spray", select.choose(spray).plane)
print("explicit", validate({"dataplane": "mirror"}).dataplane)
print("costs", expected_run_s(run, "mirror") > expected_run_s(run))
topo = run.config.fat_tree("test")
model = PathModel(topo, __import__("pathdiv.topologies.forwarding", fromlist=["x"])
                  .forwarding_tables(topo), "mirror")
print("member", model.member("e1", FiveTuple("10.0.0.2", "10.3.1.3", 6, 1, 2)))
print("reuse", reuse_key(run.config.data, "mirror"))
print("guest", select.guest_env())
print("prepare", select.prepare_for_lab_kernel(["mirror"])[1:])
'''


def test_a_planted_plane_needs_only_its_module_and_a_registry_entry(tmp_path):
    """A copy of the product gets a new plane: experiments/dataplane/mirror/plane.py and an
    entry appended to the registry; no other file changes. The schema, auto (with and
    without its tool), an explicit config, the estimate, the ECMP model, the reuse rule,
    the guest's environment and the lab-kernel preparation all take it."""
    pkg = tmp_path / "pathdiv"
    for folder in ("topologies", "experiments", "analysis", "kernels", "p4src"):
        shutil.copytree(REPO / folder, pkg / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "linux-*"))
    (pkg / "__init__.py").write_text("")
    module = pkg / "experiments" / "dataplane" / "mirror"
    module.mkdir()
    (module / "__init__.py").write_text('"""The planted plane."""\n')
    (module / "plane.py").write_text(textwrap.dedent(PLANTED_MODULE))
    registry = pkg / "experiments" / "config" / "planes.py"
    registry.write_text(registry.read_text() + PLANTED_ENTRY)
    env = {k: v for k, v in os.environ.items()  # no P4 tools or settings of this machine
           if k not in {n for p in PLANES.values() for n in p.guest_env}}
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(PLANTED_CHECKS),
                          str(tmp_path), str(REPO)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    out = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    assert out["choices"] == "('nftables', 'p4-ebpf', 'bmv2', 'mirror', 'kernel', 'auto')"
    # without its tool: the nftables plane, and the hint names the cheapest P4 plane for
    # the cell, p4-ebpf (it reuses its network; the planted plane builds one every run)
    without, hint = out["without"].split(" | ", 1)
    assert without == "nftables" and hint.endswith(PLANES["p4-ebpf"].install)
    assert out["with"] == "mirror | mirror at /opt/mirror"
    assert out["spray"] == "nftables"  # refused by its entry: the run stays on nftables
    assert out["explicit"] == "mirror"
    assert out["costs"] == "True"
    assert out["member"] == "1"  # its own member function: the last of two uplinks
    assert out["reuse"] == "None"  # not reusable unless its entry says so
    assert out["guest"] == "{'MIRROR_TOOL': '/opt/mirror'}"
    assert out["prepare"] == "['mirror prepared on the host']"
