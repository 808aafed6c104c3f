"""Which folders pathdiv may write results into, and who may read them.

pathdiv runs as root, so `--out` (and the folder a config's `name` makes) decides
where root writes, and, for lab-kernel runs, the one host folder the guest may write.
`out_problem` refuses, before anything is written:

- a path with a symbolic link in it (a link planted in a shared folder would redirect
  root's writes, and the guest's writable share with them): pass the real path;
- a system folder (/, /etc, /usr, /home, ...) or anything inside /etc, /usr, /boot,
  /proc, /sys, /dev, /run, /bin, /sbin, /lib;
- an existing folder that is not empty and not a pathdiv results folder (one holding
  MARKER, or config.yaml or plan.json as written before the marker; a foreign
  config.yaml is then refused as another experiment's);
- a results folder holding a symbolic link anywhere (pathdiv never follows one; a
  lab-kernel guest may write into the folder, so `analyze` checks again before it
  writes).

`hand_over` gives the folder and everything in it to the user who ran pathdiv through
sudo (SUDO_UID/SUDO_GID), so they can read and remove their own results.
"""

from __future__ import annotations

import os
from pathlib import Path

MARKER = ".pathdiv-results"
SYSTEM_FOLDERS = frozenset({"/", "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32",
                            "/lib64", "/boot", "/dev", "/proc", "/sys", "/run", "/var",
                            "/home", "/root", "/tmp", "/opt", "/srv", "/mnt", "/media",
                            "/var/tmp", "/var/lib", "/var/log", "/var/cache", "/usr/local"})
SYSTEM_TREES = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/boot",
                "/dev", "/proc", "/sys", "/run")


def _symlink_on_path(path: Path) -> Path | None:
    """The first component of the absolute `path` that is a symbolic link, if any."""
    current = Path(path.parts[0])
    for part in path.parts[1:]:
        current = current / part
        if current.is_symlink():
            return current
        if not current.exists():
            return None
    return None


def is_results_folder(folder: Path) -> bool:
    return any((folder / name).is_file() for name in (MARKER, "config.yaml", "plan.json"))


def link_inside(folder: Path) -> Path | None:
    """The first symbolic link anywhere in `folder` (walked without following any)."""
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in sorted([*dirs, *files]):
            path = Path(root) / name
            if path.is_symlink():
                return path
    return None


def out_problem(out: Path) -> str | None:
    """Why `out` cannot be a results folder (None when it can)."""
    path = Path(os.path.abspath(out))
    link = _symlink_on_path(path)
    if link is not None:
        return (f"{out}: {link} is a symbolic link; pathdiv writes results as root and "
                "follows no link: give the real path of the folder")
    text = str(path)
    if text in SYSTEM_FOLDERS or any(text == t or text.startswith(t + "/")
                                     for t in SYSTEM_TREES):
        return (f"{out} is a system folder; give a folder of its own for the results, "
                "e.g. results/my-run")
    if path.exists() and not path.is_dir():
        return f"{out} exists and is not a folder"
    if path.is_dir() and any(path.iterdir()) and not is_results_folder(path):
        return (f"{out} is a folder that is not empty and holds no pathdiv results; give "
                "a new or empty folder (an existing results folder is resumed)")
    link = link_inside(path) if path.is_dir() else None
    if link is not None:
        return (f"{out} holds the symbolic link {link}; pathdiv follows no link in a "
                "results folder: remove it")
    return None


def invoking_user() -> tuple[int, int] | None:
    """(uid, gid) of the user who ran pathdiv through sudo; None when run directly."""
    if os.geteuid() != 0:
        return None
    try:
        uid, gid = int(os.environ["SUDO_UID"]), int(os.environ["SUDO_GID"])
    except (KeyError, ValueError):
        return None
    return (uid, gid) if uid > 0 else None


def hand_over(folder: Path, owner: tuple[int, int] | None = None) -> int:
    """chown `folder` and everything below it (links themselves, never their targets)
    to `owner` (default: the sudo user); returns how many entries changed owner."""
    owner = owner or invoking_user()
    if owner is None or not folder.is_dir() or folder.is_symlink():
        return 0
    uid, gid = owner
    changed = 0
    for root, dirs, files in os.walk(folder, followlinks=False):
        # a folder is changed as the root of its own walk; a link to one is not walked
        links = [d for d in dirs if os.path.islink(os.path.join(root, d))]
        for name in [None, *files, *links]:
            path = root if name is None else os.path.join(root, name)
            try:
                os.chown(path, uid, gid, follow_symlinks=False)
                changed += 1
            except OSError:
                continue
    return changed
