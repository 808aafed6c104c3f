"""pathdiv's public Python API (`from pathdiv.experiments import api`); docs/api.md
describes every name with an example and what may change between versions.

`pathdiv` itself is a namespace over the product's folders (setup.py maps them), so the
API lives in this one module, `pathdiv.experiments.api`; the command line goes through it too.
"""

from __future__ import annotations

import importlib
from typing import Any

from pathdiv.experiments.api.extend import register_metric, register_pattern, unregister_metric
from pathdiv.experiments.api.live import KernelNetwork, LiveNetwork, Transfer
from pathdiv.experiments.api.networks import network
from pathdiv.experiments.api.plans import (
    PlanTime,
    RunResult,
    RunStart,
    analyze,
    check_plan,
    expected_time,
    jobs_for,
    load_config,
    plan,
    plane_choices,
    run,
    shard_plan,
)
from pathdiv.experiments.config.load import Config, ConfigError
from pathdiv.experiments.fabric.environment import EnvironmentProblem
from pathdiv.experiments.plan.designations import Shape
from pathdiv.experiments.plan.runs import Run
from pathdiv.experiments.runner import RunProgress
from pathdiv.experiments.running import NetworkError

# Names of the analysis side, loaded on first use: pandas and the statistics stack stay
# out of the command line's start until a command needs them.
_LAZY = {"results": ("pathdiv.analysis.results", None),
         "Results": ("pathdiv.analysis.results", "Results"),
         "Statistics": ("pathdiv.analysis.results", "Statistics"),
         "open_results": ("pathdiv.analysis.results", "open"),
         "draw_links": ("pathdiv.analysis.report.linkmap", "link_map_svg"),
         "LabNetwork": ("pathdiv.experiments.api.lab", "LabNetwork")}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'pathdiv.experiments.api' has no attribute {name!r}")
    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    return module if attr is None else getattr(module, attr)


__all__ = [
    "Config",
    "ConfigError",
    "EnvironmentProblem",
    "KernelNetwork",
    "LabNetwork",
    "LiveNetwork",
    "NetworkError",
    "PlanTime",
    "Results",
    "Run",
    "RunProgress",
    "RunResult",
    "RunStart",
    "Shape",
    "Statistics",
    "Transfer",
    "analyze",
    "check_plan",
    "draw_links",
    "expected_time",
    "jobs_for",
    "load_config",
    "network",
    "open_results",
    "plan",
    "plane_choices",
    "register_metric",
    "register_pattern",
    "results",
    "run",
    "shard_plan",
    "unregister_metric",
]
