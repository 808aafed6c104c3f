"""The PSA programs for eBPF: p4src/<name>.p4 compiled by p4c-ebpf, clang and llc, cached.

The same sources as the bmv2 plane's, compiled with `-DPATHDIV_PSA` (p4src/include/
arch.p4 picks the architecture). Three steps, as p4c's own `backends/ebpf/runtime/
kernel.mk` does them: p4c-ebpf writes C (`--arch psa --target kernel`), clang turns it
into LLVM bitcode against p4c's runtime headers, llc into a BPF object with BTF. Between
the first two, one edit lets a packet's sender go at the first switch (`release.py`). The
object's map layouts and action numbers are saved beside it (`layout.json`). Cached like
the bmv2 programs, under the same root (`PATHDIV_P4_CACHE`), by a digest of the sources,
the tools' versions and every flag; inside the lab kernel the host compiles first.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pathdiv.experiments.config.planes import PLANES
from pathdiv.experiments.config.switching import MODES
from pathdiv.experiments.dataplane.p4.sources import (
    P4SRC,
    cache_root,
    cached_problems,
    program_sources,
)
from pathdiv.experiments.dataplane.p4ebpf.btf import BtfError
from pathdiv.experiments.dataplane.p4ebpf.layout import ProgramLayout
from pathdiv.experiments.dataplane.p4ebpf.release import RELEASE, ReleaseEditError, release_senders
from pathdiv.experiments.dataplane.p4ebpf.tools import EbpfTools, require_ebpf_tools

ARCH_DEFINE = "-DPATHDIV_PSA"
P4C_FLAGS = ("--arch", "psa", "--target", "kernel", ARCH_DEFINE)
# kernel.mk's flags; -g gives the BTF that libbpf needs for the maps
CLANG_FLAGS = ("-O2", "-g", "-c", "-emit-llvm", "-D__KERNEL__", "-D__ASM_SYSREG_H",
               "-Wno-unused-value", "-Wno-pointer-sign", "-Wno-compare-distinct-pointer-types",
               "-Wno-gnu-variable-sized-type-not-at-end", "-Wno-address-of-packed-member",
               "-Wno-tautological-compare", "-Wno-unknown-warning-option")
# BPF ISA v3 (32-bit jumps and ALU): Linux >= 5.1, both the host's and the lab kernel
LLC_FLAGS = ("-march=bpf", "-mcpu=v3", "-filetype=obj")
# the modes whose programs have a PSA top level: all but those the plane's entry refuses
# (experiments/config/planes.py)
MODE_PROGRAMS = {m.name: m.program for m in MODES.values()
                 if m.name not in PLANES["p4-ebpf"].refused_modes}
PSA_PROGRAMS = tuple(dict.fromkeys(MODE_PROGRAMS.values()))
TC_PROGRAM = "tc_ingress_func"
INITIALIZER = "map_initializer"


class EbpfCompileError(RuntimeError):
    """A step of the compilation failed (the message names it and quotes its output)."""


@dataclass(frozen=True)
class CompiledEbpf:
    name: str
    digest: str
    c_file: Path
    obj: Path
    layout_file: Path
    log: Path

    def layout(self) -> ProgramLayout:
        return ProgramLayout.from_json(self.layout_file.read_text())


def program_digest(name: str, versions: dict[str, str], root: Path = P4SRC) -> str:
    if name not in PSA_PROGRAMS:
        raise EbpfCompileError(f"P4 program {name!r} has no PSA version; the p4-ebpf plane "
                               f"runs {', '.join(PSA_PROGRAMS)}")
    h = hashlib.sha256()
    for label, part in sorted(versions.items()):
        h.update(f"{label}={part}\0".encode())
    for flags in (P4C_FLAGS, CLANG_FLAGS, LLC_FLAGS):
        h.update((" ".join(flags) + "\0").encode())
    h.update(RELEASE.encode() + b"\0")
    for path in program_sources(name, root):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return "ebpf-" + h.hexdigest()[:20]


def _step(argv: Sequence[str], what: str, log: list[str], cwd: Path) -> None:
    proc = subprocess.run(list(argv), capture_output=True, text=True, cwd=cwd)
    log.append(f"$ {' '.join(argv)}\n{proc.stdout}{proc.stderr}")
    if proc.returncode != 0:
        raise EbpfCompileError(f"{what} failed (exit {proc.returncode}):\n"
                               f"{(proc.stdout + proc.stderr).strip()[-3000:]}")


def compile_program(name: str, tools: EbpfTools, cache: Path | None = None,
                    root: Path = P4SRC) -> CompiledEbpf:
    """The compiled program from the cache, compiling it first when absent."""
    digest = program_digest(name, tools.versions(), root)
    final = (cache or cache_root()) / digest
    prog = CompiledEbpf(name, digest, final / f"{name}.c", final / f"{name}.o",
                        final / "layout.json", final / "compile.log")
    if prog.obj.exists() and prog.layout_file.exists():
        _refuse_unsafe(prog, cache or cache_root(), final)
        return prog
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=final.parent))
    except OSError as exc:
        raise EbpfCompileError(
            f"{name}.p4 (PSA) is not compiled yet and its cache {final.parent} cannot be "
            f"written here ({exc.strerror}); inside the lab kernel the host compiles the "
            "programs before it boots the guest") from exc
    work.chmod(0o755)
    log: list[str] = []
    c_file, bitcode, obj = work / f"{name}.c", work / f"{name}.bc", work / f"{name}.o"
    try:
        try:
            _step([str(tools.compiler), *P4C_FLAGS, "-o", str(c_file), str(root / f"{name}.p4")],
                  f"p4c-ebpf on {name}.p4", log, root)
            c_file.write_text(release_senders(c_file.read_text()))
            _step([str(tools.clang), *CLANG_FLAGS, "-I", str(tools.runtime), "-o", str(bitcode),
                   str(c_file)], f"clang on {name}.c", log, work)
            _step([str(tools.llc), *LLC_FLAGS, "-o", str(obj), str(bitcode)],
                  f"llc on {name}.bc", log, work)
            (work / "layout.json").write_text(ProgramLayout.from_files(c_file, obj).to_json())
        except (BtfError, ReleaseEditError) as exc:
            raise EbpfCompileError(f"{name}: {exc}") from exc
        finally:
            (work / "compile.log").write_text("\n".join(log))
        bitcode.unlink()
        try:
            work.rename(final)
        except OSError:  # another process cached the same digest first
            if not prog.obj.exists():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _refuse_unsafe(prog, cache or cache_root(), final)
    return prog


def _refuse_unsafe(prog: CompiledEbpf, cache: Path, folder: Path) -> None:
    """The object root loads into the kernel, from a cache only root could have written
    (p4/sources.py `cached_problems`)."""
    problems = cached_problems([prog.obj, prog.layout_file], cache)
    if problems:
        raise EbpfCompileError(f"the compiled program in {folder} is not safe to load as "
                               f"root: {'; '.join(problems)}; remove {folder} and it is "
                               "compiled again")


def compile_programs(tools: EbpfTools, names: Sequence[str] | None = None,
                     cache: Path | None = None) -> dict[str, CompiledEbpf]:
    """Every PSA program a switch may load (each mode's, by default)."""
    wanted = list(names) if names is not None else sorted(set(MODE_PROGRAMS.values()))
    return {name: compile_program(name, tools, cache) for name in wanted}


def main() -> int:
    """`python -m pathdiv.experiments.dataplane.p4ebpf.programs`: fill the cache, print it."""
    for prog in compile_programs(require_ebpf_tools()).values():
        print(f"{prog.name}: {prog.obj}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
