"""Choose the data-plane backend for a config and say why."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from pathdiv.experiments.config.switching import MODES
from pathdiv.experiments.dataplane.base import DataPlane, DataPlaneError
from pathdiv.experiments.dataplane.nftables import NftablesDataPlane
from pathdiv.experiments.dataplane.p4.programs import P4CompileError, compile_programs
from pathdiv.experiments.dataplane.p4.tools import require_p4_tools
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


def select_dataplane(wanted: str) -> tuple[type[DataPlane], str]:
    """(backend class, one-line reason) for `dataplane: kernel | bmv2 | auto`."""
    if wanted == "kernel":
        return NftablesDataPlane, "kernel data plane (as configured)"
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
        if cls is NftablesDataPlane and mode.kernel_rules is None:
            problem = (f"switching.mode: {mode.name!r} cannot run on the {reason}: "
                       f"{mode.kernel_refusal}")
            if problem not in out:
                out.append(problem)
    return out


def prepare_for_lab_kernel(wanted: Iterable[str]) -> list[str]:
    """Do on the host what a data plane cannot do in the lab kernel, whose view of the
    host's files is read-only: compile the P4 programs into their cache when any of the
    `wanted` planes (`dataplane:` values) resolves to bmv2 here. One line per thing done;
    DataPlaneError naming the program when the compiler fails."""
    resolved = {w: select_dataplane(w)[0] for w in set(wanted)}
    if not any(cls.name == "bmv2" for cls in resolved.values()):
        return []
    try:
        programs = compile_programs(require_p4_tools())
    except P4CompileError as exc:
        raise DataPlaneError(f"the P4 programs could not be compiled on the host: {exc}") \
            from exc
    where = {str(p.json.parent.parent) for p in programs.values()}
    return [f"P4 programs {', '.join(programs)} compiled on the host (cache {', '.join(where)})"]


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
