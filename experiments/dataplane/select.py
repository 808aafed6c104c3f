"""Choose the data-plane backend for a config and say why."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from pathdiv.experiments.config.switching import MODES
from pathdiv.experiments.dataplane.base import DataPlane, DataPlaneError
from pathdiv.experiments.dataplane.nftables import NftablesDataPlane
from pathdiv.experiments.dataplane.p4.programs import P4CompileError, compile_programs
from pathdiv.experiments.dataplane.p4.tools import require_p4_tools
from pathdiv.experiments.dataplane.p4ebpf.programs import EbpfCompileError
from pathdiv.experiments.dataplane.p4ebpf.programs import compile_programs as compile_psa
from pathdiv.experiments.dataplane.p4ebpf.tools import find_ebpf_tools, require_ebpf_tools
from pathdiv.experiments.fabric.linkcap import LinkcapError, build_linkcap
from pathdiv.experiments.plan.runs import Run


def _bmv2() -> tuple[type[DataPlane] | None, str]:
    try:
        mod = importlib.import_module("pathdiv.experiments.dataplane.bmv2")
    except ImportError as exc:
        return None, f"the bmv2 backend is not installed in this checkout ({exc})"
    tools, reason = mod.find_p4_tools()
    if tools is None:
        return None, reason
    return mod.Bmv2DataPlane, reason


def _p4_ebpf() -> tuple[type[DataPlane] | None, str]:
    tools, reason = find_ebpf_tools()
    if tools is None:
        return None, reason
    mod = importlib.import_module("pathdiv.experiments.dataplane.ebpf")
    return mod.EbpfDataPlane, reason


def select_dataplane(wanted: str) -> tuple[type[DataPlane], str]:
    """(backend class, one-line reason) for `dataplane: kernel | bmv2 | p4-ebpf | auto`."""
    if wanted == "kernel":
        return NftablesDataPlane, "kernel data plane (as configured)"
    if wanted == "p4-ebpf":
        ebpf, why = _p4_ebpf()
        if ebpf is None:
            raise DataPlaneError(f"dataplane: p4-ebpf was asked for, but {why}; or use "
                                 "dataplane: kernel")
        return ebpf, f"p4-ebpf data plane (as configured; {why})"
    cls, reason = _bmv2()
    if wanted == "bmv2":
        if cls is None:
            raise DataPlaneError(f"dataplane: bmv2 was asked for, but {reason}. Install "
                                 "p4lang-bmv2 and p4lang-p4c (see docs/p4.md) or set "
                                 "P4_PREFIX, or use dataplane: kernel")
        return cls, f"bmv2 data plane (as configured; {reason})"
    if cls is None:
        return NftablesDataPlane, f"auto: kernel data plane, because {reason}"
    return cls, f"auto: bmv2 data plane ({reason})"


def mode_problems(runs: list[Run]) -> list[str]:
    """Runs whose switching mode the data plane they would get cannot run (a mode
    with no kernel rules, with dataplane: auto on a machine without bmv2)."""
    out = []
    for run in runs:
        cls, reason = select_dataplane(run.config.dataplane)
        mode = MODES[run.config.data["switching"]["mode"]]
        problem = None
        if cls is NftablesDataPlane and mode.kernel_rules is None:
            problem = (f"switching.mode: {mode.name!r} cannot run on the {reason}: "
                       f"{mode.kernel_refusal}")
        elif cls.name == "p4-ebpf" and not mode.psa:
            problem = (f"switching.mode: {mode.name!r} cannot run on the {reason}: "
                       f"{mode.psa_refusal}")
        if problem and problem not in out:
            out.append(problem)
    return out


def prepare_for_lab_kernel(wanted: Iterable[str]) -> list[str]:
    """Do on the host what cannot be done in the lab kernel, whose view of the host's
    files is read-only: build the link captures' program (fabric/linkcap.py; where it
    cannot be, the guest's runs capture with tcpdump, and the line says why), and compile
    the P4 programs into their cache when any of the `wanted` planes (`dataplane:`
    values) resolves to bmv2 or p4-ebpf here. One line per thing done; DataPlaneError
    naming the program when a compiler fails."""
    names = {select_dataplane(w)[0].name for w in set(wanted)}
    done = []
    try:
        done.append(f"link captures: {build_linkcap()}")
    except LinkcapError as exc:
        done.append(f"link captures: tcpdump ({exc})")
    if "bmv2" in names:
        try:
            programs = compile_programs(require_p4_tools())
        except P4CompileError as exc:
            raise DataPlaneError(f"the P4 programs could not be compiled on the host: "
                                 f"{exc}") from exc
        where = {str(p.json.parent.parent) for p in programs.values()}
        done.append(f"P4 programs {', '.join(programs)} compiled on the host "
                    f"(cache {', '.join(where)})")
    if "p4-ebpf" in names:
        try:
            psa = compile_psa(require_ebpf_tools())
        except EbpfCompileError as exc:
            raise DataPlaneError(f"the PSA programs could not be compiled on the host: "
                                 f"{exc}") from exc
        where = {str(p.obj.parent.parent) for p in psa.values()}
        done.append(f"PSA programs {', '.join(psa)} compiled for eBPF on the host "
                    f"(cache {', '.join(where)})")
    return done


def resolve_planes(wanted: Iterable[str]) -> dict[str, tuple[str, str]]:
    """`dataplane:` value -> (plane it runs on here, why), for `pathdiv check`; a plane
    that cannot run here resolves to "unavailable" with the reason."""
    out: dict[str, tuple[str, str]] = {}
    for value in sorted(set(wanted)):
        try:
            cls, reason = select_dataplane(value)
            out[value] = (cls.name, reason)
        except DataPlaneError as exc:
            out[value] = ("unavailable", str(exc))
    return out
