"""Run commands in the lab kernel, User-Mode Linux (built by kernels/build.py).

A run boots UML on the host's root file system through hostfs. The clock is
``virtual`` (``time-travel=inf-cpu``: CPU work takes no guest time and idle time is
skipped, so links are the only bottleneck and a run may finish faster than real time)
or ``real`` (the wall clock). UML runs in a jail (kernels/uml_jail.py): a private host
mount namespace in which every mount is read-only except the share folder and a private
tmpfs for UML's own memory file, a PID namespace of its own, and an unprivileged user
(GUEST_UID) with no capability but CAP_CHOWN, so the host's permissions hold for every file the
guest's hostfs opens. The guest is root and may mount any host folder, but the host
refuses writes outside the share and reads of files only root may read. What a run
needs but that user could not enter (a checkout in a 0700 /root) is revealed in the
jail alone, and nothing else of the folder around it (:func:`guest_reach`). UML dies
with the pathdiv process that started it (a parent-death signal).

Whatever the guest wrote is hostile to the host: the control folder's files (exit
status, output, release) are opened without following a link, checked to be regular
files, read up to a bound and shown with their control characters escaped
(:func:`guest_result`); UML's console goes through a pipe into a bounded console.log
(:class:`ConsoleLog`); the control folder and the share are reached through folder
descriptors (analysis/safefiles.py).

Pure parts (command lines, guest init script) come first; the functions that run
processes (:func:`run_in_uml`, :func:`stop_uml`) after them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import signal
import site
import subprocess
import sys
import termios
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pathdiv.analysis.safefiles as safefiles
from pathdiv.kernels import guest_bytecode
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
from pathdiv.kernels.uml_console import ConsoleLog, relay_input, relay_output
from pathdiv.kernels.uml_guest import (
    GUEST_TMPFS,
    GUEST_UID,
    guest_id,
    guest_reach,
    hidden_by_tmpfs,
    lend_share,
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
# What the host reads of what the guest wrote (guest root writes the control folder):
# each file opened without following a link, a regular file, at most this much.
RC_BYTES = 64
RELEASE_BYTES = 256
OUTPUT_BYTES = 1 << 20  # stdout, stderr: the last MB is kept

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
              parent: int | None = None, reveal: Sequence[str] = (),
              cover: Sequence[str] = ()) -> list[str]:
    """Run ``command`` as ``uid``:``gid`` where the host's files are read-only except ``share``.

    uml_jail.py (standard library only, run with ``-S``) unshares a mount and a PID
    namespace, makes every mount read-only recursively, hides each ``cover`` folder
    under an empty tmpfs but for the ``reveal`` folders in it (:func:`guest_reach`),
    mounts a tmpfs of ``private_mb`` MB on ``private`` (UML's memory file and uml_dir)
    and a writable bind of ``share``, then runs ``command`` in the new PID namespace
    (under a small init), unprivileged, with no_new_privs and SIGKILL when ``parent``
    (this process by default) dies.
    """
    return [python, "-S", str(JAIL), "--share", str(share), "--private", str(private),
            "--private-mb", str(private_mb), "--uid", str(uid), "--gid", str(gid),
            "--parent", str(os.getpid() if parent is None else parent),
            *(w for r in reveal for w in ("--reveal", r)),
            *(w for c in cover for w in ("--cover", c)), "--", *command]


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


def guest_init(argv: Sequence[str], cwd: Path, control: Path,
               env: dict[str, str] | None = None, share: Path | None = None,
               terminal: bool = False, stdin: Path | None = None,
               visible: Sequence[Path] = ()) -> str:
    """PID 1 of the guest: mount what a Linux system needs, run ``argv``, power off.

    The command's status goes to ``control`` (in the share), its output too unless
    ``terminal``: then it runs in a session of its own on /dev/tty0 (the user's terminal,
    its controlling terminal: Ctrl-C and Ctrl-D reach it). Its input is ``stdin`` (a file)
    or nothing. ``env`` is exported to the command. The share, ``cwd`` and the
    ``visible`` folders (the checkout, its Python) stay visible when they lie under a
    directory that gets the guest's own tmpfs (mounted again from the host through
    hostfs). The guest powers off with sysrq ``o`` whatever happens.
    """
    c = shlex.quote(str(control))
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())
    tmpfs = "".join(
        f"mount -t tmpfs -o mode=1777 tmpfs {d} 2>/dev/null || true\n" for d in GUEST_TMPFS
    )
    for path in hidden_by_tmpfs([share or control.parent.parent, cwd, *visible]):
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
    # every boot finds pathdiv's modules compiled: on the virtual clock loading instead of
    # compiling them moves the packets (guest_bytecode.py)
    guest_bytecode.compile_checkout(REPO_DIR)
    share = safefiles.resolve_physical(share)  # resolved once; walked without links after
    cwd = safefiles.resolve_physical(cwd or Path.cwd())
    uid = guest_id()
    needed = guest_needs(share, cwd, kernel)
    cover, blocked = guest_reach(needed, share, uid, uid)
    if blocked:
        raise LabKernelError(
            f"the lab kernel reads the host's files as uid {uid}, which cannot enter "
            f"{', '.join(blocked)}: give those folders search permission for every user "
            "(chmod o+x), or put pathdiv, its Python and the results folder elsewhere")
    try:
        share_fd = safefiles.open_dir(share)
    except OSError as exc:
        raise LabKernelError(f"cannot open the share {share}: {exc}") from None
    try:
        return _boot(argv, share, share_fd, kernel, timeout_s, clock, memory_mb, cwd, env,
                     poll, poll_s, terminal, stdin, channel, cpu, uid, needed, cover)
    finally:
        os.close(share_fd)


def guest_needs(share: Path, cwd: Path, kernel: Path) -> list[Path]:
    """The host folders the guest must reach (physical paths, each once): the share, the
    working folder, the checkout, its Python (venv and base installation; the user's
    site-packages when Python reads them; every folder on sys.path, so packages a .pth
    file or PYTHONPATH adds from elsewhere, under /tmp say, import in the guest too) and
    the kernel image's folder."""
    wanted = [share, cwd, REPO_DIR, Path(sys.prefix), Path(sys.base_prefix),
              Path(sys.executable).resolve().parent, kernel.parent]
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user_site and user_site in sys.path:
        wanted.append(Path(user_site))
    wanted += [Path(entry) for entry in sys.path if entry and os.path.isdir(entry)]
    out: list[Path] = []
    for path in wanted:
        real = safefiles.resolve_physical(path)
        if real.is_dir() and real not in out:
            out.append(real)
    return out


def _control_folder(share_fd: int, share: Path) -> tuple[int, str]:
    """A new control folder ``.labkernel/<id>`` in the share (no link followed: a guest
    of an earlier boot may have planted one) and its name relative to the share."""
    name = f"{CONTROL_DIR}/{uuid.uuid4().hex[:12]}"
    try:
        return safefiles.open_subdir(share_fd, name, create=True), name
    except OSError as exc:
        raise LabKernelError(f"cannot make the lab kernel's control folder in {share}: "
                             f"{exc}") from None


def _boot(argv: Sequence[str], share: Path, share_fd: int, kernel: Path,
          timeout_s: float | None, clock: str, memory_mb: int, cwd: Path,
          env: dict[str, str] | None, poll: Callable[[], None] | None, poll_s: float,
          terminal: bool, stdin: bytes | None, channel: tuple[int, int] | None,
          cpu: int | None, uid: int, needed: list[Path], cover: list[str]) -> UMLResult:
    ctl_fd, ctl_name = _control_folder(share_fd, share)
    control = share / ctl_name
    try:
        stdin_file = None
        if stdin is not None and not terminal:
            safefiles.write_atomic(ctl_fd, "stdin", stdin, sync=False)
            stdin_file = control / "stdin"
        guest_env = {**passed_env(os.environ), **(env or {})}
        init = control / "init.sh"
        script = guest_init(argv, cwd, control, guest_env, share, terminal=terminal,
                            stdin=stdin_file, visible=needed)
        safefiles.write_atomic(ctl_fd, "init.sh", script.encode(), mode=0o755, sync=False)
        os.mkdir("uml", 0o700, dir_fd=ctl_fd)  # UML's own tmpfs, in its mount namespace
        private = control / "uml"
        console_fd = os.open("console.log", os.O_WRONLY | os.O_CREAT | os.O_EXCL
                             | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=ctl_fd)
        try:
            return _run_jailed(argv, share, kernel, timeout_s, clock, memory_mb, poll,
                               poll_s, terminal, channel, cpu, uid, needed, cover, control,
                               ctl_fd, init, private, console_fd)
        finally:
            os.close(console_fd)
            with contextlib.suppress(OSError):
                os.rmdir("uml", dir_fd=ctl_fd)
    finally:
        os.close(ctl_fd)


def _run_jailed(argv: Sequence[str], share: Path, kernel: Path, timeout_s: float | None,
                clock: str, memory_mb: int, poll: Callable[[], None] | None, poll_s: float,
                terminal: bool, channel: tuple[int, int] | None, cpu: int | None, uid: int,
                needed: list[Path], cover: list[str], control: Path, ctl_fd: int,
                init: Path, private: Path, console_fd: int) -> UMLResult:
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
    lend_share(share, uid, uid)
    command = pinned(jail_argv(sys.executable, share, private, memory_mb + 64,
                               [str(kernel), *boot_args(init, clock, memory_mb, private, fds)],
                               uid=uid, gid=uid, reveal=[str(p) for p in needed],
                               cover=cover), cpu)
    safefiles.write_atomic(ctl_fd, "command", (shlex.join(command) + "\n").encode(),
                           sync=False)
    console = control / "console.log"
    # the marker lets `pathdiv clean` stop a UML whose pathdiv is gone
    proc_env = dict(os.environ, TMPDIR=str(private))
    proc_env[OWNER_ENV] = owner_mark()
    start = time.monotonic()
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    logger = ConsoleLog(read_end, console_fd)
    try:
        # its own session: Ctrl-C reaches us only, and we stop every UML process together
        try:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=write_end,
                                    stderr=subprocess.STDOUT, env=proc_env,
                                    start_new_session=True, pass_fds=tuple(set(fds or ())))
        finally:
            os.close(write_end)
        logger.start()
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
            logger.join(timeout=10)
    finally:
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
    return guest_result(ctl_fd, control, kernel, clock, proc.returncode, seconds,
                        logger.tail())


def guest_result(ctl_fd: int, control: Path, kernel: Path, clock: str, exit_status: int,
                 seconds: float, console_tail: str) -> UMLResult:
    """What the guest's command left in the control folder, read as hostile: each file
    opened without following a link (guest root may have linked ``stdout`` to a
    root-only file), a regular file, size-capped, control characters never echoed raw."""
    def text(name: str, limit: int, tail: bool = False) -> str:
        try:
            if tail:
                data, size = safefiles.read_tail_beneath(ctl_fd, name, limit)
                head = f"[{size - len(data)} earlier bytes not read]\n" if size > len(data) \
                    else ""
            else:
                data, head = safefiles.read_beneath(ctl_fd, name, limit), ""
        except FileNotFoundError:
            return ""
        except OSError as exc:
            return f"[{name} not read: {exc.strerror or exc}]"
        return head + safefiles.printable(data.decode("utf-8", errors="replace"))

    try:
        rc_text = safefiles.read_beneath(ctl_fd, "rc", RC_BYTES).decode("ascii").strip()
    except FileNotFoundError:
        rc_text = None
    except (OSError, UnicodeDecodeError) as exc:
        raise LabKernelError(f"the guest's exit status {control / 'rc'} cannot be read: "
                             f"{exc}") from None
    if rc_text is None:
        raise LabKernelError(
            f"UML ({kernel}, {clock} clock) ended without running the command to its end "
            f"(exit {exit_status}); read {control / 'console.log'}. Last console output:\n"
            f"{console_tail}"
        )
    if not rc_text.isdigit() or int(rc_text) > 255:
        raise LabKernelError(f"the guest's exit status in {control / 'rc'} is not a "
                             f"number from 0 to 255: {safefiles.printable(rc_text[:20])!r}")
    return UMLResult(
        returncode=int(rc_text),
        stdout=text("stdout", OUTPUT_BYTES, tail=True),
        stderr=text("stderr", OUTPUT_BYTES, tail=True),
        clock=clock,
        kernel_release=text("release", RELEASE_BYTES).strip(),
        seconds=seconds,
    )


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
