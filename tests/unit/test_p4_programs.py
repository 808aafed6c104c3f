"""P4 program sources and their content hash (no compiler needed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pathdiv.experiments.dataplane.bmv2.programs import P4CompileError, program_digest
from pathdiv.experiments.dataplane.p4.entries import PROGRAMS
from pathdiv.experiments.dataplane.p4.sources import P4SRC, P4SourceError, program_sources


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tmp_path / "p4src"
    shutil.copytree(P4SRC, root)
    return root


def test_every_program_has_a_source_file() -> None:
    for name in PROGRAMS:
        main, *includes = program_sources(name)
        assert main == P4SRC / f"{name}.p4"
        assert P4SRC / "include" / "headers.p4" in includes


def test_digest_is_stable_and_depends_on_compiler_version(src: Path) -> None:
    assert program_digest("ecmp", "p4c 1.2.5", src) == program_digest("ecmp", "p4c 1.2.5", src)
    assert program_digest("ecmp", "p4c 1.2.5", src) != program_digest("ecmp", "p4c 1.2.6", src)
    assert program_digest("ecmp", "v", src) != program_digest("spray", "v", src)


def test_editing_a_shared_include_changes_every_digest(src: Path) -> None:
    before = {n: program_digest(n, "v", src) for n in PROGRAMS}
    egress = src / "include" / "egress.p4"
    egress.write_text(egress.read_text() + "\n// edited\n")
    after = {n: program_digest(n, "v", src) for n in PROGRAMS}
    assert all(before[n] != after[n] for n in PROGRAMS)


def test_unknown_program_lists_the_known_ones() -> None:
    with pytest.raises(P4SourceError, match="'wcmp' is not one of static, ecmp, spray, flowlet"):
        program_sources("wcmp")


def test_an_uncached_program_in_a_read_only_cache_says_to_compile_on_the_host(
    tmp_path: Path,
) -> None:
    from pathdiv.experiments.dataplane.bmv2.programs import compile_program
    from pathdiv.experiments.dataplane.bmv2.tools import P4Tools

    echo = Path("/bin/echo")  # answers --version; never asked to compile here
    tools = P4Tools(switch=echo, cli=echo, compiler=echo)
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # a cache below a file cannot be created, as in the guest
    with pytest.raises(P4CompileError, match="compiles the programs before it boots"):
        compile_program("ecmp", tools, cache=blocked / "p4")
