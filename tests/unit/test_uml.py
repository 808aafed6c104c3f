"""Running the lab kernel (UML): boot command line, guest init, the jail's argv."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pathdiv.kernels import uml, uml_console
from pathdiv.kernels.build import LabKernelError


def test_boot_line_for_the_virtual_clock(tmp_path):
    args = uml.boot_args(tmp_path / "init.sh", "virtual", 1536, tmp_path / "priv")
    assert args[:4] == ["mem=1536M", "rootfstype=hostfs", "rootflags=/", "rw"]
    assert f"init={tmp_path / 'init.sh'}" in args
    assert f"uml_dir={tmp_path / 'priv'}" in args
    assert args[-1] == "time-travel=inf-cpu"


def test_boot_line_for_the_real_clock_has_no_time_travel(tmp_path):
    args = uml.boot_args(tmp_path / "init.sh", "real", 1024, tmp_path)
    assert "mem=1024M" in args
    assert not any(a.startswith("time-travel") for a in args)


def test_an_unknown_clock_is_refused_with_the_choices(tmp_path):
    with pytest.raises(LabKernelError, match=r"clock 'wall' is not one of virtual, real"):
        uml.boot_args(tmp_path / "init.sh", "wall", 1024, tmp_path)


def test_jail_argv_wraps_the_uml_command(tmp_path):
    share, private = tmp_path / "share", tmp_path / "priv"
    argv = uml.jail_argv("/usr/bin/python3", share, private, 1600, ["/k/linux", "mem=1G"],
                         uid=64_999, gid=64_998)
    assert argv[:3] == ["/usr/bin/python3", "-S", str(uml.JAIL)]
    assert argv[argv.index("--share") + 1] == str(share)
    assert argv[argv.index("--private") + 1] == str(private)
    assert argv[argv.index("--private-mb") + 1] == "1600"
    assert argv[argv.index("--uid") + 1] == "64999"
    assert argv[argv.index("--gid") + 1] == "64998"
    assert argv[argv.index("--parent") + 1] == str(os.getpid())  # dies with this process
    assert argv[argv.index("--") + 1 :] == ["/k/linux", "mem=1G"]


JAIL_OPTS = ["--share", "/x", "--private", "/y", "--private-mb", "1", "--uid", "64999",
             "--gid", "64999", "--parent", "1"]


@pytest.mark.parametrize("change, message", [
    ({}, "no command after --"),
    ({"--uid": "0"}, "must not be root's"),
])
def test_the_jail_refuses_a_call_without_a_command_or_as_root(change, message):
    opts = list(JAIL_OPTS)
    for key, value in change.items():
        opts[opts.index(key) + 1] = value
    command = ["/bin/true"] if change else []
    res = subprocess.run(["python3", "-S", str(uml.JAIL), *opts, "--", *command],
                         capture_output=True, text=True)
    assert res.returncode == 2
    assert message in res.stderr


def _run_init_body(script: str, tmp_path: Path) -> None:
    """Run the part of the guest init that runs the command (no mounts, no power-off)."""
    start = script.index("hostname pathdiv-lab\n") + len("hostname pathdiv-lab\n")
    body = tmp_path / "body.sh"
    body.write_text("#!/bin/sh\n" + script[start : script.index("sync\n")])
    subprocess.run(["sh", str(body)], check=True)


def test_guest_init_returns_the_commands_own_status_and_output(tmp_path):
    control = tmp_path / "ctl"
    control.mkdir()
    argv = ["sh", "-c", "echo out; echo err >&2; echo $PATHDIV_X; pwd; exit 3"]
    script = uml.guest_init(argv, tmp_path, control, {"PATHDIV_X": "a b"})
    assert script.startswith("#!/bin/sh\n")
    assert "export PATHDIV_X='a b'\n" in script
    _run_init_body(script, tmp_path)
    assert (control / "rc").read_text().strip() == "3"
    assert (control / "stdout").read_text() == f"out\na b\n{tmp_path}\n"
    assert (control / "stderr").read_text() == "err\n"
    assert (control / "release").read_text().strip()


def test_guest_init_mounts_its_own_tmpfs_and_powers_off():
    script = uml.guest_init(["true"], Path("/"), Path("/r/.labkernel/x"))
    for d in ("/tmp", "/run", "/var/tmp", "/dev/shm"):
        assert f"mount -t tmpfs -o mode=1777 tmpfs {d}" in script
    assert "mount -t proc proc /proc\n" in script
    # one memory layout and one hash order in every boot, before the command starts
    for line in ("echo 0 > /proc/sys/kernel/randomize_va_space\n", "export PYTHONHASHSEED=0\n"):
        assert script.index(line) < script.index("(cd / && exec true)")
    assert script.index("echo $? > /r/.labkernel/x/rc.tmp") < script.index(
        "echo o > /proc/sysrq-trigger")


def test_run_in_uml_needs_a_kernel(tmp_path):
    with pytest.raises(LabKernelError, match=r"does not exist; build it with `make kernel`"):
        uml.run_in_uml(["true"], tmp_path, tmp_path / "linux", timeout_s=5)


def test_a_share_under_tmp_is_mounted_again_over_the_guests_own_tmp():
    assert uml.hidden_by_tmpfs([Path("/tmp/pytest/share"), Path("/work/repo")]) == [
        Path("/tmp/pytest/share")]
    assert uml.hidden_by_tmpfs([Path("/tmp/a"), Path("/tmp/a/b")]) == [Path("/tmp/a")]
    assert uml.hidden_by_tmpfs([Path("/tmpx/a"), Path("/srv")]) == []
    script = uml.guest_init(["true"], Path("/work"), Path("/tmp/s/.labkernel/x"),
                            share=Path("/tmp/s"))
    assert script.index("mount -t tmpfs -o mode=1777 tmpfs /tmp") < script.index(
        "mkdir -p /tmp/s && mount -t hostfs -o /tmp/s hostfs /tmp/s\n")


def test_a_pinned_command_runs_on_one_cpu_and_an_unpinned_one_is_unchanged():
    assert uml.pinned(["python3", "jail"], None) == ["python3", "jail"]
    assert uml.pinned(["python3", "jail"], 1) == ["taskset", "--cpu-list", "1", "python3",
                                                  "jail"]


# ---- what the guest leaves is read as hostile ----------------------------------------
def _result(control: Path) -> uml.UMLResult:
    fd = os.open(control, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return uml.guest_result(fd, control, Path("/k/linux"), "virtual", 0, 1.0, "tail")
    finally:
        os.close(fd)


class TestLinksAndOversizedFilesInTheShareAreNotRead:
    """The guest's control files (rc, stdout, stderr, release) as guest root leaves them."""

    def test_a_guest_that_links_its_stdout_to_a_root_only_file_does_not_get_it_printed(
            self, tmp_path):
        """Guest root writes 0 to rc, links stdout and release to a root-only file of the host
        and powers off: the host reads neither through the links."""
        secret = tmp_path / "shadow"
        secret.write_text("root:$6$SECRETHASH:19000::::::\n")
        secret.chmod(0o600)
        control = tmp_path / "ctl"
        control.mkdir()
        (control / "rc").write_text("0\n")
        (control / "stdout").symlink_to(secret)
        (control / "release").symlink_to(secret)
        os.mkfifo(control / "stderr")  # would hang a plain read
        res = _result(control)
        assert res.returncode == 0
        assert "SECRETHASH" not in res.stdout + res.stderr + res.kernel_release
        assert "stdout not read" in res.stdout and "symbolic link" in res.stdout
        assert "stderr not read" in res.stderr

    def test_the_guests_output_is_read_up_to_a_bound_and_never_echoed_raw(self, tmp_path):
        control = tmp_path / "ctl"
        control.mkdir()
        (control / "rc").write_text("3\n")
        (control / "stdout").write_bytes(b"x" * (uml.OUTPUT_BYTES + 10) + b"\x1b]0;owned\x07end\n")
        (control / "release").write_text("6.12.0-pathdiv\n")
        res = _result(control)
        assert res.returncode == 3 and res.kernel_release == "6.12.0-pathdiv"
        assert res.stdout.startswith("[24 earlier bytes not read]\n")
        assert res.stdout.endswith("\\x1b]0;owned\\x07end\n") and "\x1b" not in res.stdout


@pytest.mark.parametrize("rc", ["0; rm -rf /", "999", "", "\x1b[2J"])
def test_an_exit_status_that_is_not_a_small_number_is_refused(tmp_path, rc):
    control = tmp_path / "ctl"
    control.mkdir()
    (control / "rc").write_text(rc)
    with pytest.raises(LabKernelError, match="is not a number from 0 to 255"):
        _result(control)


def test_a_missing_exit_status_reports_the_console_tail(tmp_path):
    control = tmp_path / "ctl"
    control.mkdir()
    with pytest.raises(LabKernelError, match=r"ended without running the command.*\ntail"):
        _result(control)


def test_the_console_log_cuts_an_endless_line_and_stops_at_its_bound():
    bound = uml_console.ConsoleBound(line_bytes=10, total_bytes=60)
    assert bound.feed(b"short\nabc") == b"short\nabc"
    # one line fed in pieces: cut once, at 10 bytes, the rest of it dropped
    out = bound.feed(b"defghijklmnop") + bound.feed(b"q" * 1000) + bound.feed(b"\nnext\n")
    assert out == b"defghij [line cut at 10 bytes]\nnext\n"
    out = bound.feed(b"y\n" * 100)
    assert out.endswith(b"\n[console.log stops at 60 bytes]\n")
    assert bound.feed(b"more\n") == b""


def test_an_endless_console_line_costs_the_host_a_bounded_file(tmp_path):
    """UML's console through the relay: 64 MB without a newline give a console.log of at
    most the bound, and the relay reads to the end (UML never blocks on it)."""
    read_end, write_end = os.pipe()
    sink = os.open(tmp_path / "console.log", os.O_WRONLY | os.O_CREAT, 0o644)
    log = uml.ConsoleLog(read_end, sink, line_bytes=4096, total_bytes=1 << 20)
    log.start()
    chunk = b"A" * (1 << 20)
    for _ in range(64):
        os.write(write_end, chunk)
    os.write(write_end, b"\nlast line\n")
    os.close(write_end)
    log.join(timeout=60)
    os.close(sink)
    assert not log.is_alive()
    size = (tmp_path / "console.log").stat().st_size
    assert size < 4096 + 100
    assert log.tail().endswith("last line\n")
