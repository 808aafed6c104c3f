"""Choose the data-plane backend for a config and say why."""

from __future__ import annotations

import importlib

from pathdiv.experiments.dataplane.base import DataPlane, DataPlaneError
from pathdiv.experiments.dataplane.kernel import KernelDataPlane


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
        return KernelDataPlane, "kernel data plane (as configured)"
    cls, reason = _bmv2()
    if wanted == "bmv2":
        if cls is None:
            raise DataPlaneError(f"dataplane: bmv2 was asked for, but {reason}. Install "
                                 "p4lang-bmv2 and p4lang-p4c (see docs/p4.md) or set "
                                 "P4_PREFIX, or use dataplane: kernel")
        return cls, f"bmv2 data plane (as configured; {reason})"
    if cls is None:
        return KernelDataPlane, f"auto: kernel data plane, because {reason}"
    return cls, f"auto: bmv2 data plane ({reason})"
