"""Scratch folders (/tmp/pathdiv-*) carry their owner's mark, so `pathdiv clean` removes
those a killed pathdiv left and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pathdiv.kernels import processes
from pathdiv.kernels.processes import SCRATCH_MARK, orphaned_scratch, scratch, scratch_folder


@pytest.fixture
def tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(processes.tempfile, "tempdir", str(tmp_path))
    return tmp_path


def dead_owner_mark() -> str:
    """The owner mark of a process that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    mark = processes.owner_mark(child.pid)
    child.wait()
    return mark


def test_a_scratch_folder_is_private_marked_and_gone_after_its_block(tmp_root: Path) -> None:
    with scratch("net") as folder:
        assert folder.parent == tmp_root and folder.name.startswith("pathdiv-net-")
        assert oct(folder.stat().st_mode & 0o777) == "0o700"
        assert (folder / SCRATCH_MARK).read_text() == processes.owner_mark()
        assert orphaned_scratch() == []  # its owner (this process) runs
    assert not folder.exists()


def test_only_marked_folders_of_dead_owners_are_orphans(tmp_root: Path) -> None:
    live = scratch_folder("lab")
    dead = scratch_folder("lab")
    (dead / SCRATCH_MARK).write_text(dead_owner_mark())
    (dead / "captures").mkdir()
    unmarked = tmp_root / "pathdiv-lab-someone-elses"
    unmarked.mkdir()
    target = tmp_root / "not-ours"
    target.mkdir()
    (target / SCRATCH_MARK).write_text(dead_owner_mark())
    os.symlink(target, tmp_root / "pathdiv-lab-link")
    other = tmp_root / "other-dead"
    other.mkdir()
    (other / SCRATCH_MARK).write_text(dead_owner_mark())

    assert orphaned_scratch() == [dead]
    assert live.exists() and unmarked.exists()


def test_a_reused_pid_does_not_keep_a_folder(tmp_root: Path) -> None:
    folder = scratch_folder("api-lab")
    pid = os.getpid()
    (folder / SCRATCH_MARK).write_text(f"{pid}:1")  # this pid, another start time
    assert orphaned_scratch() == [folder]
