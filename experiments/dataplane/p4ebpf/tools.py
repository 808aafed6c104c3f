"""Where the p4-ebpf plane's tools are: p4c-ebpf, its C runtime, clang and llc, libbpf, tc.

`p4c-ebpf` (p4lang's P4 compiler, eBPF back end) is looked up like the bmv2 tools:
`$P4_PREFIX/bin` first, then `PATH`. The C it writes includes p4c's eBPF runtime
headers (`backends/ebpf/runtime` of p4c's sources: `psa.h`, `ebpf_kernel.h`, and the
libbpf and bpftool headers p4c's build puts under `install/` and `contrib/`), which
`make install` does not install; pathdiv looks for them in `$P4C_EBPF_RUNTIME`, then
`share/p4c/ebpf/runtime` under `P4_PREFIX` and beside the `bin/` holding p4c-ebpf
(docs/p4.md says how to put them there). clang and llc (LLVM's BPF back end) compile
that C, libbpf 1.x (`libbpf.so.1`) loads the object, and iproute2's `tc` attaches it.
Finding them has no side effects; what is missing is named.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pathdiv.experiments.dataplane.p4ebpf.libbpf import find_libbpf

COMPILER = "p4c-ebpf"
RUNTIME_ENV = "P4C_EBPF_RUNTIME"
RUNTIME_SUBDIR = Path("share/p4c/ebpf/runtime")
# what the generated C includes, relative to the runtime folder
RUNTIME_FILES = ("psa.h", "ebpf_kernel.h", "install/libbpf/include/bpf/bpf_helpers.h",
                 "contrib/bpftool/include/uapi/linux/bpf.h")
LLVM_VERSIONS = tuple(range(19, 13, -1))  # clang-19 .. clang-14, after the plain names


@dataclass(frozen=True)
class EbpfTools:
    compiler: Path
    runtime: Path
    clang: Path
    llc: Path
    libbpf: str
    tc: Path

    def versions(self) -> dict[str, str]:
        """First version line of the compiler and clang (for digests and manifests)."""
        out: dict[str, str] = {}
        for name, path in ((COMPILER, self.compiler), ("clang", self.clang)):
            try:
                proc = subprocess.run([str(path), "--version"], capture_output=True,
                                      text=True, timeout=30)
                lines = (proc.stdout or proc.stderr).strip().splitlines()
                versioned = [ln for ln in lines if "version" in ln.lower()]
                out[name] = (versioned or lines or ["unknown"])[0].strip()
            except (OSError, subprocess.TimeoutExpired) as exc:
                out[name] = f"unknown ({exc})"
        return out


def _dirs(env: Mapping[str, str]) -> list[Path]:
    dirs: list[Path] = []
    prefix = env.get("P4_PREFIX", "").strip()
    if prefix:
        dirs.append(Path(prefix) / "bin")
    return dirs + [Path(p) for p in env.get("PATH", "").split(os.pathsep) if p]


def _which(names: list[str], dirs: list[Path]) -> Path | None:
    for name in names:
        found = shutil.which(name, path=os.pathsep.join(str(d) for d in dirs))
        if found:
            return Path(found)
    return None


def runtime_candidates(env: Mapping[str, str], compiler: Path | None) -> list[Path]:
    """Where the runtime headers may be, in search order."""
    out = []
    if env.get(RUNTIME_ENV):
        out.append(Path(env[RUNTIME_ENV]))
    if env.get("P4_PREFIX"):
        out.append(Path(env["P4_PREFIX"]) / RUNTIME_SUBDIR)
    if compiler is not None:
        out.append(compiler.resolve().parent.parent / RUNTIME_SUBDIR)
    return [*out, Path("/usr/local") / RUNTIME_SUBDIR, Path("/usr") / RUNTIME_SUBDIR]


def missing_runtime_files(folder: Path) -> list[str]:
    return [f for f in RUNTIME_FILES if not (folder / f).is_file()]


def find_ebpf_tools(env: Mapping[str, str] | None = None) -> tuple[EbpfTools | None, str]:
    """The tools, or None; plus one sentence saying where they are or what is missing."""
    env = os.environ if env is None else env
    dirs = _dirs(env)
    where = (f"P4_PREFIX={env['P4_PREFIX']} and " if env.get("P4_PREFIX") else "") + "PATH"
    compiler = _which([COMPILER], dirs)
    clang = _which(["clang", *(f"clang-{v}" for v in LLVM_VERSIONS)], dirs)
    llc = _which(["llc", *(f"llc-{v}" for v in LLVM_VERSIONS)], dirs)
    tc = _which(["tc"], [*dirs, Path("/usr/sbin"), Path("/sbin")])
    # attaches in a switch's network namespace without its mount namespace (util-linux)
    nsenter = _which(["nsenter"], [*dirs, Path("/usr/bin"), Path("/bin")])
    missing = [name for name, path in ((COMPILER, compiler), ("clang", clang), ("llc", llc),
                                       ("tc", tc), ("nsenter", nsenter)) if path is None]
    if missing:
        return None, f"{', '.join(missing)} not found on {where}"
    runtime = None
    looked = runtime_candidates(env, compiler)
    for folder in looked:
        if not missing_runtime_files(folder):
            runtime = folder
            break
    if runtime is None:
        return None, (f"p4c-ebpf's runtime headers ({RUNTIME_FILES[0]}, "
                      f"{RUNTIME_FILES[2]}, ...) are in none of "
                      f"{', '.join(str(d) for d in looked)} (set {RUNTIME_ENV} to "
                      "the folder holding them)")
    libbpf = find_libbpf()
    if libbpf is None:
        return None, "libbpf.so.1 cannot be loaded (Debian's libbpf1)"
    assert compiler and clang and llc and tc  # narrowed by `missing` above
    tools = EbpfTools(compiler, runtime, clang, llc, libbpf, tc)
    return tools, (f"found {COMPILER} at {compiler} (via {where}), its runtime at "
                   f"{runtime}, {clang.name} and {llc.name}")


class EbpfToolsError(RuntimeError):
    """The p4-ebpf tools are missing."""


def require_ebpf_tools(env: Mapping[str, str] | None = None) -> EbpfTools:
    tools, reason = find_ebpf_tools(env)
    if tools is None:
        raise EbpfToolsError(reason)
    return tools
