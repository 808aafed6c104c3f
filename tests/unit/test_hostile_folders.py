"""Results folders written by others (a student who owns the folder after a run through
sudo, a lab-kernel guest that writes into it): what root reads there follows no link and
is bounded, what it writes there goes through no link."""

from __future__ import annotations

import json
import os
import time

import pytest

import pathdiv.analysis.safefiles as safefiles
from pathdiv.experiments.cluster import planfile
from pathdiv.experiments.dataplane.p4 import programs as p4programs
from pathdiv.experiments.manifest import read_json_dict


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


def test_records_read_back_follow_no_link_and_are_bounded(tmp_path):
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
