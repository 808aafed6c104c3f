"""Run a command where every host file is read-only except one folder (UML's host side).

    python3 -S kernels/uml_jail.py --share DIR --private DIR --private-mb N -- COMMAND...

In a new mount namespace (private propagation, so nothing leaks to the host's mounts):
every mount is made read-only recursively (``mount_setattr`` with ``AT_RECURSIVE``),
``--share`` is bound onto itself read-write, and a tmpfs of N MB is mounted on
``--private`` (UML's memory file and uml_dir: the only other writable place, invisible
to the host and gone with the namespace). Then COMMAND is exec'd without the
capabilities to undo that (CAP_SYS_ADMIN and a few more leave the bounding set). A guest
that remounts its hostfs read-write still cannot write elsewhere: the host refuses it.

Standard library only (it runs before anything else, with ``python3 -S``); Linux >= 5.12.
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_BIND, MS_REC, MS_PRIVATE = 0x1, 0x1000, 0x4000, 0x40000
MS_NOSUID, MS_NODEV = 0x2, 0x4
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY = 0x1
SYS_MOUNT_SETATTR = 442  # same number on x86_64 and aarch64 (generic table)
PR_CAPBSET_DROP = 24
# Capabilities UML never needs, dropped from the bounding set before the exec, so the
# UML process cannot undo the read-only mounts (sys_admin), load modules, reach raw
# devices or reboot the host, whatever its guest asks of it.
DROP_CAPS = {"sys_module": 16, "sys_rawio": 17, "sys_admin": 21, "sys_boot": 22,
             "sys_time": 25}


class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"uml_jail: {what}: {os.strerror(err)}")


def mount(source: str, target: str, fstype: str, flags: int, data: str = "") -> None:
    _check(libc.mount(source.encode(), target.encode(), fstype.encode(), flags,
                      data.encode() or None), f"mount {target}")


def set_readonly(path: str, readonly: bool, recursive: bool) -> None:
    attr = MountAttr(MOUNT_ATTR_RDONLY if readonly else 0, 0 if readonly else MOUNT_ATTR_RDONLY,
                     0, 0)
    rc = libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path.encode(),
                      AT_RECURSIVE if recursive else 0, ctypes.byref(attr),
                      ctypes.sizeof(attr))
    _check(rc, f"mount_setattr {path} {'ro' if readonly else 'rw'}")


def jail(share: str, private: str, private_mb: int) -> None:
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    mount("none", "/", "", MS_REC | MS_PRIVATE)
    set_readonly("/", True, recursive=True)
    mount(share, share, "", MS_BIND)
    set_readonly(share, False, recursive=False)
    # after the share's bind: the private folder may lie inside the share
    mount("pathdiv-uml", private, "tmpfs", MS_NOSUID | MS_NODEV, f"size={private_mb}m,mode=700")
    for name, cap in DROP_CAPS.items():
        _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop cap_{name}")


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    cut = argv.index("--")
    opts, command = argv[:cut], argv[cut + 1 :]
    values = dict(zip(opts[::2], opts[1::2], strict=False))
    try:
        share, private = values["--share"], values["--private"]
        private_mb = int(values["--private-mb"])
    except (KeyError, ValueError):
        print(__doc__, file=sys.stderr)
        return 2
    if not command:
        print("uml_jail: no command after --", file=sys.stderr)
        return 2
    try:
        jail(share, private, private_mb)
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"uml_jail: {exc}", file=sys.stderr)
        return 126
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
