"""Run a command where it can write nothing on the host but one folder (UML's host side).

    python3 -S kernels/uml_jail.py --share DIR --private DIR --private-mb N \\
        --uid U --gid G --parent PID [--reveal DIR]... [--cover DIR]... -- COMMAND...

Started by root (pathdiv), it builds the jail and then runs COMMAND (User-Mode Linux)
as the unprivileged user U:G:

- a new mount namespace (private propagation: nothing leaks to the host's mounts) in
  which every mount is read-only recursively (``mount_setattr`` with ``AT_RECURSIVE``),
  ``--share`` is bound onto itself read-write, ``nosuid`` and ``nodev``, and a tmpfs of
  N MB owned by U is mounted on ``--private`` (UML's memory file and uml_dir, invisible
  to the host);
- what the guest needs but U could not reach: each ``--cover`` folder (one U cannot
  enter, e.g. a 0700 ``/root`` holding the checkout) gets an empty read-only tmpfs
  over it, with only the folders on the way to each ``--reveal`` folder below it, and
  each revealed folder (the checkout, the venv, the share) is bound there, read-only
  but the share. Nothing else of the covered folder is reachable, whatever its modes;
  the revealed folders keep their own modes and owners. The binds are clones of the
  folders taken before the cover (``open_tree``) and attached by ``move_mount``; every
  path is walked from ``/`` one component at a time without following a link;
- a new PID namespace with its own read-only /proc: COMMAND (PID 2, under a small init
  that waits for it) sees no host process (no ``/proc/1/root`` into the host's mounts);
  when it ends, the init ends, and the kernel kills everything else in the namespace;
- COMMAND runs as U:G with no supplementary groups, no capability but CAP_CHOWN (the
  guest's tools give files in the share away; see CAP_CHOWN below) and
  ``no_new_privs``: host permissions hold for every file hostfs opens, so a guest root
  that mounts any host folder reads only what every user may read (not /etc/shadow)
  and writes only where U may write (the share, which pathdiv hands to U);
- a parent-death signal on every process of the jail: when pathdiv dies, even by
  SIGKILL, this process gets SIGKILL, then the init does, and with it the namespace.

This process stays outside the new PID namespace, waits for COMMAND and exits with its
status. Standard library only (it runs before anything else, with ``python3 -S``);
Linux >= 5.12.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys

CLONE_NEWNS, CLONE_NEWPID = 0x00020000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000
AT_FDCWD, AT_EMPTY_PATH, AT_RECURSIVE = -100, 0x1000, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4
OPEN_TREE_CLONE = 1
MOVE_MOUNT_F_EMPTY_PATH, MOVE_MOUNT_T_EMPTY_PATH = 0x4, 0x40
# the same numbers on x86_64 and aarch64 (the generic table, since 5.2)
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
PR_SET_PDEATHSIG, PR_SET_KEEPCAPS, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 8, 24, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 47, 2
# The one capability UML keeps: the guest's tools chown what they write into the share
# (tcpdump gives its savefile to the user it drops to, and exits when it cannot).
# Without CAP_FOWNER and CAP_FSETID a chown clears set-user-ID bits and the new owner's
# file cannot be made set-user-ID again, and the share is the only writable place.
CAP_CHOWN = 0
LINUX_CAPABILITY_VERSION_3 = 0x20080522
ORPHANED = 125  # exit status when pathdiv was already gone before the jail was armed


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"uml_jail: {what}: {os.strerror(err)}")


def prctl(option: int, arg: int, what: str) -> None:
    _check(libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0), what)


def mount(source: str, target: str, fstype: str, flags: int, data: str = "") -> None:
    _check(libc.mount(source.encode(), target.encode(), fstype.encode(), flags,
                      data.encode() or None), f"mount {target}")


def set_attributes(fd: int, set_: int, clear: int, recursive: bool, what: str) -> None:
    """mount_setattr on the mount open at ``fd`` (and, ``recursive``, those below it)."""
    attr = MountAttr(set_, clear, 0, 0)
    rc = libc.syscall(SYS_MOUNT_SETATTR, fd, b"",
                      AT_EMPTY_PATH | (AT_RECURSIVE if recursive else 0), ctypes.byref(attr),
                      ctypes.c_size_t(ctypes.sizeof(attr)))
    _check(rc, f"mount_setattr {what}")


def open_path(path: str, create_below: int = 0) -> int:
    """A descriptor of folder ``path`` (absolute) reached from / one component at a time
    with O_NOFOLLOW: a symbolic link anywhere on the way is refused, whoever planted it.
    The last ``create_below`` components are made (0755) when missing."""
    parts = [p for p in path.split("/") if p]
    if not path.startswith("/") or ".." in parts:
        raise OSError(22, f"uml_jail: {path!r}: expected an absolute path without '..'")
    fd = os.open("/", DIR_FLAGS)
    try:
        for i, part in enumerate(parts):
            if i >= len(parts) - create_below:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise OSError(exc.errno, f"uml_jail: {'/' + '/'.join(parts[:i + 1])}: "
                                         f"{os.strerror(exc.errno or 0)} (no link is followed)"
                              ) from None
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def clone_tree(path: str) -> int:
    """A detached copy of the mounts at folder ``path`` and below it (``open_tree``)."""
    fd = open_path(path)
    try:
        tree = libc.syscall(SYS_OPEN_TREE, fd, b"",
                            OPEN_TREE_CLONE | os.O_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE)
    finally:
        os.close(fd)
    if tree < 0:
        _check(-1, f"open_tree {path}")
    return int(tree)


def attach_tree(tree: int, path: str, create_below: int = 0) -> None:
    """Attach the detached mount ``tree`` on folder ``path`` (``move_mount``)."""
    target = open_path(path, create_below)
    try:
        _check(libc.syscall(SYS_MOVE_MOUNT, tree, b"", target, b"",
                            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH),
               f"move_mount onto {path}")
    finally:
        os.close(target)
        os.close(tree)


def mount_at(path: str, source: str, fstype: str, flags: int, data: str) -> None:
    """mount(2) of a new file system on folder ``path``, reached through no link."""
    fd = open_path(path)
    try:
        mount(source, f"/proc/self/fd/{fd}", fstype, flags, data)
    finally:
        os.close(fd)


def set_path_attributes(path: str, set_: int, clear: int, recursive: bool) -> None:
    fd = open_path(path)
    try:
        set_attributes(fd, set_, clear, recursive, path)
    finally:
        os.close(fd)


def depth_below(path: str, top: str) -> int:
    """How many components of ``path`` lie below its ancestor ``top``."""
    return len([p for p in path.split("/") if p]) - len([p for p in top.split("/") if p])


def inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 40


def bound_folders(share: str, reveal: list[str], cover: list[str]) -> list[str]:
    """The folders the jail binds, parents first: each revealed folder under a cover
    but one inside another such folder (reached through that one), and the share (the
    one writable mount) always."""
    under = sorted({*(r for r in reveal if any(inside(r, c) and r != c for c in cover)),
                    share}, key=lambda p: (p.count("/"), p))
    return [r for r in under if r == share or not any(o != r and inside(r, o) for o in under)]


def mount_jail(share: str, private: str, private_mb: int, uid: int, gid: int,
               reveal: list[str], cover: list[str]) -> None:
    """This process's new mount namespace: all read-only but ``share`` and ``private``;
    each ``cover`` hidden under an empty tmpfs but for the ``reveal`` folders in it."""
    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWPID), "unshare(CLONE_NEWNS|CLONE_NEWPID)")
    mount("none", "/", "", MS_REC | MS_PRIVATE)
    set_path_attributes("/", MOUNT_ATTR_RDONLY, 0, recursive=True)
    # clones first: a cover hides the folders they come from. A folder inside another
    # revealed one is reached through that one's clone (the share always gets its own,
    # the one writable mount).
    bound = bound_folders(share, reveal, cover)
    trees = {r: clone_tree(r) for r in bound}
    set_attributes(trees[share], MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, MOUNT_ATTR_RDONLY,
                   recursive=False, what=share)
    for folder in sorted(cover, key=lambda p: p.count("/")):
        mount_at(folder, "pathdiv-cover", "tmpfs", MS_NOSUID | MS_NODEV,
                 "size=64k,nr_inodes=256,mode=755,uid=0,gid=0")
        # the way down to each folder revealed below it: the empty tmpfs's folders
        for r in bound:
            if inside(r, folder) and r != folder:
                os.close(open_path(r, create_below=depth_below(r, folder)))
        set_path_attributes(folder, MOUNT_ATTR_RDONLY, 0, recursive=False)
    for r in bound:
        attach_tree(trees[r], r)
    # after the share's bind: the private folder may lie inside the share
    mount_at(private, "pathdiv-uml", "tmpfs", MS_NOSUID | MS_NODEV,
             f"size={private_mb}m,mode=700,uid={uid},gid={gid}")


def become_guest(uid: int, gid: int, alive: int) -> None:
    """In the child (PID 1 of the new PID namespace): its own /proc, then U:G, no
    capabilities, no_new_privs (inherited by COMMAND), SIGKILL when the jail's outer
    process dies."""
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY)
    for cap in range(last_cap() + 1):
        if cap != CAP_CHOWN:
            prctl(PR_CAPBSET_DROP, cap, f"drop capability {cap} from the bounding set")
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    prctl(PR_SET_KEEPCAPS, 1, "keep capabilities across the uid change")
    os.setresuid(uid, uid, uid)  # clears the effective capabilities; permitted kept
    keep = 1 << CAP_CHOWN
    data = (CapData * 2)(CapData(keep, keep, keep), CapData(0, 0, 0))
    _check(libc.capset(ctypes.byref(CapHeader(LINUX_CAPABILITY_VERSION_3, 0)), data),
           "capset cap_chown")
    prctl(PR_SET_KEEPCAPS, 0, "keepcaps off")
    # ambient: kept across the exec of UML (no file capabilities involved)
    _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_CHOWN, 0, 0), "ambient cap_chown")
    prctl(PR_SET_NO_NEW_PRIVS, 1, "no_new_privs")
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "parent-death signal")  # after the uid change
    # the outer process holds the pipe's write end: end of file means it is gone already
    if select.select([alive], [], [], 0)[0]:
        os._exit(ORPHANED)
    os.close(alive)


def init(command: list[str]) -> int:
    """PID 1 of the namespace: start COMMAND (PID 2), reap whatever is left to it, and
    return COMMAND's status. COMMAND is not PID 1 itself: the kernel ignores signals a
    namespace's init sends itself, and UML ends a panic with abort()."""
    pid = os.fork()
    if pid == 0:
        try:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "parent-death signal")
            if os.getppid() != 1:
                os._exit(ORPHANED)
            os.execv(command[0], command)
        except OSError as exc:
            print(f"uml_jail: {exc}", file=sys.stderr)
        os._exit(126)
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 126
        if done == pid:
            return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else \
                128 + os.WTERMSIG(status)


def run(share: str, private: str, private_mb: int, uid: int, gid: int, parent: int,
        command: list[str], reveal: list[str] | None = None,
        cover: list[str] | None = None) -> int:
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "parent-death signal")
    if os.getppid() != parent:  # pathdiv died before the signal was armed
        return ORPHANED
    mount_jail(share, private, private_mb, uid, gid, reveal or [], cover or [])
    alive, hold = os.pipe()
    child = os.fork()
    if child == 0:  # PID 1 of the new PID namespace
        try:
            os.close(hold)
            become_guest(uid, gid, alive)
            os._exit(init(command))
        except OSError as exc:
            print(f"uml_jail: {exc}", file=sys.stderr)
        os._exit(126)
    os.close(alive)
    # SIGTERM/SIGHUP/SIGINT: end the guest's namespace at once (its init takes SIGKILL
    # from here), then this process ends by the same signal
    def stop(signum: int, frame: object) -> None:
        os.kill(child, signal.SIGKILL)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, stop)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else \
        128 + os.WTERMSIG(status)


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    cut = argv.index("--")
    opts, command = argv[:cut], argv[cut + 1 :]
    pairs = list(zip(opts[::2], opts[1::2], strict=False))
    values = dict(pairs)
    reveal = [v for k, v in pairs if k == "--reveal"]
    cover = [v for k, v in pairs if k == "--cover"]
    try:
        share, private = values["--share"], values["--private"]
        private_mb, uid, gid, parent = (int(values[k]) for k in (
            "--private-mb", "--uid", "--gid", "--parent"))
    except (KeyError, ValueError):
        print(__doc__, file=sys.stderr)
        return 2
    if not command:
        print("uml_jail: no command after --", file=sys.stderr)
        return 2
    if not os.path.isabs(command[0]):
        print("uml_jail: the command must be an absolute path", file=sys.stderr)
        return 2
    if uid == 0 or gid == 0:
        print("uml_jail: --uid and --gid must not be root's", file=sys.stderr)
        return 2
    try:
        return run(share, private, private_mb, uid, gid, parent, command, reveal, cover)
    except OSError as exc:
        print(f"uml_jail: {exc}", file=sys.stderr)
        return 126


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
