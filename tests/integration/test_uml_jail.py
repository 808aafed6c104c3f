"""The lab kernel's jail (kernels/uml_jail.py) on its own, around a shell instead of UML:
who the jailed process is, what it may read and write, and that it dies with its parent.

Seconds each; needs root (mount and PID namespaces), no network namespace, no UML.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pathdiv.kernels import uml, uml_guest
from tests.conftest import open_for_guest

pytestmark = pytest.mark.root

UID = 64_997  # not the lab kernel's own id: these tests never meet a running guest


@pytest.fixture
def share():
    if os.geteuid() != 0:
        pytest.skip("needs root (mount and PID namespaces)")
    path = Path(tempfile.mkdtemp(prefix="pathdiv-jail-test-", dir=uml.REPO_DIR))
    (path / "priv").mkdir()
    uml_guest.lend_share(path, UID, UID)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def jailed(share: Path, script: str, parent: int | None = None) -> list[str]:
    return uml.jail_argv("/usr/bin/python3", share, share / "priv", 8,
                         ["/bin/sh", "-c", script], uid=UID, gid=UID, parent=parent)


def test_the_jailed_process_is_unprivileged_pid_2_and_writes_only_the_share(share):
    outside = uml.REPO_DIR / f".jail-outside-{os.getpid()}"
    script = (
        "id -u; id -g; echo pid=$$; "
        "grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/self/status; "
        "echo procs=$(ls -d /proc/[0-9]* | wc -l); "
        "cat /etc/shadow >/dev/null 2>&1 && echo read-shadow; "
        f"touch {outside} 2>/dev/null && echo wrote-outside; "
        "touch /tmp/pathdiv-jail-x 2>/dev/null && echo wrote-tmp; "
        "ls /proc/1/root/ >/dev/null 2>&1 && echo sees-own-root; "
        f"touch {share}/inside && echo wrote-share; "
        f"touch {share}/priv/x && echo wrote-private"
    )
    res = subprocess.run(jailed(share, script), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.split("\n")
    print(res.stdout)
    assert lines[:3] == [str(UID), str(UID), "pid=2"]  # under the jail's init, PID 1
    assert "NoNewPrivs:\t1" in lines
    for cap in ("CapEff", "CapPrm", "CapBnd"):  # CAP_CHOWN (bit 0) alone
        assert f"{cap}:\t0000000000000001" in lines
    assert int(next(x for x in lines if x.startswith("procs=")).split("=")[1]) <= 8
    assert "read-shadow" not in lines and "wrote-outside" not in lines
    assert "wrote-tmp" not in lines and not Path("/tmp/pathdiv-jail-x").exists()
    assert not outside.exists()
    assert "wrote-share" in lines and (share / "inside").stat().st_uid == UID
    assert "wrote-private" in lines and not (share / "priv" / "x").exists()  # its own tmpfs


def test_the_jail_dies_with_its_parent_even_by_sigkill(share):
    argv = jailed(share, f"echo $$ > {share}/up; exec sleep 3600")
    code = (f"import os, subprocess, time\nargv = {argv!r}\n"
            "argv[argv.index('--parent') + 1] = str(os.getpid())\n"
            "subprocess.Popen(argv, start_new_session=True)\ntime.sleep(3600)\n")
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (share / "up").exists():
            time.sleep(0.1)
        assert (share / "up").exists(), "the jailed shell did not start"
        sid = jail_session(share)
        assert len(uml.session_members(sid)) == 3  # the outer process, the init, the shell
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and uml.session_members(sid):
            time.sleep(0.1)
    finally:
        parent.kill()
    assert uml.session_members(sid) == []


def test_the_jail_does_not_start_when_its_parent_is_already_gone(share):
    res = subprocess.run(jailed(share, f"touch {share}/ran", parent=1), capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 125
    assert not (share / "ran").exists()


def jail_session(share: Path) -> int:
    """The session of the jail for `share` (its outer process started it)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if cmdline.split(b"\0")[1:3] == [b"-S", str(uml.JAIL).encode()] \
                    and str(share).encode() in cmdline:
                return int(entry.name)
    raise AssertionError(f"no jail for {share}")


def test_a_folder_the_guest_cannot_enter_shows_it_only_the_folders_revealed(tmp_path):
    """A checkout and a results folder inside a 0700 home: the jail covers the home with an
    empty tmpfs holding only the way to them, so the guest's user reads the checkout and
    writes the results folder, and nothing else of the home, whatever its modes."""
    if os.geteuid() != 0:
        pytest.skip("needs root (mount and PID namespaces)")
    open_for_guest(tmp_path)
    home = tmp_path / "home"
    checkout, results = home / "work" / "checkout", home / "work" / "results"
    checkout.mkdir(parents=True)
    (results / "priv").mkdir(parents=True)
    (checkout / "code.py").write_text("code\n")
    (home / "secret").write_text("secret\n")  # readable by all: only the home's mode hid it
    (home / "work" / "other").write_text("other\n")
    home.chmod(0o700)
    (home / "work").chmod(0o700)
    uml_guest.lend_share(results, UID, UID)
    cover, blocked = uml.guest_reach([results, checkout], results, UID, UID)
    assert cover == [str(home)] and blocked == []
    script = (
        f"cat {checkout}/code.py; "
        f"ls -A {home}; ls -A {home}/work; "
        f"cat {home}/secret 2>/dev/null || echo no-secret; "
        f"cat {home}/work/other 2>/dev/null || echo no-other; "
        f"touch {results}/inside && echo wrote-results; "
        f"touch {checkout}/x 2>/dev/null || echo checkout-read-only; "
        f"touch {home}/x 2>/dev/null || echo home-read-only; "
        "cat /etc/shadow >/dev/null 2>&1 || echo no-shadow; "
        f"grep ' {results} ' /proc/self/mountinfo"
    )
    argv = uml.jail_argv("/usr/bin/python3", results, results / "priv", 8,
                         ["/bin/sh", "-c", script], uid=UID, gid=UID,
                         reveal=[str(results), str(checkout)], cover=cover)
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    print(res.stdout, res.stderr)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[:4] == ["code", "work", "checkout", "results"]  # only the way down
    for said in ("no-secret", "no-other", "wrote-results", "checkout-read-only",
                 "home-read-only", "no-shadow"):
        assert said in lines
    options = lines[-1].split()[5].split(",")  # the share's bind: rw, nosuid, nodev
    assert {"rw", "nosuid", "nodev"} <= set(options), lines[-1]
    assert (results / "inside").stat().st_uid == UID
    assert not (home / "x").exists() and not (checkout / "x").exists()


def test_a_share_reached_through_a_link_is_refused_by_the_jail(share, tmp_path):
    """The jail walks every folder it mounts from / without following a link: a share
    whose path was swapped for a link after pathdiv checked it is not bound."""
    elsewhere = uml.REPO_DIR / f".jail-elsewhere-{os.getpid()}"
    elsewhere.mkdir()
    try:
        link = share / "link"
        link.symlink_to(elsewhere)
        argv = uml.jail_argv("/usr/bin/python3", link, share / "priv", 8,
                             ["/bin/sh", "-c", f"touch {link}/x"], uid=UID, gid=UID)
        res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert res.returncode == 126, res.stderr
        assert "no link is followed" in res.stderr
        assert list(elsewhere.iterdir()) == []
    finally:
        shutil.rmtree(elsewhere)
