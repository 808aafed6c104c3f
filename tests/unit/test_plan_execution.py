"""One plan executed in a results folder at a time, and nothing half-written when it is
killed: a second `run` of the plan is refused for the whole execution (between runs
too), a SIGKILL leaves plan.json and every manifest whole, a resume keeps the failed
attempt it redoes, a complete run's files are synced before its manifest, and the
folder is handed to the sudo user only once root has finished writing it (analysis
included). The runs are fakes (no network, no root); the processes are real."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pathdiv.experiments import api, runner
from pathdiv.experiments.config.load import validate
from pathdiv.experiments.execute import run as one_run
from pathdiv.experiments.execute import runstate
from pathdiv.experiments.execute.runstate import (
    KEEP_EARLIER,
    base_manifest,
    finish_manifest,
    run_state,
    set_aside,
)
from pathdiv.experiments.manifest import read_json_dict, write_json_atomic
from pathdiv.experiments.plan.runs import expand

CONFIG = {"seed": 3, "hosts": {"kernel": "host"}, "factors": {"switching": {
    "ecmp-tcp": {"switching.mode": "ecmp", "hosts.transport": "tcp"},
    "ps-tcp": {"switching.mode": "spray", "hosts.transport": "tcp"}}}}

# A `pathdiv run` of CONFIG's plan into argv[1] whose runs are fakes that write a capture
# and a synced manifest; the run at order argv[2] stops there (says so in argv[1]/../holding)
# until killed. Prints "ran <summary>" or "refused: <message>".
CHILD = f"""
import os, sys, time
from pathlib import Path
from pathdiv.experiments import runner
from pathdiv.experiments.config.load import validate
from pathdiv.experiments.execute import run as one_run
from pathdiv.experiments.execute.runstate import ResultsError, base_manifest, finish_manifest
from pathdiv.experiments.plan.runs import expand

folder, hold_at = Path(sys.argv[1]), int(sys.argv[2])
cfg = validate({CONFIG!r})
runs = expand(cfg, repetitions=1, flow_types=["query", "short"])

def fake(run, run_dir, on_round=None, keeper=None):
    (run_dir / "captures").mkdir()
    (run_dir / "captures" / "h1-e1.pcap").write_bytes(b"\\xd4\\xc3\\xb2\\xa1" + bytes(4096))
    if run.order == hold_at:
        (folder.parent / "holding").write_text(str(os.getpid()))
        time.sleep(600)
    manifest = base_manifest(run)
    manifest.update(status="complete", transfers={{"total": 1, "ok": 1, "failed": 0,
                                                   "rounds": 1}},
                    timings={{"build_s": 1.0, "traffic_s": 1.0, "teardown_s": 1.0}})
    finish_manifest(manifest, run_dir, time.monotonic())
    return manifest

one_run.execute_run = fake
try:
    print("ran", runner.run_plan(cfg, runs, folder, quiet=True).summary(), flush=True)
except ResultsError as exc:
    print("refused:", exc, flush=True)
"""


def _plan() -> tuple:
    cfg = validate(CONFIG)
    return cfg, expand(cfg, repetitions=1, flow_types=["query", "short"])


def _child(folder: Path, hold_at: int = -1) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CHILD, str(folder), str(hold_at)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_holding(tmp_path: Path, child: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120  # a busy machine starts Python slowly
    while not (tmp_path / "holding").exists():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the child never reached its held run"
        time.sleep(0.05)


def _complete(run, run_dir, on_round=None, keeper=None):
    manifest = {**base_manifest(run), "status": "complete",
                "transfers": {"total": 1, "ok": 1, "failed": 0, "rounds": 1},
                "timings": {"build_s": 1.0, "traffic_s": 1.0, "teardown_s": 1.0}}
    write_json_atomic(run_dir / "manifest.json", manifest)
    return manifest


class TestASecondRunOfThePlanIsRefused:
    def test_while_the_first_is_between_runs_it_is_told_who_holds_the_folder(self, tmp_path):
        """The first `run` has finished one run and sits in the next (no marker would
        stop a second one between runs or lab boots); the second changes nothing."""
        cfg, runs = _plan()
        folder = runner.prepare_folder(cfg, tmp_path / "out")
        first = _child(folder, hold_at=1)
        try:
            _wait_holding(tmp_path, first)
            before = (folder / "plan.json").read_bytes()
            second = subprocess.run([sys.executable, "-c", CHILD, str(folder), "-1"],
                                    capture_output=True, text=True, timeout=120)
            assert second.stdout.startswith("refused: "), second.stderr
            assert (f"another `pathdiv run` executes this plan there (pid {first.pid}"
                    in second.stdout)
            assert "wait for it, or stop it" in second.stdout
            assert (folder / "plan.json").read_bytes() == before
            assert run_state(folder / "runs" / runs[2].run_id) == "absent"
        finally:
            first.kill()
            first.wait(timeout=60)

    def test_once_the_first_has_ended_the_plan_resumes(self, tmp_path, monkeypatch):
        cfg, runs = _plan()
        folder = runner.prepare_folder(cfg, tmp_path / "out")
        done = subprocess.run([sys.executable, "-c", CHILD, str(folder), "-1"],
                              capture_output=True, text=True, timeout=120)
        assert done.stdout == "ran 4 run(s): 4 complete\n", done.stderr
        monkeypatch.setattr(one_run, "execute_run", _complete)
        assert runner.run_plan(cfg, runs, folder, quiet=True).count("complete") == 4
        # the lock file stays, held by no one and naming no one
        assert (folder / "running" / "plan.lock").stat().st_size == 0


class TestAKillLeavesNothingHalfWritten:
    def test_sigkill_mid_run_leaves_whole_records_and_the_resume_keeps_the_cut_attempt(
            self, tmp_path, monkeypatch):
        cfg, runs = _plan()
        folder = runner.prepare_folder(cfg, tmp_path / "out")
        child = _child(folder, hold_at=2)
        _wait_holding(tmp_path, child)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        plan = json.loads((folder / "plan.json").read_text())  # whole, not torn
        assert [e["status"] for e in plan["runs"]] == ["complete", "complete", "pending",
                                                       "pending"]
        for run in runs[:2]:
            manifest = read_json_dict(folder / "runs" / run.run_id / "manifest.json")
            assert manifest is not None and manifest["status"] == "complete"
        cut = folder / "runs" / runs[2].run_id
        assert run_state(cut) == "partial"  # its capture, no manifest: never complete
        assert not list(folder.rglob(".*.tmp"))  # no writer's temporary file left
        monkeypatch.setattr(one_run, "execute_run", _complete)
        outcome = runner.run_plan(cfg, runs, folder, quiet=True)
        assert outcome.count("complete") == 4
        kept = folder / "earlier" / runs[2].run_id / "1"
        assert (kept / "captures" / "h1-e1.pcap").stat().st_size == 4100
        assert run_state(cut) == "complete" and not (cut / "captures").exists()

    def test_a_complete_runs_captures_are_synced_before_its_manifest(self, tmp_path,
                                                                     monkeypatch):
        """Else a power cut could keep a manifest saying complete beside captures that
        never reached the disk."""
        synced: list[str] = []
        real = os.fsync

        def recording(fd: int) -> None:
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))
            real(fd)

        monkeypatch.setattr(os, "fsync", recording)
        _, runs = _plan()
        run_dir = tmp_path / "runs" / runs[0].run_id
        (run_dir / "captures").mkdir(parents=True)
        (run_dir / "captures" / "h1-e1.pcap").write_bytes(b"x" * 100)
        (run_dir / "transfers.csv").write_text("id\n1\n")
        manifest = {**base_manifest(runs[0]), "status": "complete"}
        finish_manifest(manifest, run_dir, time.monotonic())
        pcap = synced.index(str(run_dir / "captures" / "h1-e1.pcap"))
        csv = synced.index(str(run_dir / "transfers.csv"))
        written = next(i for i, p in enumerate(synced) if ".manifest.json." in p)
        assert max(pcap, csv) < written


class TestAResumeKeepsFailedAttempts:
    def test_a_failed_runs_folder_moves_to_earlier_and_only_the_last_few_stay(self,
                                                                               tmp_path):
        _, runs = _plan()
        run_dir = tmp_path / "runs" / runs[0].run_id
        for n in range(1, KEEP_EARLIER + 2):
            run_dir.mkdir(parents=True)
            write_json_atomic(run_dir / "manifest.json", {**base_manifest(runs[0]),
                                                          "error": f"attempt {n} broke"})
            kept = set_aside(tmp_path, runs[0].run_id)
            assert kept == tmp_path / "earlier" / runs[0].run_id / str(n)
            assert not run_dir.exists()
        left = sorted(int(p.name) for p in (tmp_path / "earlier" / runs[0].run_id).iterdir())
        assert left == list(range(2, KEEP_EARLIER + 2))
        last = read_json_dict(tmp_path / "earlier" / runs[0].run_id / str(left[-1])
                              / "manifest.json")
        assert last is not None and last["error"] == f"attempt {KEEP_EARLIER + 1} broke"

    def test_a_skipped_runs_folder_holds_only_a_reason_and_is_removed(self, tmp_path):
        _, runs = _plan()
        run_dir = tmp_path / "runs" / runs[0].run_id
        run_dir.mkdir(parents=True)
        write_json_atomic(run_dir / "manifest.json", {**base_manifest(runs[0]),
                                                      "status": "skipped"})
        assert set_aside(tmp_path, runs[0].run_id) is None
        assert not run_dir.exists() and not (tmp_path / "earlier").exists()


class TestLinksInTheFolderAreNotFollowed:
    def test_a_run_folder_planted_as_a_link_is_unlinked_and_its_target_left(self, tmp_path):
        """A guest (or the folder's owner) makes runs/<id> a link to a folder of root's;
        the redo removes the link, never what it points to."""
        _, runs = _plan()
        precious = tmp_path / "precious"
        precious.mkdir()
        (precious / "keep").write_text("root's")
        (tmp_path / "out" / "runs").mkdir(parents=True)
        (tmp_path / "out" / "runs" / runs[0].run_id).symlink_to(precious)
        assert set_aside(tmp_path / "out", runs[0].run_id) is None
        assert (precious / "keep").read_text() == "root's"
        assert not (tmp_path / "out" / "runs" / runs[0].run_id).is_symlink()
        assert not (tmp_path / "out" / "earlier").exists()

    def test_a_failed_manifest_is_not_written_through_a_run_folder_the_guest_linked(
            self, tmp_path):
        """The lab kernel died; its guest had made runs/<id> a link to a host folder:
        the host's failed manifest goes into a real folder, the link's target untouched."""
        _, runs = _plan()
        precious = tmp_path / "precious"
        precious.mkdir()
        (tmp_path / "out" / "runs").mkdir(parents=True)
        run_dir = tmp_path / "out" / "runs" / runs[0].run_id
        run_dir.symlink_to(precious)
        runstate.write_failed(runs[0], run_dir, "the lab kernel died")
        assert list(precious.iterdir()) == []
        assert not run_dir.is_symlink() and run_state(run_dir) == "failed"

    def test_a_runs_folder_that_is_a_link_is_refused(self, tmp_path):
        _, runs = _plan()
        elsewhere = tmp_path / "elsewhere"
        (elsewhere / runs[0].run_id).mkdir(parents=True)
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "runs").symlink_to(elsewhere)
        with pytest.raises(OSError, match="symbolic link"):
            set_aside(tmp_path / "out", runs[0].run_id)
        assert (elsewhere / runs[0].run_id).is_dir()

    def test_the_plan_lock_planted_as_a_link_is_refused_before_any_run(self, tmp_path,
                                                                       monkeypatch):
        cfg, runs = _plan()
        folder = runner.prepare_folder(cfg, tmp_path / "out")
        (folder / "running").mkdir()
        (folder / "running" / "plan.lock").symlink_to(tmp_path / "made-by-root")
        ran: list[str] = []
        monkeypatch.setattr(one_run, "execute_run",
                            lambda run, *a, **k: ran.append(run.run_id))
        with pytest.raises(OSError, match="symbolic link"):
            runner.run_plan(cfg, runs, folder, quiet=True)
        assert ran == [] and not (tmp_path / "made-by-root").exists()

    def test_out_with_dotdot_is_used_as_resolved_once(self, tmp_path):
        cfg, _ = _plan()
        (tmp_path / "a").mkdir()
        folder = runner.prepare_folder(cfg, tmp_path / "a" / ".." / "out")
        assert folder == tmp_path / "out" and ".." not in folder.parts
        assert (folder / runner.MARKER).is_file() and (folder / "config.yaml").is_file()


def test_the_folder_is_handed_over_only_after_the_analysis(tmp_path, monkeypatch):
    """Through sudo, the folder becomes the user's; root must have finished writing it
    (the analysis too), or the user could plant a link for root to write through."""
    events: list[str] = []
    monkeypatch.setattr(one_run, "execute_run", _complete)
    monkeypatch.setattr(api.plans, "preflight", lambda cfg: None)
    monkeypatch.setattr(api.plans, "hand_over", lambda folder: events.append("hand_over"))
    monkeypatch.setattr(api.plans, "_analyze_folder",
                        lambda folder: events.append("analyze") or folder / "report.html")
    cfg, runs = _plan()
    result = api.run(cfg, tmp_path / "out", runs=runs)
    assert result.outcome.count("complete") == 4
    assert events == ["analyze", "hand_over"]


def test_runstate_reads_a_manifest_through_no_link(tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"status": "complete"}))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "manifest.json").symlink_to(secret)
    assert runstate.run_state(tmp_path / "run") == "partial"
