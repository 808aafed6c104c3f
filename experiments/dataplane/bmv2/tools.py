"""Where the P4 tools are: `simple_switch`, `simple_switch_CLI` and `p4c-bm2-ss`.

They come from p4lang's packages (`p4lang-bmv2`, `p4lang-p4c`) on `PATH`, or from an
install prefix named by `P4_PREFIX` (its `bin/` is searched first). Finding them has
no side effects, so `dataplane: auto` can say which plane it chose and why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SWITCH = "simple_switch"
CLI = "simple_switch_CLI"
COMPILER = "p4c-bm2-ss"
# simple_switch_CLI imports Debian's python3-thrift; a venv's python may lack it.
CLI_PYTHON = "/usr/bin/python3"


class P4ToolsError(RuntimeError):
    """The P4 tools are missing or do not run."""


@dataclass(frozen=True)
class P4Tools:
    switch: Path
    cli: Path
    compiler: Path
    cli_python: str = CLI_PYTHON

    def cli_argv(self, thrift_port: int) -> list[str]:
        """argv that starts simple_switch_CLI against the switch on `thrift_port`."""
        return [self.cli_python, str(self.cli), "--thrift-port", str(thrift_port)]

    def versions(self) -> dict[str, str]:
        """The version line of `--version` of the switch and the compiler (for manifests)."""
        out: dict[str, str] = {}
        for name, path in ((SWITCH, self.switch), (COMPILER, self.compiler)):
            try:
                proc = subprocess.run(
                    [str(path), "--version"], capture_output=True, text=True, timeout=30
                )
                lines = (proc.stdout or proc.stderr).strip().splitlines()
                # p4c prints its own path first, then "Version ..."
                versioned = [ln for ln in lines if ln.strip().lower().startswith("version")]
                out[name] = (versioned or lines or ["unknown"])[0].strip()
            except (OSError, subprocess.TimeoutExpired) as exc:
                out[name] = f"unknown ({exc})"
        return out


def _search_dirs(env: Mapping[str, str]) -> list[Path]:
    dirs: list[Path] = []
    prefix = env.get("P4_PREFIX", "").strip()
    if prefix:
        dirs.append(Path(prefix) / "bin")
    dirs += [Path(p) for p in env.get("PATH", "").split(os.pathsep) if p]
    return dirs


def _which(name: str, dirs: list[Path]) -> Path | None:
    found = shutil.which(name, path=os.pathsep.join(str(d) for d in dirs))
    return Path(found) if found else None


def find_p4_tools(env: Mapping[str, str] | None = None) -> tuple[P4Tools | None, str]:
    """The tools, or None; plus one sentence saying where they were found or what is missing."""
    env = os.environ if env is None else env
    dirs = _search_dirs(env)
    where = (f"P4_PREFIX={env['P4_PREFIX']} and " if env.get("P4_PREFIX") else "") + "PATH"
    found = {name: _which(name, dirs) for name in (SWITCH, CLI, COMPILER)}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        return None, (f"{', '.join(missing)} not found on {where} (P4_PREFIX names an "
                      "install prefix whose bin/ is searched first)")
    if not Path(CLI_PYTHON).exists():
        return None, f"{CLI} needs {CLI_PYTHON} with Debian's python3-thrift, which is missing"
    switch, cli, compiler = found[SWITCH], found[CLI], found[COMPILER]
    assert switch and cli and compiler  # narrowed by `missing` above
    tools = P4Tools(switch=switch, cli=cli, compiler=compiler)
    return tools, f"found {SWITCH} at {switch} and {COMPILER} at {compiler} (via {where})"


def require_p4_tools(env: Mapping[str, str] | None = None) -> P4Tools:
    """The tools, or P4ToolsError with the reason."""
    tools, reason = find_p4_tools(env)
    if tools is None:
        raise P4ToolsError(reason)
    return tools
