"""Run commands in the lab kernel, User-Mode Linux (built by kernels/build.py).

A run boots UML on the host's root file system through hostfs. The clock is
``virtual`` (``time-travel=inf-cpu``: CPU work takes no guest time and idle time is
skipped, so links are the only bottleneck and a run may finish faster than real time)
or ``real`` (the wall clock). UML runs in a jail (kernels/uml_jail.py): a private host
mount namespace in which every mount is read-only except the share folder and a private
tmpfs for UML's own memory file, a PID namespace of its own, and an unprivileged user
(GUEST_UID) with no capability but CAP_CHOWN, so the host's permissions hold for every file the
guest's hostfs opens. The guest is root and may mount any host folder, but the host
refuses writes outside the share and reads of files only root may read. UML dies with
the pathdiv process that started it (a parent-death signal).

Pure parts (command lines, guest init script) come first; the functions that run
processes (:func:`run_in_uml`, :func:`stop_uml`) after them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pwd
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import termios
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pathdiv.kernels.build import (
    LabKernelError,
    build_lab_kernel,
    find_lab_kernel,
    verify_image,
)
from pathdiv.kernels.processes import (
    OWNER_ENV,
    owner_mark,
    restore_handlers,
    stop_on_signals,
)

KERNELS_DIR = Path(__file__).resolve().parent
REPO_DIR = KERNELS_DIR.parent
CONTROL_DIR = ".labkernel"
CLOCKS = ("virtual", "real")
# Guest memory: a k=4 fat-tree run (36 namespaces, Mininet, captures, python transfers;
# ~150 guest processes) peaked at 480 MB used (configs/class-quick.yaml --quick); 1.5 GiB
# leaves room for socket buffers and page cache. The host pays only for pages touched.
MEMORY_MB = 1536
JAIL = KERNELS_DIR / "uml_jail.py"
# The unprivileged user and group UML runs as: an id no account should use (pathdiv
# refuses one that names an account other than GUEST_NAME). It owns the share while the
# guest runs; everything else on the host it may only read where every user may.
GUEST_ID_ENV = "PATHDIV_GUEST_UID"
GUEST_UID = 64_999
GUEST_NAME = "pathdiv-guest"

Log = Callable[[str], None]


# --------------------------------------------------------------------------- pure parts


def boot_args(init: Path, clock: str, memory_mb: int, uml_dir: Path,
              terminal: tuple[int, int] | None = None) -> list[str]:
    """UML command-line arguments: host root via hostfs, ``init`` as PID 1, the clock.

    Without ``terminal`` the console goes to UML's stdout (the console log) and no input
    is read from the host. With ``terminal`` (host fds in, out: the user's terminal) the
    guest's first console line, /dev/tty0, is that terminal, and the kernel's messages go
    to a serial line on UML's stdout (the console log) instead.
    """
    if clock not in CLOCKS:
        raise LabKernelError(f"clock {clock!r} is not one of {', '.join(CLOCKS)}")
    args = [f"mem={memory_mb}M", "rootfstype=hostfs", "rootflags=/", "rw",
            f"init={init}", f"uml_dir={uml_dir}", "umid=pathdiv", "con=null"]
    if terminal is None:
        args += ["con0=null,fd:1", "ssl=null"]
    else:
        args += [f"con0=fd:{terminal[0]},fd:{terminal[1]}", "ssl=null", "ssl0=null,fd:1",
                 "console=ttyS0"]
    args.append("quiet")
    if clock == "virtual":
        args.append("time-travel=inf-cpu")
    return args


def jail_argv(python: str, share: Path, private: Path, private_mb: int,
              command: Sequence[str], uid: int = GUEST_UID, gid: int = GUEST_UID,
              parent: int | None = None) -> list[str]:
    """Run ``command`` as ``uid``:``gid`` where the host's files are read-only except ``share``.

    uml_jail.py (standard library only, run with ``-S``) unshares a mount and a PID
    namespace, makes every mount read-only recursively, mounts a tmpfs of ``private_mb``
    MB on ``private`` (UML's memory file and uml_dir) and a writable bind of ``share``,
    then runs ``command`` in the new PID namespace (under a small init), unprivileged, with
    no_new_privs and SIGKILL when ``parent`` (this process by default) dies.
    """
    return [python, "-S", str(JAIL), "--share", str(share), "--private", str(private),
            "--private-mb", str(private_mb), "--uid", str(uid), "--gid", str(gid),
            "--parent", str(os.getpid() if parent is None else parent), "--", *command]


def pinned(command: list[str], cpu: int | None) -> list[str]:
    """``command`` bound to host CPU ``cpu`` (None: unchanged).

    UML is one host process for the guest's kernel and one per guest process, and they
    hand the one guest CPU to each other: at every system call and page fault of a guest
    process the UML kernel resumes it with ptrace and waits for it to stop again. On
    different host CPUs each hand-off wakes an idle CPU (in a VM, an interrupt through
    the hypervisor); on one CPU it is a plain context switch. The affinity is inherited
    by every process UML starts. Without util-linux's taskset nothing is bound."""
    if cpu is None or shutil.which("taskset") is None:
        return command
    return ["taskset", "--cpu-list", str(cpu), *command]


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


def unreachable(paths: Sequence[Path], uid: int, gid: int) -> list[str]:
    """Folders on the way to ``paths`` that ``uid``:``gid`` cannot enter (no search
    permission for it), each once: the guest reads the host's files as that user."""
    found: list[str] = []
    for path in paths:
        for folder in reversed(path.parents):
            try:
                st = folder.stat()
            except OSError:
                continue
            if st.st_uid == uid:
                bit = stat.S_IXUSR
            elif st.st_gid == gid:
                bit = stat.S_IXGRP
            else:
                bit = stat.S_IXOTH
            if not st.st_mode & bit and str(folder) not in found:
                found.append(str(folder))
    return found


def hand_over(share: Path, uid: int, gid: int) -> None:
    """Give the share (and what it holds) to the guest's user; symlinks are not followed."""
    os.chown(share, uid, gid, follow_symlinks=False)
    for root, dirs, files in os.walk(share):
        for name in dirs + files:
            with contextlib.suppress(FileNotFoundError):
                os.chown(os.path.join(root, name), uid, gid, follow_symlinks=False)


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


def guest_init(argv: Sequence[str], cwd: Path, control: Path,
               env: dict[str, str] | None = None, share: Path | None = None,
               terminal: bool = False, stdin: Path | None = None) -> str:
    """PID 1 of the guest: mount what a Linux system needs, run ``argv``, power off.

    The command's status goes to ``control`` (in the share), its output too unless
    ``terminal``: then it runs in a session of its own on /dev/tty0 (the user's terminal,
    its controlling terminal: Ctrl-C and Ctrl-D reach it). Its input is ``stdin`` (a file)
    or nothing. ``env`` is exported to the command. The share and ``cwd`` stay visible
    when they lie under a directory that gets the guest's own tmpfs (mounted again from
    the host through hostfs). The guest powers off with sysrq ``o`` whatever happens.
    """
    c = shlex.quote(str(control))
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())
    tmpfs = "".join(
        f"mount -t tmpfs -o mode=1777 tmpfs {d} 2>/dev/null || true\n" for d in GUEST_TMPFS
    )
    for path in hidden_by_tmpfs([share or control.parent.parent, cwd]):
        q = shlex.quote(str(path))
        tmpfs += f"mkdir -p {q} && mount -t hostfs -o {q} hostfs {q}\n"
    enter = f"cd {shlex.quote(str(cwd))} && exec "
    if terminal:
        run = (f"({enter}setsid -c {shlex.join(argv)}) < /dev/tty0 > /dev/tty0 2>&1\n")
    else:
        source = "/dev/null" if stdin is None else shlex.quote(str(stdin))
        run = f"({enter}{shlex.join(argv)}) < {source} > {c}/stdout 2> {c}/stderr\n"
    return (
        "#!/bin/sh\n"
        "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
        "export HOME=/root LANG=C.UTF-8\n"
        "mount -t proc proc /proc\n"
        "mount -t sysfs sysfs /sys\n"
        "mount -t devtmpfs devtmpfs /dev 2>/dev/null || true\n"
        "mkdir -p /dev/pts /dev/shm 2>/dev/null\n"
        "mount -t devpts devpts /dev/pts 2>/dev/null || true\n"
        f"{tmpfs}"
        "mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null || true\n"
        "mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true\n"
        # one memory layout and one order of Python's sets and dicts in every boot: on
        # the virtual clock the work a process does moves the packets, and with either
        # drawn at random the same bmv2 run gave other FCTs from boot to boot
        "echo 0 > /proc/sys/kernel/randomize_va_space\n"
        "export PYTHONHASHSEED=0\n"
        "ip link set lo up\n"
        "hostname pathdiv-lab\n"
        f"{exports}"
        f"uname -r > {c}/release\n"
        f"{run}"
        f"echo $? > {c}/rc.tmp && mv {c}/rc.tmp {c}/rc\n"
        "sync\n"
        "echo o > /proc/sysrq-trigger\n"
        "sleep 60\n"
    )


# Host environment variables the guest inherits: where tools are (PATH) and the
# terminal's type. What a data plane needs besides (P4_PREFIX and the like) its caller
# passes as `env` (experiments/dataplane/select.py, `guest_env`).
PASSED_ENV = ("PATH", "TERM")


def passed_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of the host's environment exported to the guest's command."""
    return {k: environ[k] for k in PASSED_ENV if environ.get(k)}


# --------------------------------------------------------------------------- running


@dataclass(frozen=True)
class UMLResult:
    """Outcome of one command run in the UML lab kernel."""

    returncode: int
    stdout: str
    stderr: str
    clock: str
    kernel_release: str
    seconds: float


def run_in_uml(
    argv: Sequence[str],
    share: Path,
    kernel: Path,
    timeout_s: float | None,
    clock: str = "virtual",
    memory_mb: int = MEMORY_MB,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    poll: Callable[[], None] | None = None,
    poll_s: float = 2.0,
    terminal: bool = False,
    stdin: bytes | None = None,
    channel: tuple[int, int] | None = None,
    cpu: int | None = None,
) -> UMLResult:
    """Boot UML ``kernel`` on this machine's root file system, run ``argv``, return its result.

    ``share`` is writable in the guest at the same path; every other host file is
    read-only (enforced by the host). The exit status and output are the command's own,
    read back from ``share/.labkernel/<id>/``, next to the console log. ``poll`` is called
    every ``poll_s`` seconds of wall time (progress, watchdogs); whatever it raises stops
    UML and propagates, as do Ctrl-C, SIGTERM turned into an exception, and ``timeout_s``
    (wall seconds): UML never outlives this call.

    ``terminal``: the command runs on this process's stdin/stdout terminal (the guest's
    /dev/tty0; its output is not captured; the terminal's settings are restored after).
    Otherwise its input is ``stdin`` (bytes, written to the control folder) or nothing.
    ``channel`` (host fds in, out; e.g. a pseudo-terminal's side) stands for that terminal:
    the command runs on it as with ``terminal``, and the caller talks to the guest through
    it (experiments/api/lab.py serves a live network this way). ``cpu``: run UML and every
    process of the guest on that host CPU only (:func:`pinned`).
    """
    if channel is not None:
        terminal = True
    if not kernel.is_file():
        raise LabKernelError(f"lab kernel {kernel} does not exist; build it with `make kernel`")
    if clock not in CLOCKS:
        raise LabKernelError(f"clock {clock!r} is not one of {', '.join(CLOCKS)}")
    verify_image(kernel)
    share = share.resolve()
    control = share / CONTROL_DIR / uuid.uuid4().hex[:12]
    control.mkdir(parents=True)
    init = control / "init.sh"
    stdin_file = None
    if stdin is not None and not terminal:
        stdin_file = control / "stdin"
        stdin_file.write_bytes(stdin)
    guest_env = {**passed_env(os.environ), **(env or {})}
    init.write_text(guest_init(argv, (cwd or Path.cwd()).resolve(), control, guest_env, share,
                               terminal=terminal, stdin=stdin_file))
    init.chmod(0o755)
    console = control / "console.log"
    private = control / "uml"  # UML's own tmpfs is mounted here, in its mount namespace
    private.mkdir()
    fds: tuple[int, int] | None = None
    saved_tty = None
    feeder: int | None = None
    relays: list[threading.Thread] = []
    if channel is not None:  # the caller's channel: UML's own copies of its fds
        fds = (os.dup(channel[0]), os.dup(channel[1]))
    elif terminal:  # UML's own copies of the terminal; it puts the terminal in raw mode
        if os.isatty(sys.stdin.fileno()):
            fds = (os.dup(sys.stdin.fileno()), os.dup(sys.stdout.fileno()))
            saved_tty = termios.tcgetattr(fds[0])
        else:  # input from a pipe or file: typed on a pseudo-terminal, its end as Ctrl-D
            master, slave = os.openpty()
            fds = (slave, slave)
            feeder = master
            spoke = threading.Event()
            relays = [threading.Thread(target=relay_input,
                                       args=(sys.stdin.fileno(), master, spoke), daemon=True),
                      threading.Thread(target=relay_output,
                                       args=(master, sys.stdout.fileno(), spoke), daemon=True)]
            for thread in relays:
                thread.start()
    uid = guest_id()
    blocked = unreachable([share, kernel, Path(sys.executable), (cwd or Path.cwd()) / "x"],
                          uid, uid)
    if blocked:
        raise LabKernelError(
            f"the lab kernel reads the host's files as uid {uid}, which cannot enter "
            f"{', '.join(blocked)}: give those folders search permission for every user "
            "(chmod o+x) or put pathdiv, its Python and the results folder elsewhere")
    hand_over(share, uid, uid)
    command = pinned(jail_argv(sys.executable, share, private, memory_mb + 64,
                               [str(kernel), *boot_args(init, clock, memory_mb, private, fds)],
                               uid=uid, gid=uid), cpu)
    (control / "command").write_text(shlex.join(command) + "\n")
    # the marker lets `pathdiv clean` stop a UML whose pathdiv is gone
    proc_env = dict(os.environ, TMPDIR=str(private))
    proc_env[OWNER_ENV] = owner_mark()
    start = time.monotonic()
    try:
        with console.open("w") as out:
            # its own session: Ctrl-C reaches us only, and we stop every UML process together
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, env=proc_env,
                                    start_new_session=True, pass_fds=tuple(set(fds or ())))
            try:
                while True:
                    try:
                        proc.wait(timeout=poll_s)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    if timeout_s is not None and time.monotonic() - start > timeout_s:
                        raise LabKernelError(
                            f"UML did not finish {shlex.join(argv)!r} within {timeout_s:.0f} s "
                            f"of wall time ({clock} clock); read {console}"
                        )
                    if poll is not None:
                        poll()
            finally:
                stop_uml(proc)
    finally:
        with contextlib.suppress(OSError):
            private.rmdir()
        if fds is not None:
            if saved_tty is not None:
                with contextlib.suppress(termios.error):
                    termios.tcsetattr(fds[0], termios.TCSADRAIN, saved_tty)
            for fd in set(fds):
                os.close(fd)
        if feeder is not None:
            relays[1].join(timeout=5)  # the guest's last output, until the terminal closes
            with contextlib.suppress(OSError):
                os.close(feeder)
    seconds = time.monotonic() - start
    rc_file = control / "rc"
    if not rc_file.exists():
        tail = console.read_text(errors="replace")[-1500:]
        raise LabKernelError(
            f"UML ({kernel}, {clock} clock) ended without running the command to its end "
            f"(exit {proc.returncode}); read {console}. Last console output:\n{tail}"
        )
    def output(name: str) -> str:
        path = control / name
        return path.read_text(errors="replace") if path.exists() else ""

    return UMLResult(
        returncode=int(rc_file.read_text().strip()),
        stdout=output("stdout"),
        stderr=output("stderr"),
        clock=clock,
        kernel_release=(control / "release").read_text().strip(),
        seconds=seconds,
    )


def relay_input(source: int, terminal: int, spoke: threading.Event) -> None:
    """Type ``source`` (a pipe or file) on ``terminal`` (a pseudo-terminal's master
    side), then Ctrl-D, the end of input a terminal's user types.

    Typing starts once the guest has written to the terminal (``spoke``): UML reads its
    console when told that input arrived, so input typed before it listens is never read.
    """
    spoke.wait()
    with contextlib.suppress(OSError):
        while chunk := os.read(source, 65536):
            os.write(terminal, chunk)
        os.write(terminal, b"\x04")


def relay_output(terminal: int, sink: int, spoke: threading.Event) -> None:
    """Copy what appears on ``terminal`` (master side) to ``sink`` until it closes."""
    with contextlib.suppress(OSError):
        while chunk := os.read(terminal, 65536):
            spoke.set()
            os.write(sink, chunk)


def session_members(sid: int) -> list[int]:
    """Host processes of session ``sid`` (UML and every process it forked)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if len(fields) > 3 and int(fields[3]) == sid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def stop_uml(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """Stop UML: SIGTERM to its session, then SIGKILL to what is left; reap the leader.

    UML runs as several host processes (the kernel, its helpers, one per guest address
    space); they all share the session started for it.
    """
    sid = proc.pid
    for sig in (signal.SIGTERM, signal.SIGKILL):
        members = session_members(sid)
        if proc.poll() is not None and not members:
            return
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.2)
            if proc.poll() is not None and not session_members(sid):
                return
    proc.wait()


# --------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pathdiv.kernels.uml", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the UML lab kernel (no-op when cached), print it")
    b.add_argument("-j", "--jobs", type=int, default=None)
    sub.add_parser("find", help="print the cached UML kernel's path; exit 1 if not built")
    r = sub.add_parser("run", help="run a command in the UML lab kernel")
    r.add_argument("--share", type=Path, default=Path("results"))
    r.add_argument("--timeout", type=float, default=600, help="wall seconds")
    r.add_argument("--clock", choices=CLOCKS, default="virtual")
    r.add_argument("--memory-mb", type=int, default=MEMORY_MB)
    r.add_argument("--terminal", action="store_true",
                   help="run the command on this terminal (interactive; output not captured)")
    r.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)

    handlers = stop_on_signals()  # SIGTERM, SIGHUP: stop UML as on Ctrl-C
    try:
        if args.cmd == "build":
            print(build_lab_kernel(args.jobs, log=lambda m: print(m, file=sys.stderr)))
        elif args.cmd == "find":
            image = find_lab_kernel()
            if image is None:
                print("the lab kernel is not built; run `make kernel`", file=sys.stderr)
                return 1
            print(image)
        elif args.cmd == "run":
            command = args.command[1:] if args.command[:1] == ["--"] else args.command
            if not command:
                parser.error("run needs a command")
            image = find_lab_kernel() or build_lab_kernel(
                log=lambda m: print(m, file=sys.stderr))
            args.share.mkdir(parents=True, exist_ok=True)
            res = run_in_uml(command, args.share, image, args.timeout, clock=args.clock,
                             memory_mb=args.memory_mb, terminal=args.terminal)
            sys.stdout.write(res.stdout)
            sys.stderr.write(res.stderr)
            print(f"uml: {res.kernel_release} ({res.clock} clock) exit {res.returncode} "
                  f"in {res.seconds:.1f} s", file=sys.stderr)
            return res.returncode
    except LabKernelError as exc:
        print(f"uml: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("uml: interrupted; UML was stopped", file=sys.stderr)
        return 130
    finally:
        restore_handlers(handlers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
