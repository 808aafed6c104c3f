"""The lab kernel as User-Mode Linux: release, schedulers, rb and rbstrict, write protection, stop.

Boots the cached UML kernel (built first when it is not: about 15 minutes on 2 cores,
once per patch/fragment change) on the host's root, in virtual time unless said otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pathdiv.kernels import uml
from pathdiv.kernels.build import LabKernelError, kernel_release

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _uml_processes(kernel: Path, share: Path) -> list[int]:
    """Host processes running the UML binary for ``share`` (kernel and guest address spaces)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (os.readlink(entry / "exe").startswith(str(kernel))
                        and str(share) in (entry / "cmdline").read_text()):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def test_release_schedulers_and_rb_interleaving(lab_kernel, tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    res = uml.run_in_uml(
        ["sh", "-c", f"cat /proc/sys/net/mptcp/available_schedulers && exec {sys.executable} "
         f"{uml.REPO_DIR / 'tests' / 'support' / 'mptcp_lab.py'} check --schedulers default rb "
         f"--out {share / 'check'}"],
        share=share, kernel=lab_kernel, timeout_s=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.kernel_release.endswith("-pathdiv")
    assert res.kernel_release == kernel_release(lab_kernel)
    assert res.clock == "virtual"
    first, report_text = res.stdout.split("\n", 1)
    assert first.split() == ["default", "rb", "roundrobin", "rbstrict", "arp", "ar",
                              "redundant", "minrtt", "minrtt-plain"]
    report = json.loads(report_text)
    runs = {run["scheduler"]: run for run in report["runs"]}
    fractions = {name: run["interleave_fraction"] for name, run in runs.items()}
    print(f"uml seconds={res.seconds:.0f} fractions={fractions}")
    for name, run in runs.items():
        assert run["complete"], (name, run["bytes"])
        assert run["capture_dropped"] == 0, (name, run)
        assert run["packet_pairs"] > 500, (name, run)
    assert fractions["rb"] >= 0.95, fractions
    assert fractions["default"] <= 0.1, fractions


def test_rbstrict_sends_every_packet_on_its_pre_allocated_subflow(lab_kernel, tmp_path):
    """rb without the stand-in (patch 0023). Four subflows over one path, 20 Mbit/s behind
    a 10-packet queue: cubic's losses leave the subflows' windows uneven. With one slot
    per subflow (rb_resolution=1) the pattern is the subflows in turn, 0 1 2 3 0 1 2 3 ...,
    whatever their RTTs; the turn fraction is the share of DSNs on the same subflow as the
    DSN one turn before. rbstrict waits for the pre-allocated subflow's room and keeps the
    turns (misses only where the set of subflows changes); rb lets a subflow with room
    stand in and loses them."""
    share = tmp_path / "share"
    share.mkdir()
    lab = uml.REPO_DIR / "tests" / "support" / "mptcp_lab.py"
    res = uml.run_in_uml(
        ["sh", "-c", "echo 1 > /sys/module/mptcp/parameters/rb_resolution && "
         f"exec {sys.executable} {lab} check --schedulers rbstrict rb --rate-mbit 20 "
         f"--queue-pkts 10 --out {share / 'check'}"],
        share=share, kernel=lab_kernel, timeout_s=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    runs = {run["scheduler"]: run for run in json.loads(res.stdout)["runs"]}
    turns = {name: run["turn_fraction"] for name, run in runs.items()}
    interleaved = {name: run["interleave_fraction"] for name, run in runs.items()}
    print(f"uml seconds={res.seconds:.0f} turns={turns} interleaved={interleaved} "
          f"fct_s={ {name: run['mean_fct_s'] for name, run in runs.items()} }")
    for name, run in runs.items():
        assert run["complete"], (name, run["bytes"])
        assert run["capture_dropped"] == 0, (name, run)
        assert run["subflows_seen"] == 4, (name, run)
        assert run["packet_pairs"] > 500, (name, run)
    assert turns["rbstrict"] >= 0.9, turns
    assert interleaved["rbstrict"] >= 0.95, interleaved
    # the measure tells the two apart: rb's stand-ins break the turns here
    assert turns["rb"] <= 0.8, turns


def test_the_guest_writes_only_into_the_share(lab_kernel, tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    # a host folder outside the share, and not under /tmp (the guest has its own /tmp)
    host_dir = uml.REPO_DIR / f".uml-write-test-{os.getpid()}"
    host_dir.mkdir()
    existing = host_dir / "existing"
    existing.write_text("host\n")
    script = (
        f"touch {share}/inside && echo inside-ok; "
        f"touch {host_dir}/new 2>/dev/null && echo outside-created; "
        f"echo guest >> {existing} 2>/dev/null && echo outside-appended; "
        # guest root remounts its hostfs root read-write: the host still refuses
        f"mount -o remount,rw / ; touch {host_dir}/new 2>/dev/null && echo outside-created-rw; "
        f"mount -t hostfs -o {host_dir} hostfs /mnt && touch /mnt/new2 2>/dev/null "
        "&& echo outside-created-hostfs; "
        "mkdir -p /tmp/x && touch /tmp/x/y && echo guest-tmp-ok; "
        "echo 1 > /proc/sys/net/ipv4/ip_forward && echo guest-proc-ok"
    )
    try:
        res = uml.run_in_uml(["sh", "-c", script], share=share, kernel=lab_kernel,
                             timeout_s=300)
        left = sorted(p.name for p in host_dir.iterdir())
        content = existing.read_text()
    finally:
        shutil.rmtree(host_dir)
    lines = res.stdout.split()
    assert "inside-ok" in lines
    assert (share / "inside").exists()
    assert [w for w in lines if w.startswith("outside")] == []
    assert left == ["existing"]
    assert content == "host\n"
    assert "guest-tmp-ok" in lines  # the guest's own /tmp (tmpfs), not the host's
    assert not Path("/tmp/x/y").exists()
    assert "guest-proc-ok" in lines  # the guest's own /proc


def test_sigint_mid_run_leaves_no_uml_process(lab_kernel, tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    code = (
        "import sys\nfrom pathlib import Path\nfrom kernels import uml\n"
        f"uml.run_in_uml(['sleep', '3600'], Path({str(share)!r}), Path({str(lab_kernel)!r}), "
        "timeout_s=None, clock='real')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=uml.REPO_DIR)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(share.glob(".labkernel/*/release")):
            time.sleep(0.5)  # the guest wrote its release: it booted and runs `sleep`
        assert list(share.glob(".labkernel/*/release")), "the guest did not boot within 120 s"
        assert _uml_processes(lab_kernel, share)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=180)  # 60 s was once too short at load 14
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert _uml_processes(lab_kernel, share) == []


def test_sigkill_of_the_owner_ends_its_uml_without_clean(lab_kernel, tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    code = (
        "from pathlib import Path\nfrom pathdiv.kernels import uml\n"
        f"uml.run_in_uml(['sleep', '3600'], Path({str(share)!r}), Path({str(lab_kernel)!r}), "
        "timeout_s=None, clock='real')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=uml.REPO_DIR)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(share.glob(".labkernel/*/release")):
            time.sleep(0.5)
        assert list(share.glob(".labkernel/*/release")), "the guest did not boot within 120 s"
        assert _uml_processes(lab_kernel, share)
        proc.kill()  # SIGKILL: no finally runs in the owner
        proc.wait()
        deadline = time.monotonic() + 5  # the parent-death signal, then the PID namespace
        while time.monotonic() < deadline and _uml_processes(lab_kernel, share):
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _uml_processes(lab_kernel, share) == []


def test_guest_root_cannot_write_the_host_outside_the_share_nor_read_shadow(lab_kernel,
                                                                             tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    host_dir = uml.REPO_DIR / f".uml-escape-test-{os.getpid()}"
    host_dir.mkdir()
    target = f"{host_dir}/escaped"
    # mount points in the guest's own /tmp (tmpfs): its / is the host's, read-only to it
    mounts = {"a": "/", "b": "/", "c": "/etc", "d": "/proc", "e": "/proc/1/root"}
    script = "".join(f"mkdir -p /tmp/m{m} && mount -t hostfs -o {src} none /tmp/m{m} && "
                     f"echo mounted-{m}; " for m, src in mounts.items())
    tries = {
        "direct": f"touch {target}",
        "remount-rw": f"mount -o remount,rw / && touch {target}",
        "hostfs-root": f"touch /tmp/ma{target}",
        "hostfs-root-rw": f"mount -o remount,rw /tmp/mb && touch /tmp/mb{target}",
        "hostfs-etc": "touch /tmp/mc/pathdiv-escaped",
        "host-proc-1-root": f"touch /tmp/md/1/root{target}",
        "hostfs-via-proc-1-root": f"touch /tmp/me{target}",
        "read-shadow": "cat /etc/shadow > /dev/null",
        "read-shadow-hostfs": "cat /tmp/mc/shadow > /dev/null",
        "share": f"touch {share}/inside",
    }
    script += "".join(f"( {cmd} ) >/dev/null 2>&1 && echo {name}=yes || echo {name}=no; "
                      for name, cmd in tries.items())
    script += "id -u; ls /tmp/md | grep -c '^[0-9]'"  # guest root; host pids it can see
    try:
        res = uml.run_in_uml(["sh", "-c", script], share=share, kernel=lab_kernel,
                             timeout_s=300)
        left = sorted(p.name for p in host_dir.iterdir())
    finally:
        shutil.rmtree(host_dir)
    print(res.stdout)
    lines = res.stdout.split()
    said = dict(line.split("=") for line in lines if "=" in line)
    # the hostfs mounts succeed (the host refuses what is done through them), except
    # /proc/1/root, which the jail's non-dumpable init keeps closed even to its own uid
    assert [f"mounted-{m}" for m in "abcd"] == \
        [w for w in lines if w.startswith("mounted") and w != "mounted-e"]
    assert said == {**{name: "no" for name in tries}, "share": "yes"}, said
    assert left == []
    assert not Path("/etc/pathdiv-escaped").exists()
    assert (share / "inside").exists()
    assert lines[-2] == "0"  # the guest's command ran as guest root
    host_pids = sum(1 for p in Path("/proc").iterdir() if p.name.isdigit())
    print(f"pids seen through hostfs /proc: {lines[-1]} (host: {host_pids})")
    assert int(lines[-1]) < 50 < host_pids  # the jail's own PID namespace, not the host's


def test_a_guest_that_dies_is_reported_with_its_console_log(lab_kernel, tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    with pytest.raises(LabKernelError, match=r"ended without running the command to its end.*"
                                       r"read .*console\.log") as err:
        uml.run_in_uml(["sh", "-c", "echo c > /proc/sysrq-trigger; sleep 5"], share=share,
                       kernel=lab_kernel, timeout_s=120)
    print(str(err.value)[-600:])
    assert list(share.glob(".labkernel/*/console.log"))
    assert _uml_processes(lab_kernel, share) == []


def test_a_guest_that_forges_its_result_and_floods_its_console_gets_neither_read(
        lab_kernel, tmp_path):
    """Guest root (anyone at a lab `pathdiv net` prompt) writes 0 to the control folder's
    rc, links its stdout to a root-only file of the host, writes an endless line on the
    console and powers off: the host prints none of the file, keeps a bounded console.log
    and reports the forged status as the command's."""
    share = tmp_path / "share"
    share.mkdir()
    secret = tmp_path / "root-only"
    secret.write_text("SECRET-OF-ROOT\n")
    secret.chmod(0o600)
    script = (f"c=$(ls -d {share}/.labkernel/*); "
              "head -c 24000000 /dev/zero | tr '\\0' A > /dev/console; "
              f"echo 0 > $c/rc; ln -sf {secret} $c/stdout; ln -sf {secret} $c/release; "
              "echo o > /proc/sysrq-trigger; sleep 30")
    res = uml.run_in_uml(["sh", "-c", script], share=share, kernel=lab_kernel, timeout_s=600)
    print(res)
    assert res.returncode == 0
    assert "SECRET-OF-ROOT" not in res.stdout + res.stderr + res.kernel_release
    assert "symbolic link" in res.stdout
    console = next(share.glob(".labkernel/*/console.log"))
    assert console.stat().st_size < 64 * 1024, console.stat()  # 24 MB written
    assert b"[line cut at " in console.read_bytes()
