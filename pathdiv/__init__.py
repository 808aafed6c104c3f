"""pathdiv: a testbed for multipath transport research in data-center networks.

`import pathdiv` gives the public Python API (docs/api.md): `pathdiv.load_config`,
`pathdiv.plan`, `pathdiv.run`, `pathdiv.network`, `pathdiv.open_results`, ... are the
names of `pathdiv.experiments.api`. They are loaded on first use, so that importing a
part of pathdiv (`python -m pathdiv.analysis` on a machine without the emulation stack,
a process in the lab kernel's guest) does not load the whole API.

This file is the installed package's top (setup.py maps `pathdiv` to this folder, and
`pathdiv.experiments` to experiments/, and so on); the code lives in the product's
folders, not here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker or an editor sees; at run time, __getattr__
    from pathdiv.experiments.api import *  # noqa: F403

API = "pathdiv.experiments.api"


def __getattr__(name: str) -> Any:
    api = importlib.import_module(API)
    if name.startswith("__") or name not in api.__all__:
        raise AttributeError(f"module 'pathdiv' has no attribute {name!r}; its names are "
                             "the public API's, listed in docs/api.md")
    return getattr(api, name)


def __dir__() -> list[str]:
    return sorted(importlib.import_module(API).__all__)
