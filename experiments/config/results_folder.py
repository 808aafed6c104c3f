"""Which folders pathdiv may write results into, and who may read them.

pathdiv runs as root, so `--out` (and the folder a config's `name` makes) decides
where root writes, and, for lab-kernel runs, the one host folder the guest may write.
`out_problem` refuses, before anything is written:

- a path with a symbolic link in it, `..` taken where the kernel takes it (after the
  link: `x/link/..` is the link target's parent, not `x`), since a link planted in a
  shared folder would redirect root's writes, and the guest's writable share with
  them: pass the real path. `resolved_out` is the path resolved once, physically; root
  uses only that;
- run through sudo, a folder the invoking user could not have made: every folder on
  the way must be searchable by that user, an existing `out` must be theirs, a new one
  must go into a folder they may write (pathdiv hands the folder over to them, so
  `--out /var/www/empty` would give them a folder of root's);
- a system folder (/, /etc, /usr, /home, ...) or anything inside /etc, /usr, /boot,
  /proc, /sys, /dev, /run, /bin, /sbin, /lib;
- an existing folder that is not empty and not a pathdiv results folder (one holding
  MARKER, or config.yaml or plan.json as written before the marker; a foreign
  config.yaml is then refused as another experiment's);
- a results folder holding a symbolic link anywhere (pathdiv never follows one; a
  lab-kernel guest may write into the folder, so `analyze` checks again before it
  writes).

`hand_over` gives the folder and everything in it to the user who ran pathdiv through
sudo (SUDO_UID/SUDO_GID), so they can read and remove their own results: through
folder descriptors (`os.fwalk`, `fchown`), never following a link, once root has
finished writing the folder.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pathdiv.analysis.safefiles as safefiles
from pathdiv.experiments.config.files import invoking_user, user_groups, user_may

__all__ = ["MARKER", "hand_over", "invoking_user", "link_inside", "out_problem",
           "resolved_out", "user_problem"]

MARKER = ".pathdiv-results"
SYSTEM_FOLDERS = frozenset({"/", "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32",
                            "/lib64", "/boot", "/dev", "/proc", "/sys", "/run", "/var",
                            "/home", "/root", "/tmp", "/opt", "/srv", "/mnt", "/media",
                            "/var/tmp", "/var/lib", "/var/log", "/var/cache", "/usr/local"})
SYSTEM_TREES = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/boot",
                "/dev", "/proc", "/sys", "/run")


def is_results_folder(folder: Path) -> bool:
    return any((folder / name).is_file() for name in (MARKER, "config.yaml", "plan.json"))


def link_inside(folder: Path) -> Path | None:
    """The first symbolic link anywhere in `folder` (walked through folder descriptors,
    no link followed); None when there is none or `folder` cannot be opened."""
    try:
        fd = safefiles.open_dir(safefiles.resolve_physical(folder))
    except OSError:
        return None
    try:
        for root, dirs, files, rootfd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
            for name in sorted([*dirs, *files]):
                try:
                    mode = os.stat(name, dir_fd=rootfd, follow_symlinks=False).st_mode
                except OSError:
                    continue
                if stat.S_ISLNK(mode):
                    return Path(os.path.normpath(os.path.join(folder, root, name)))
    finally:
        os.close(fd)
    return None


def resolved_out(out: Path) -> Path:
    """`out` resolved once, physically (links followed, `..` after them): the one path
    root uses for the folder afterwards. Call after `out_problem` found none."""
    return safefiles.resolve_physical(out)


def user_problem(path: Path, user: tuple[int, int]) -> str | None:
    """Why the user `user` (uid, gid) could not have made the results folder `path`
    (physical) themselves; None when they could."""
    uid, gid = user
    groups = user_groups(uid, gid)
    existing = next(p for p in (path, *path.parents) if p.exists())
    for folder in reversed(existing.parents):
        if not user_may(folder.stat(), uid, groups, 0o1):
            return (f"{path}: uid {uid}, who ran pathdiv through sudo, cannot enter "
                    f"{folder}; give a results folder of your own")
    info = existing.stat()
    if existing == path:
        if info.st_uid != uid:
            return (f"{path} belongs to uid {info.st_uid}, not to uid {uid}, who ran "
                    "pathdiv through sudo; pathdiv would hand it to you: give a folder "
                    "of your own (a new one, or one of your results folders)")
        return None
    if not user_may(info, uid, groups, 0o3):
        return (f"{path}: uid {uid}, who ran pathdiv through sudo, may not make folders "
                f"in {existing}; give a results folder where you may write (pathdiv "
                "hands it to you)")
    return None


_ASK = (-1, -1)


def out_problem(out: Path, user: tuple[int, int] | None = _ASK) -> str | None:
    """Why `out` cannot be a results folder (None when it can). `user`: the user the
    folder will be handed to (default: the sudo user, `invoking_user`)."""
    link = safefiles.walk_links(out)
    if link is not None:
        return (f"{out}: {link} is a symbolic link; pathdiv writes results as root and "
                "follows no link: give the real path of the folder")
    path = resolved_out(out)
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
    owner = invoking_user() if user == _ASK else user
    return user_problem(path, owner) if owner is not None else None


def hand_over(folder: Path, owner: tuple[int, int] | None = None) -> int:
    """chown `folder` and everything below it to `owner` (default: the sudo user),
    through folder descriptors (analysis/safefiles.py `chown_tree`): a link is given
    itself, never its target, a file with a second hard link is skipped, and a folder
    reached through a link is not handed over at all. Returns how many entries changed
    owner. Call it once root has finished writing the folder."""
    owner = owner or invoking_user()
    if owner is None:
        return 0
    try:
        fd = safefiles.open_dir(os.path.abspath(folder))
    except OSError:
        return 0
    try:
        return safefiles.chown_tree(fd, *owner)
    finally:
        os.close(fd)
