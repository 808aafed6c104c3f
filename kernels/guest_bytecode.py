"""One set of compiled modules for every boot of the lab kernel.

On the virtual clock the work a guest process does moves the packets (docs/decisions/
0008-network-reuse.md): the runner loading pathdiv's modules from their compiled files,
or compiling them from source because those files are missing or stale, changed every
FCT of the long static-TCP run of test_lab_reuse.py, by up to 10.3 s. The guest only reads
the checkout (the jail's user cannot write there), so which modules it finds compiled
was whatever host processes had left: in the test suite the host lane's processes
compile modules while the lab lane boots, so the same run gave other FCTs in the plan
and alone. Before each boot the host compiles the checkout's packages, so every boot
finds all of them compiled and up to date (about 0.1 s when nothing changed).

The compiler runs as the checkout's owner, in a process of its own with Python's
environment ignored (-I: a PYTHONPYCACHEPREFIX would put the files where the guest
does not look): root never writes into a checkout someone else owns, and compileall
does not descend into linked folders. A process that is neither root nor the owner
leaves the checkout as it is.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# The folders the editable install maps to pathdiv's packages (setup.py FOLDERS) and
# the top package itself.
PACKAGES = ("topologies", "experiments", "analysis", "kernels", "pathdiv")
COMPILE_TIMEOUT_S = 300.0


def compile_command(repo: Path) -> list[str]:
    """The compiler's command: quiet, timestamp-checked files beside the sources."""
    folders = [str(repo / name) for name in PACKAGES
               if (repo / name).is_dir() and not (repo / name).is_symlink()]
    return [sys.executable, "-I", "-m", "compileall", "-q", *folders]


def compile_checkout(repo: Path) -> bool:
    """Compile ``repo``'s packages as its owner; False when this process may not (it is
    neither root nor the owner) or the compiler failed (the boot goes on: the guest then
    compiles in memory, as before)."""
    owner = os.lstat(repo)
    euid = os.geteuid()
    if euid not in (0, owner.st_uid):
        return False
    root = euid == 0  # then the compiler drops to the owner, supplementary groups too
    try:
        done = subprocess.run(compile_command(repo), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=COMPILE_TIMEOUT_S, check=False,
                              user=owner.st_uid if root else None,
                              group=owner.st_gid if root else None,
                              extra_groups=[] if root else None)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0
