"""The bmv2 plane's programs: p4src/<name>.p4 compiled by p4c-bm2-ss, cached by content hash.

A program's digest covers its sources (`p4/sources.py`), the compiler's version and the
compiler flags, so a fresh clone on the same machine reuses `/var/cache/pathdiv/p4/<digest>/`
(override with `PATHDIV_P4_CACHE`) and an edited include recompiles every program.

Inside the lab kernel the host's files are read-only, the cache too: the host compiles
what a plan may load (`compile_programs`) before it boots the guest, which then only
reads the cache.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pathdiv.experiments.config.switching import MODES
from pathdiv.experiments.dataplane.bmv2.tools import P4Tools, require_p4_tools
from pathdiv.experiments.dataplane.p4.sources import (
    P4SRC,
    cache_root,
    cached_problems,
    program_sources,
)

COMPILER_FLAGS = ("--std", "p4-16", "--arch", "v1model")
# data plane mode -> program that implements it
MODE_PROGRAMS = {m.name: m.program for m in MODES.values()}


class P4CompileError(RuntimeError):
    """p4c-bm2-ss failed on a program."""


@dataclass(frozen=True)
class CompiledProgram:
    name: str
    digest: str
    json: Path
    p4info: Path
    log: Path

    @property
    def warnings(self) -> list[str]:
        """Compiler diagnostics (an empty list for a warning-free program)."""
        text = self.log.read_text() if self.log.exists() else ""
        return [ln for ln in text.splitlines() if ln.strip()]


def refuse_unsafe(files: list[Path], cache: Path, folder: Path) -> None:
    problems = cached_problems(files, cache)
    if problems:
        raise P4CompileError(f"the compiled program in {folder} is not safe to load as "
                             f"root: {'; '.join(problems)}; remove {folder} and it is "
                             "compiled again")


def program_digest(name: str, compiler_version: str, root: Path = P4SRC) -> str:
    h = hashlib.sha256()
    h.update(f"{compiler_version}\0{' '.join(COMPILER_FLAGS)}\0".encode())
    for path in program_sources(name, root):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def compile_program(
    name: str, tools: P4Tools, cache: Path | None = None, root: Path = P4SRC
) -> CompiledProgram:
    """The compiled program from the cache, compiling it first when absent."""
    version = tools.versions().get("p4c-bm2-ss", "unknown")
    digest = program_digest(name, version, root)
    final = (cache or cache_root()) / digest
    prog = CompiledProgram(
        name, digest, final / f"{name}.json", final / f"{name}.p4info.txtpb", final / "compile.log"
    )
    if prog.json.exists() and prog.p4info.exists():
        refuse_unsafe([prog.json, prog.p4info], cache or cache_root(), final)
        return prog
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=final.parent))
    except OSError as exc:
        raise P4CompileError(
            f"{name}.p4 is not compiled for {version} yet and its cache {final.parent} "
            f"cannot be written here ({exc.strerror}); inside the lab kernel the host's "
            "files are read-only, so the host compiles the programs before it boots the "
            "guest: compile them on the host with the same tools "
            "(`python -m pathdiv.experiments.dataplane.bmv2.programs`)"
        ) from exc
    work.chmod(0o755)
    try:
        argv = [
            str(tools.compiler), *COMPILER_FLAGS,
            "-o", str(work / prog.json.name),
            "--p4runtime-files", str(work / prog.p4info.name),
            str(root / f"{name}.p4"),
        ]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=root)
        (work / "compile.log").write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            raise P4CompileError(
                f"p4c-bm2-ss failed on {name}.p4 (exit {proc.returncode}):\n"
                f"{(proc.stdout + proc.stderr).strip()[-3000:]}"
            )
        try:
            work.rename(final)
        except OSError:  # another process cached the same digest first
            if not prog.json.exists():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    refuse_unsafe([prog.json, prog.p4info], cache or cache_root(), final)
    return prog


def compile_programs(
    tools: P4Tools, names: list[str] | None = None, cache: Path | None = None
) -> dict[str, CompiledProgram]:
    """Every program a switch may load (each mode's, by default), compiled or from the cache."""
    wanted = names if names is not None else sorted(set(MODE_PROGRAMS.values()))
    return {name: compile_program(name, tools, cache) for name in wanted}


def main() -> int:
    """`python -m pathdiv.experiments.dataplane.bmv2.programs`: fill the cache, print it."""
    for prog in compile_programs(require_p4_tools()).values():
        print(f"{prog.name}: {prog.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
