"""The P4 programs' sources (p4src/) and the cache both P4 planes compile them into.

A program is `p4src/<name>.p4` plus the shared `p4src/include/*.p4`, in a stable order;
what it compiles to is cached under `/var/cache/pathdiv/p4/` (override with
`PATHDIV_P4_CACHE`) by a digest of those sources, the compiler's version and its flags
(the bmv2 plane's `bmv2/programs.py`, the p4-ebpf plane's `p4ebpf/programs.py`).
"""

from __future__ import annotations

import os
from pathlib import Path

from pathdiv.experiments.dataplane.p4.entries import PROGRAMS
from pathdiv.kernels.build import unsafe_paths

P4SRC = Path(__file__).resolve().parents[3] / "p4src"
DEFAULT_CACHE = Path("/var/cache/pathdiv/p4")
CACHE_ENV = "PATHDIV_P4_CACHE"


class P4SourceError(RuntimeError):
    """A program that is not in p4src/ (or p4src/ is not where it should be)."""


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def cached_problems(files: list[Path], cache: Path) -> list[str]:
    """Why compiled files root is about to load (a bmv2 JSON, an eBPF object) could have
    been replaced by someone but root or this user: a link, another owner, group or other
    write permission on the files or the folders from the cache down (the checks linkcap
    and the kernel image get, kernels/build.py `unsafe_paths`). Empty when none."""
    found: list[str] = []
    for path in files:
        found += [p for p in unsafe_paths(path, cache, os.geteuid()) if p not in found]
    return found


def program_sources(name: str, root: Path = P4SRC) -> list[Path]:
    """The program's main file then the shared includes, in a stable order."""
    if name not in PROGRAMS:
        raise P4SourceError(f"P4 program {name!r} is not one of {', '.join(PROGRAMS)}")
    main = root / f"{name}.p4"
    if not main.exists():
        raise P4SourceError(f"{main} does not exist; is {root} a pathdiv p4src folder?")
    return [main, *sorted((root / "include").glob("*.p4"))]
