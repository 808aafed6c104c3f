"""No double writers, no stray teardown: owner marks, running markers, signals, host
settings, the lab kernel's user and image checks (no root needed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from pathdiv.experiments import runner
from pathdiv.experiments.cluster.tracking import busy_runs, marker_path, this_process
from pathdiv.experiments.config.load import validate
from pathdiv.experiments.execute import run as one_run
from pathdiv.experiments.execute.runstate import ResultsError
from pathdiv.experiments.fabric import environment as env
from pathdiv.experiments.manifest import write_json_atomic
from pathdiv.experiments.plan.runs import expand
from pathdiv.kernels import build, processes, uml, uml_guest
from pathdiv.kernels.build import LabKernelError
from pathdiv.kernels.processes import restore_handlers, stop_on_signals
from tests.conftest import open_for_guest


@pytest.fixture
def sleeper():
    """A live process other than this one (what holds a marker in another pathdiv)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


# ---- owner marks: pid plus start time --------------------------------------------------
def test_an_owner_mark_is_pid_and_start_time_and_a_reused_pid_is_not_its_owner(sleeper):
    mark = processes.owner_mark(sleeper.pid)
    pid, start = processes.parse_owner(mark)
    assert pid == sleeper.pid and start and start > 0
    assert processes.owner_alive(mark)
    assert not processes.owner_alive(f"{sleeper.pid}:{start + 1}")  # same pid, another process
    assert processes.owner_alive(str(sleeper.pid))  # a bare pid (older pathdiv): pid alone
    sleeper.kill()
    sleeper.wait()
    assert not processes.owner_alive(mark)
    assert processes.parse_owner("x:y") is None and not processes.owner_alive("garbage")


# ---- a run held by a live process is not run twice ---------------------------------------
def _plan(tmp_path):
    cfg = validate({"seed": 3})
    runs = expand(cfg, repetitions=1, flow_types=["query"])
    return cfg, runs, runner.prepare_folder(cfg, tmp_path / "out")


def _plant_marker(folder, run_id, owner):
    write_json_atomic(marker_path(folder, run_id),
                      {**owner, "run_id": run_id, "run_started": "2026-01-01T00:00:00+00:00"})


def test_a_run_marked_by_a_live_process_is_busy_and_a_dead_or_reused_one_is_not(
        tmp_path, sleeper):
    folder = tmp_path
    live = {**this_process(), "pid": sleeper.pid,
            "proc_start": processes.process_start(sleeper.pid)}
    _plant_marker(folder, "r-live", live)
    _plant_marker(folder, "r-reused", {**live, "proc_start": live["proc_start"] + 1})
    _plant_marker(folder, "r-mine", this_process())
    dead = subprocess.Popen(["true"])
    dead.wait()
    _plant_marker(folder, "r-dead", {**this_process(), "pid": dead.pid, "proc_start": 1})
    busy = busy_runs(folder, ["r-live", "r-reused", "r-mine", "r-dead", "r-none"])
    assert busy == [f"r-live (pid {sleeper.pid} on {live['host']} since "
                    "2026-01-01T00:00:00+00:00)"]


def test_a_resume_refuses_while_a_live_process_holds_a_runs_marker(tmp_path, sleeper,
                                                                   monkeypatch):
    cfg, runs, folder = _plan(tmp_path)
    held = runs[0]
    run_dir = folder / "runs" / held.run_id
    run_dir.mkdir(parents=True)
    (run_dir / "being-written").write_text("by the other process\n")
    _plant_marker(folder, held.run_id, {**this_process(), "pid": sleeper.pid,
                                        "proc_start": processes.process_start(sleeper.pid)})
    executed = []
    monkeypatch.setattr(one_run, "execute_run", lambda run, *a, **k: executed.append(run))
    with pytest.raises(ResultsError) as err:
        runner.run_plan(cfg, runs, folder, quiet=True)
    message = str(err.value)
    print(message)
    assert f"another pathdiv is executing run(s) {held.run_id} (pid {sleeper.pid} " in message
    assert "nothing was started" in message
    assert executed == []
    assert (run_dir / "being-written").exists()  # its folder was not deleted and redone


# ---- signals -----------------------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_every_stop_signal_interrupts_once_and_cannot_cut_the_teardown_short(sig):
    handlers = stop_on_signals()
    torn_down = []
    try:
        with pytest.raises(KeyboardInterrupt) as err:
            try:
                os.kill(os.getpid(), sig)
                time.sleep(5)  # not reached: the handler raises
            finally:
                for other in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                    os.kill(os.getpid(), other)  # a second signal during the teardown
                time.sleep(0.05)
                torn_down.append("done")
        assert err.value.args == (signal.Signals(sig).name,)
    finally:
        restore_handlers(handlers)
    assert torn_down == ["done"]
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN


def test_the_cli_stops_on_sighup_as_on_ctrl_c():
    code = ("import os, signal, sys\nfrom pathdiv.experiments import cli\n"
            "cli.cmd_keys = lambda args: os.kill(os.getpid(), signal.SIGHUP) or 0\n"
            "sys.exit(cli.main(['keys']))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 130, res.stderr
    assert "pathdiv: interrupted by SIGHUP" in res.stderr


# ---- host settings a killed owner changed -----------------------------------------------
def test_clean_restores_a_setting_whose_owner_is_gone_and_keeps_a_live_owners(tmp_path):
    setting = tmp_path / "sys" / "tcp_allowed_congestion_control"
    setting.parent.mkdir()
    setting.write_text("reno cubic bbr\n")
    records = tmp_path / "records"
    records.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    (records / "dead.json").write_text(json.dumps(
        {"path": str(setting), "previous": "reno cubic", "owner": f"{dead.pid}:1"}))
    restored = env.restore_orphaned_settings(records, settings=(str(setting),))
    assert restored == ["tcp_allowed_congestion_control: 'reno cubic'"]
    assert setting.read_text() == "reno cubic"
    assert list(records.iterdir()) == []
    # a live owner changed it since: its own teardown restores it, clean leaves it
    setting.write_text("reno cubic bbr")
    (records / "dead.json").write_text(json.dumps(
        {"path": str(setting), "previous": "reno cubic", "owner": f"{dead.pid}:1"}))
    (records / "live.json").write_text(json.dumps(
        {"path": str(setting), "previous": "reno cubic", "owner": processes.owner_mark()}))
    assert env.restore_orphaned_settings(records, settings=(str(setting),)) == []
    assert setting.read_text() == "reno cubic bbr"
    assert [p.name for p in records.iterdir()] == ["live.json"]


def test_only_a_setting_pathdiv_sets_is_ever_written_back_with_a_plain_value(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    (tmp_path / "r.json").write_text(json.dumps(
        {"path": str(target), "previous": "evil", "owner": "1:1"}))
    assert env.restore_orphaned_settings(tmp_path) == []
    assert target.read_text() == "keep"
    # another sysctl (kernel.core_pattern: a root shell for whoever sets it) is dropped
    (tmp_path / "r.json").write_text(json.dumps(
        {"path": "/proc/sys/kernel/core_pattern", "previous": "|/tmp/x", "owner": "1:1"}))
    assert env.restore_orphaned_settings(tmp_path) == []
    assert env.RESTORABLE == (env.ALLOWED_CC,)
    # and so is a value that is not a list of congestion-control names
    for value in ("reno\n|/tmp/x", "", "reno;id"):
        (tmp_path / "r.json").write_text(json.dumps(
            {"path": str(target), "previous": value, "owner": "1:1"}))
        assert env.restore_orphaned_settings(tmp_path, settings=(str(target),)) == []
        assert target.read_text() == "keep"
    assert not env.RESTORED_VALUE.fullmatch("reno\n")


# ---- the lab kernel's user and its image -------------------------------------------------
def test_the_guest_user_is_never_root_nor_an_existing_account():
    assert uml.guest_id({}) == uml.GUEST_UID
    with pytest.raises(LabKernelError, match="never root's 0"):
        uml.guest_id({uml_guest.GUEST_ID_ENV: "0"})
    with pytest.raises(LabKernelError, match=r"is the account 'daemon'"):
        uml.guest_id({uml_guest.GUEST_ID_ENV: str(__import__("pwd").getpwnam("daemon").pw_uid)})


def test_a_folder_the_guest_cannot_enter_is_covered_and_only_a_needed_closed_one_named(
        tmp_path):
    """A checkout inside a 0700 folder: the jail covers that folder (the guest reaches the
    checkout through the cover's empty tmpfs); a checkout that is itself 0700 is named."""
    closed = tmp_path / "closed"
    checkout, share = closed / "inner" / "checkout", closed / "results"
    checkout.mkdir(parents=True)
    share.mkdir()
    closed.chmod(0o700)
    open_for_guest(tmp_path)
    st = closed.stat()
    other = st.st_uid + 12345
    assert uml.guest_reach([share, checkout], share, other, other) == ([str(closed)], [])
    assert uml.guest_reach([share, checkout], share, st.st_uid, st.st_gid) == ([], [])
    checkout.chmod(0o700)
    assert uml.guest_reach([share, checkout], share, other, other) == (
        [str(closed)], [str(checkout)])
    # a closed folder between a revealed one and a needed one inside it is named too
    checkout.chmod(0o755)
    inner_share = checkout / "private" / "results"
    inner_share.mkdir(parents=True)
    (checkout / "private").chmod(0o700)
    assert uml.guest_reach([inner_share, checkout], inner_share, other, other) == (
        [str(closed)], [str(checkout / "private")])


def test_hand_over_gives_the_share_to_the_guest_without_following_symlinks(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root (chown)")
    outside = tmp_path / "outside"
    outside.write_text("x")
    share = tmp_path / "share"
    (share / "runs").mkdir(parents=True)
    (share / "runs" / "f").write_text("y")
    (share / "link").symlink_to(outside)
    uml_guest.lend_share(share, 64_998, 64_998)
    assert {p.stat(follow_symlinks=False).st_uid for p in [share, *share.rglob("*")]} == \
        {64_998}
    assert outside.stat().st_uid == os.geteuid()


def test_an_image_that_changed_since_it_was_built_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "CACHE_DIR", tmp_path)
    tmp_path.chmod(0o755)
    image_dir = tmp_path / "kernels" / "abc"
    image_dir.mkdir(parents=True)
    image = image_dir / "linux"
    image.write_bytes(b"\x7fELF kernel")
    image.chmod(0o755)
    messages = []
    build.verify_image(image, log=messages.append)  # built before hashes: recorded now
    assert (image_dir / build.IMAGE_HASH).read_text().strip() == build.file_sha256(image)
    assert messages and "recorded the SHA-256" in messages[0]
    build.verify_image(image)  # unchanged: accepted
    image.write_bytes(b"\x7fELF kernel, patched by someone")
    with pytest.raises(LabKernelError, match=r"does not match the SHA-256 recorded"):
        build.verify_image(image)


def test_an_image_others_could_have_replaced_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "CACHE_DIR", tmp_path)
    tmp_path.chmod(0o755)
    image_dir = tmp_path / "kernels" / "abc"
    image_dir.mkdir(parents=True)
    image = image_dir / "linux"
    image.write_bytes(b"k")
    image_dir.chmod(0o777)
    with pytest.raises(LabKernelError, match=r"abc is writable by group or others \(mode 777\)"):
        build.verify_image(image)
    image_dir.chmod(0o755)
    real = image_dir / "real"
    image.rename(real)
    image.symlink_to(real)
    with pytest.raises(LabKernelError, match="is a symlink"):
        build.verify_image(image)
