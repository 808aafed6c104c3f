"""Shared test fixtures: root/namespace detection, the lab kernel (built once)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from pathdiv.kernels.processes import restore_sigint

REPO = Path(__file__).resolve().parents[1]
# Runs of tests (fake guests, odd configs) are not this machine's pace: they never go into
# the run history the estimates are calibrated from (experiments/plan/history.py).
os.environ["PATHDIV_HISTORY"] = "off"
# A suite started by a script with `&` inherits SIGINT ignored, and so would every
# process the tests start and then stop with SIGINT, as a user's Ctrl-C.
restore_sigint()


def load_script(relative: str):
    """A script of the repository that is not a package module (scripts/, benchmarks/,
    tests/support/), imported by its path; registered in sys.modules under its file name
    so that its dataclasses can look their module up."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def namespaces_usable() -> str | None:
    """None when network namespaces work here, else the reason they do not."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "tc", "nft", "mnexec", "tcpdump"):
        if shutil.which(tool) is None:
            return f"{tool} not found; run `make setup`"
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True)
    if probe.returncode != 0:
        return f"cannot create a network namespace: {probe.stderr.decode().strip()}"
    return None


@pytest.fixture(scope="session")
def root_fabric() -> None:
    reason = namespaces_usable()
    if reason:
        pytest.skip(reason)


def lab_kernel_missing() -> str | None:
    """None when the lab kernel (User-Mode Linux) can be built and booted here, else why."""
    from pathdiv.kernels import build

    if os.geteuid() != 0:
        return "needs root (UML's private mount namespace and the guest's namespaces)"
    if not build.SOURCE_TARBALL.exists():
        return f"{build.SOURCE_TARBALL} missing (apt-get install {build.SOURCE_PACKAGE})"
    tools = [t for t in ("make", "gcc", "bc", "flex", "bison", "patch") if not shutil.which(t)]
    return f"missing {', '.join(tools)} (scripts/install-deps.sh)" if tools else None


def open_for_guest(path: Path) -> None:
    """Let the lab kernel's unprivileged user (kernels/uml.py GUEST_UID) enter `path` and
    the folders above it: pytest makes its temporary folders for root alone (0700)."""
    for folder in [path, *path.parents]:
        mode = folder.stat().st_mode
        if not mode & 0o001:
            folder.chmod((mode & 0o7777) | 0o001)


@pytest.fixture(scope="session")
def lab_kernel() -> Path:
    """The lab kernel, built first when not cached (~15 min on 2 idle cores, once)."""
    from pathdiv.kernels import build

    reason = lab_kernel_missing()
    if reason:
        pytest.skip(reason)
    return build.find_lab_kernel() or build.build_lab_kernel()


def dataplane_class(name: str):
    """The data plane class a test parametrised by plane name runs on (a registry name or
    an older one); a plane whose tools are not found (PATH or P4_PREFIX) skips the test
    with the reason."""
    from pathdiv.experiments.dataplane import select

    impl = select.implementation(name)
    tools, why = impl.find_tools(os.environ)
    if tools is None:
        pytest.skip(f"{name} not available: {why}")
    return impl.switches


def build_patch_driver(work: Path, patch_name: str, files: list[str], driver: str,
                       sources: list[str],
                       earlier: Sequence[tuple[str, list[str]]] = ()) -> Path:
    """Compile a user-space driver (kernels/test/`driver`.c) against kernel C files that a
    patch creates (`files`: paths in the kernel tree, written into `work`), plus the
    `sources` among them; skip when no C compiler is found. `earlier`: (patch, files) of
    the patches whose files these build on. Returns the binary."""
    from pathdiv.kernels.build import KERNELS_DIR, new_file_from_patch

    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip(f"no C compiler (cc/gcc) to build the user-space {driver}")
    for name, paths in [*earlier, (patch_name, files)]:
        patch = (KERNELS_DIR / "patches" / name).read_text()
        for path in paths:
            (work / Path(path).name).write_text(new_file_from_patch(patch, path))
    binary = work / driver
    subprocess.run(
        [cc, "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O1",
         "-I", str(KERNELS_DIR / "test" / "include"), "-I", str(work),
         "-o", str(binary), str(KERNELS_DIR / "test" / f"{driver}.c"),
         *(str(work / name) for name in sources)],
        check=True,
    )
    return binary


def count_packets(path: Path) -> int:
    """Records in a classic little-endian pcap file."""
    buf, n, off = path.read_bytes(), 0, 24
    while off + 16 <= len(buf):
        off += 16 + int.from_bytes(buf[off + 8:off + 12], "little")
        n += 1
    return n


def missing_packets(run_dir: Path) -> dict[str, tuple[int, int]]:
    """Links whose capture holds fewer packets than their interface counted over the
    capture window (manifest `interface_counters`): {interface: (captured, counted)}.

    Buffered captures are stopped only after the kernel has handed over its last block;
    a stop that came too early shows here as a shortfall with 0 'dropped by kernel'."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    counters = manifest["interface_counters"]
    short = {}
    for pcap in sorted((run_dir / "captures").glob("*.pcap")):
        c = counters[pcap.stem]
        counted, captured = c["rx_packets"] + c["tx_packets"], count_packets(pcap)
        if captured < counted:
            short[pcap.stem] = (captured, counted)
    return short
