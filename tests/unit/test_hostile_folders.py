"""Results folders written by others (a student who owns the folder after a run through
sudo, a lab-kernel guest that writes into it): what root reads there follows no link and
is bounded, what it writes there goes through no link."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import pathdiv.analysis.safefiles as safefiles
from pathdiv.analysis import results
from pathdiv.analysis.metrics.table import compute_metrics
from pathdiv.analysis.readers import FolderError
from pathdiv.experiments.cluster import planfile, tracking
from pathdiv.experiments.cluster.status import folder_status
from pathdiv.experiments.dataplane.bmv2 import programs as p4programs
from pathdiv.experiments.manifest import read_json_dict
from tests.hostile_configs import LAUGHS
from tests.unit.test_metrics import run as metrics_run
from tests.unit.test_metrics import tcp_spec


def test_the_plan_lock_is_not_created_through_a_dangling_link(tmp_path):
    """A link planted at plan.json.lock pointing where nothing is yet: opening it with
    O_CREAT alone would create the link's target as root."""
    target = tmp_path / "elsewhere" / "cron-job"
    target.parent.mkdir()
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "plan.json.lock").symlink_to(target)
    with pytest.raises(safefiles.FileRefused, match=r"plan\.json\.lock is a symbolic link"):
        with planfile.plan_lock(folder):
            pass
    assert not target.exists()


def test_the_plan_lock_refuses_a_fifo_at_once(tmp_path):
    os.mkfifo(tmp_path / "plan.json.lock")
    started = time.monotonic()
    with pytest.raises(safefiles.FileRefused, match="is not a regular file"):
        with planfile.plan_lock(tmp_path):
            pass
    assert time.monotonic() - started < 5


class TestOversizedOrLinkedRecordsAreNotRead:
    """Manifests, progress files and plan.json read back: no link, no FIFO, bounded."""

    def test_records_read_back_follow_no_link_and_are_bounded(self, tmp_path):
        secret = tmp_path / "secret.json"
        secret.write_text(json.dumps({"root": "only"}))
        (tmp_path / "manifest.json").symlink_to(secret)
        assert read_json_dict(tmp_path / "manifest.json") is None
        os.mkfifo(tmp_path / "progress.json")
        assert read_json_dict(tmp_path / "progress.json") is None  # at once, not a hang
        (tmp_path / "big.json").write_text(json.dumps({"x": "y" * 2000}))
        assert read_json_dict(tmp_path / "big.json", limit=1000) is None
        (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
        assert read_json_dict(tmp_path / "deep.json") is None
        (tmp_path / "plan.json").symlink_to(secret)
        assert planfile.read_plan(tmp_path) is None


def test_a_cached_p4_program_others_could_have_replaced_is_not_loaded(tmp_path):
    """A compiled program root loads (a bmv2 JSON, an eBPF object into the kernel) gets
    the checks linkcap and the kernel image get: no link, no foreign owner, no group or
    other write permission from the cache down."""
    cache = tmp_path / "p4"
    folder = cache / "abc123"
    folder.mkdir(parents=True)
    for folder_ in (cache, folder):
        folder_.chmod(0o755)
    good = folder / "ecmp.json"
    good.write_text("{}")
    good.chmod(0o644)
    assert p4programs.cached_problems([good], cache) == []
    p4programs.refuse_unsafe([good], cache, folder)
    good.chmod(0o666)
    with pytest.raises(p4programs.P4CompileError,
                       match=r"ecmp\.json is writable by group or others .*; remove "):
        p4programs.refuse_unsafe([good], cache, folder)
    good.chmod(0o644)
    folder.chmod(0o777)
    assert any("abc123 is writable by group or others" in p
               for p in p4programs.cached_problems([good], cache))
    folder.chmod(0o755)
    (folder / "p4info.txtpb").symlink_to(tmp_path / "elsewhere")
    assert any("is a symlink" in p for p in
               p4programs.cached_problems([folder / "p4info.txtpb"], cache))


# ---- what analyze, status, compare and results.open read -------------------------------
def _runs(folder: Path) -> None:
    """Three measured runs r1..r3 (tests/unit/test_metrics.py's synthetic captures)."""
    for i, size in enumerate((3000, 4000, 5000), 1):
        metrics_run(folder, [tcp_spec(size_bytes=size)], name=f"r{i}")


def test_one_bad_run_is_named_and_skipped_not_fatal(tmp_path):
    """A guest (or the folder's owner) wrote garbage, a FIFO and a link into three of
    five runs: the metrics cover the two good ones and say why the others are out."""
    _runs(tmp_path)
    metrics_run(tmp_path, [tcp_spec(size_bytes=6000)], name="r4")
    metrics_run(tmp_path, [tcp_spec(size_bytes=7000)], name="r5")
    (tmp_path / "runs" / "r1" / "transfers.csv").write_text("\x00" * 10)
    os.unlink(tmp_path / "runs" / "r2" / "transfers.csv")
    os.mkfifo(tmp_path / "runs" / "r2" / "transfers.csv")
    secret = tmp_path / "secret.csv"
    secret.write_text("transfer_id,SECRETCOLUMN\n1,2\n")
    os.unlink(tmp_path / "runs" / "r3" / "transfers.csv")
    (tmp_path / "runs" / "r3" / "transfers.csv").symlink_to(secret)
    (tmp_path / "runs" / "evil").symlink_to(tmp_path / "runs" / "r4")  # a second r4
    notes: list[str] = []
    started = time.monotonic()
    path = compute_metrics(tmp_path, notes=notes)
    assert time.monotonic() - started < 30
    assert sorted(pd.read_csv(path)["run_id"]) == ["r4", "r5"]
    said = "\n".join(notes)
    for run in ("r1", "r2", "r3"):
        assert f"run {run} was not measured" in said
    assert "is not a regular file" in said and "is a symbolic link" in said
    assert "runs/'evil' is a symbolic link; skipped." in said
    assert "SECRETCOLUMN" not in said


def test_status_and_results_stay_inside_the_folder_and_do_not_hang(tmp_path, capsys):
    """plan.json names a run `../../secret` (its owner may edit it), config.yaml is an
    alias bomb, stats.json a FIFO: status and results.open read none of it whole."""
    folder = tmp_path / "results"
    _runs(folder)
    outside = tmp_path / "secret"
    (outside / "runs" / "x").mkdir(parents=True)
    (outside / "runs" / "x" / "manifest.json").write_text(
        json.dumps({"status": "failed", "error": "SECRET"}))
    (folder / "plan.json").write_text(json.dumps({"runs": [
        {"run_id": "../../secret/runs/x", "flow_type": "q"},
        {"run_id": "r1", "flow_type": "q"}]}))
    (folder / "runs" / "r1" / "manifest.json").write_text(json.dumps(
        {"status": "failed", "error": "\x1b]0;owned\x07 broken"}))
    started = time.monotonic()
    status = folder_status(folder)
    summary = status.summary()
    assert "SECRET" not in summary and "\x1b" not in summary
    assert [r.state for r in status.runs] == ["failed", "failed"]
    assert "not a run id" in status.runs[0].note
    assert status.runs[1].note == "\\x1b]0;owned\\x07 broken"
    (folder / "config.yaml").write_text(LAUGHS)
    with pytest.raises(FolderError, match=r"config\.yaml cannot be read \(line \d+: with "
                                          r"its aliases"):
        results.open(folder)
    (folder / "config.yaml").write_text("name: ok\n")
    os.mkfifo(folder / "stats.json")
    res = results.open(folder)
    assert res.stats is None and any("stats.json is not a regular file" in n
                                     for n in res.notes)
    assert time.monotonic() - started < 30


def test_a_second_run_of_the_plan_is_refused_for_the_whole_execution(tmp_path):
    """The plan lock (running/plan.lock) is held by a run between its runs too, where no
    running marker exists; a second process is refused, told who holds it; another
    shard of the plan has a lock of its own."""
    code = ("import sys, pathlib\n"
            "from pathdiv.experiments.cluster.tracking import FolderBusy, execution_lock\n"
            "from pathdiv.experiments.cluster.shards import parse_shard\n"
            "shard = parse_shard(sys.argv[2]) if len(sys.argv) > 2 else None\n"
            "try:\n"
            "    with execution_lock(pathlib.Path(sys.argv[1]), shard):\n"
            "        print('ran')\n"
            "except FolderBusy as exc:\n"
            "    print(exc)\n")
    with tracking.execution_lock(tmp_path):
        other = subprocess.run([sys.executable, "-c", code, str(tmp_path)],
                               capture_output=True, text=True, timeout=60)
        assert f"another `pathdiv run` executes this plan there (pid {os.getpid()}" in \
            other.stdout, other.stderr
        shard = subprocess.run([sys.executable, "-c", code, str(tmp_path), "1/2"],
                               capture_output=True, text=True, timeout=60)
        assert shard.stdout == "ran\n", shard.stderr
    after = subprocess.run([sys.executable, "-c", code, str(tmp_path)],
                           capture_output=True, text=True, timeout=60)
    assert after.stdout == "ran\n"
    (tmp_path / "running" / "plan.lock").unlink()
    (tmp_path / "running" / "plan.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(safefiles.FileRefused), tracking.execution_lock(tmp_path):
        pass
    assert not (tmp_path / "elsewhere").exists()
