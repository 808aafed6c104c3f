"""Who the lab kernel's guest is on the host and what it may reach: the unprivileged
uid UML runs as (GUEST_UID, never root's), whether that uid can enter a folder, which
folders a run needs that it could not reach (a checkout in a 0700 home: the jail
reveals those alone, kernels/uml_jail.py), the guest's tmpfs folders that would hide a
needed path, and the share handed over to the guest through folder descriptors."""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pathdiv.analysis.safefiles as safefiles
from pathdiv.kernels.build import LabKernelError
from pathdiv.kernels.uml_jail import bound_folders, inside

# The unprivileged user and group UML runs as: an id no account should use (pathdiv
# refuses one that names an account other than GUEST_NAME). It owns the share while the
# guest runs; everything else on the host it may only read where every user may.
GUEST_ID_ENV = "PATHDIV_GUEST_UID"
GUEST_UID = 64_999
GUEST_NAME = "pathdiv-guest"


def guest_id(environ: Mapping[str, str] | None = None) -> int:
    """The uid (and gid) UML runs as: PATHDIV_GUEST_UID, else GUEST_UID. Refused when it
    is root's or names an account other than GUEST_NAME (its files would be the guest's)."""
    text = (os.environ if environ is None else environ).get(GUEST_ID_ENV, str(GUEST_UID))
    try:
        uid = int(text)
    except ValueError:
        raise LabKernelError(f"{GUEST_ID_ENV}={text!r}: expected a number") from None
    if not 0 < uid < 2**31:
        raise LabKernelError(f"{GUEST_ID_ENV}={uid}: expected 1 to {2**31 - 1}, never root's 0")
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        return uid
    if name != GUEST_NAME:
        raise LabKernelError(
            f"uid {uid}, which the lab kernel runs as, is the account {name!r}: the guest "
            f"would own its files. Set {GUEST_ID_ENV} to an unused id (or name the account "
            f"{GUEST_NAME})")
    return uid


def enters(info: os.stat_result, uid: int, gid: int) -> bool:
    """Whether ``uid``:``gid`` (no other groups) may search the folder ``info`` describes."""
    if info.st_uid == uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid == gid:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)


def guest_reach(needed: Sequence[Path], share: Path, uid: int, gid: int,
                lookup: Callable[[Path], os.stat_result] = os.stat,
                ) -> tuple[list[str], list[str]]:
    """(cover, blocked): how the jail lets ``uid``:``gid`` reach the folders ``needed``
    (physical paths: the checkout, its Python, the share) and what it still cannot enter.

    ``cover``: for each needed folder with a folder on the way that uid cannot enter
    (a 0700 /root), the topmost such folder; the jail hides it under an empty tmpfs
    holding only the way down to the needed folders, which it binds there
    (kernels/uml_jail.py), so nothing else of that folder is reachable. ``blocked``:
    folders the guest still could not enter after that: a needed folder itself (but the
    share, which becomes uid's), or one between a bound folder and a needed one inside
    it (each once, for the message).
    """
    def enterable(folder: Path) -> bool:
        try:
            return enters(lookup(folder), uid, gid)
        except OSError:
            return True  # missing: the guest's own error says so

    cover: list[str] = []
    for path in needed:
        for folder in reversed(path.parents):
            if folder != Path("/") and not enterable(folder):
                if not any(inside(str(folder), c) for c in cover):
                    cover.append(str(folder))
                break
    bound = [b for b in bound_folders(str(share), [str(p) for p in needed], cover)
             if any(inside(b, c) for c in cover)]
    blocked: list[str] = []
    for path in needed:
        for folder in [*reversed(path.parents), path]:
            name = str(folder)
            # a folder of a cover's empty tmpfs (root's, 0755) is entered by every user
            virtual = any(inside(name, c) for c in cover) and \
                not any(inside(name, b) for b in bound)
            # the share itself is handed to uid before the boot
            if folder not in (Path("/"), share) and not virtual and \
                    not enterable(folder) and name not in blocked:
                blocked.append(name)
    return cover, blocked


def lend_share(share: Path, uid: int, gid: int) -> None:
    """Give the share (and what it holds) to the guest's user: walked through folder
    descriptors, no link followed (analysis/safefiles.py)."""
    fd = safefiles.open_dir(share)
    try:
        safefiles.chown_tree(fd, uid, gid)
    finally:
        os.close(fd)


# Mounted in the guest over the host's directories (hostfs root): the guest's own,
# empty, and lost when it stops.
GUEST_TMPFS = ("/tmp", "/run", "/var/tmp", "/dev/shm")


def hidden_by_tmpfs(paths: Sequence[Path]) -> list[Path]:
    """Host paths that the guest's own tmpfs mounts would hide (e.g. a share under /tmp)."""
    hidden: list[Path] = []
    for path in paths:
        if any(path == Path(d) or Path(d) in path.parents for d in GUEST_TMPFS):
            if not any(p == path or p in path.parents for p in hidden):
                hidden.append(path)
    return hidden
