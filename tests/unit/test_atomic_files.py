"""The one atomic writer: readers see the old file or the whole new one, readable by the
user who ran pathdiv through sudo, and a symbolic link at the path is replaced, not
written through."""

import os
import stat

import pytest

import pathdiv.analysis.safefiles as safefiles
from pathdiv.analysis.atomic import write_text_atomic


def test_a_result_file_is_complete_and_readable_by_others(tmp_path):
    old = os.umask(0o022)
    try:
        write_text_atomic(tmp_path / "sub" / "metrics.csv", "a,b\n1,2\n")
    finally:
        os.umask(old)
    path = tmp_path / "sub" / "metrics.csv"
    assert path.read_text() == "a,b\n1,2\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in path.parent.iterdir()] == ["metrics.csv"]  # no temporary left


def test_a_symlink_at_the_path_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "report.md").symlink_to(victim)
    write_text_atomic(tmp_path / "report.md", "new")
    assert victim.read_text() == "keep"
    assert not (tmp_path / "report.md").is_symlink()
    assert (tmp_path / "report.md").read_text() == "new"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "stats.json"
    path.write_text("old")

    def fail(*_, **__):
        raise OSError("disk full")

    monkeypatch.setattr(safefiles.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_text_atomic(path, "new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["stats.json"]


def test_a_symlink_among_the_folders_is_refused_not_followed(tmp_path):
    """A guest (or the folder's owner) swaps a run's folder for a link into a root-only
    tree: the writer refuses instead of writing there."""
    victim = tmp_path / "etc"
    victim.mkdir()
    (tmp_path / "results" / "runs").mkdir(parents=True)
    (tmp_path / "results" / "runs" / "r1").symlink_to(victim)
    with pytest.raises(safefiles.FileRefused, match="r1 is a symbolic link"):
        write_text_atomic(tmp_path / "results" / "runs" / "r1" / "manifest.json", "{}")
    assert list(victim.iterdir()) == []
