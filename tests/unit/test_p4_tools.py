"""Finding the P4 tools on PATH or under P4_PREFIX (fake executables, no bmv2 needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pathdiv.experiments.dataplane.bmv2.tools import (
    CLI,
    COMPILER,
    SWITCH,
    P4ToolsError,
    find_p4_tools,
    require_p4_tools,
)


def fake_tools(bindir: Path, names: tuple[str, ...] = (SWITCH, CLI, COMPILER)) -> None:
    bindir.mkdir(parents=True, exist_ok=True)
    for name in names:
        exe = bindir / name
        exe.write_text("#!/bin/sh\necho fake 1.0\n")
        exe.chmod(0o755)


def test_prefix_bin_is_searched_before_path(tmp_path: Path) -> None:
    fake_tools(tmp_path / "prefix" / "bin")
    fake_tools(tmp_path / "path")
    env = {"P4_PREFIX": str(tmp_path / "prefix"), "PATH": str(tmp_path / "path")}
    tools, reason = find_p4_tools(env)
    assert tools is not None
    assert tools.switch == tmp_path / "prefix" / "bin" / SWITCH
    assert "P4_PREFIX=" in reason and str(tools.compiler) in reason


def test_path_alone_is_enough(tmp_path: Path) -> None:
    fake_tools(tmp_path / "path")
    tools, _ = find_p4_tools({"PATH": str(tmp_path / "path")})
    assert tools is not None and tools.cli == tmp_path / "path" / CLI


def test_missing_tools_are_named(tmp_path: Path) -> None:
    """The finder names what is missing; what to install is the plane's registry entry's
    (config/planes.py), which the choice of plane prints beside it."""
    fake_tools(tmp_path / "path", (SWITCH,))
    tools, reason = find_p4_tools({"PATH": str(tmp_path / "path")})
    assert tools is None
    assert reason.startswith(f"{CLI}, {COMPILER} not found on PATH")
    assert "P4_PREFIX" in reason
    with pytest.raises(P4ToolsError, match=f"{COMPILER} not found"):
        require_p4_tools({"PATH": str(tmp_path / "path")})


def test_cli_runs_under_the_system_python(tmp_path: Path) -> None:
    fake_tools(tmp_path / "path")
    tools, _ = find_p4_tools({"PATH": str(tmp_path / "path")})
    assert tools is not None
    assert tools.cli_argv(9093) == ["/usr/bin/python3", str(tools.cli), "--thrift-port", "9093"]


def test_versions_come_from_the_tools(tmp_path: Path) -> None:
    fake_tools(tmp_path / "path")
    compiler = tmp_path / "path" / COMPILER
    compiler.write_text(f"#!/bin/sh\necho {compiler}\necho 'Version 1.2.5.16 (SHA: 34b8)'\n")
    tools, _ = find_p4_tools({"PATH": str(tmp_path / "path")})
    assert tools is not None
    assert tools.versions() == {SWITCH: "fake 1.0", COMPILER: "Version 1.2.5.16 (SHA: 34b8)"}
