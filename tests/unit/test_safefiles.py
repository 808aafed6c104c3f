"""analysis/safefiles.py: what root opens in folders others write follows no link, reads
nothing unbounded and writes nothing in place."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from pathdiv.analysis import safefiles as sf

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "dir" / "sub").mkdir(parents=True)
    (tmp_path / "dir" / "sub" / "f").write_text("hello")
    (tmp_path / "secret").write_text("root only")
    return tmp_path


def test_a_regular_file_below_a_folder_is_read_whole(tree):
    fd = sf.open_dir(tree / "dir")
    try:
        assert sf.read_beneath(fd, "sub/f", 100) == b"hello"
    finally:
        os.close(fd)
    assert sf.read_text(tree / "dir" / "sub" / "f", 100) == "hello"


def test_a_link_at_the_end_or_on_the_way_is_refused_and_named(tree):
    (tree / "dir" / "stdout").symlink_to(tree / "secret")
    (tree / "dir" / "via").symlink_to(tree / "dir" / "sub")
    fd = sf.open_dir(tree / "dir")
    try:
        with pytest.raises(sf.FileRefused, match="stdout is a symbolic link"):
            sf.read_beneath(fd, "stdout", 100)
        with pytest.raises(sf.FileRefused, match="via is a symbolic link"):
            sf.read_beneath(fd, "via/f", 100)
    finally:
        os.close(fd)
    with pytest.raises(sf.FileRefused, match="stdout is a symbolic link"):
        sf.read_file(tree / "dir" / "stdout", 100)
    (tree / "up").symlink_to(tree / "dir")
    with pytest.raises(sf.FileRefused, match="up is a symbolic link"):
        sf.open_dir(tree / "up" / "sub")


def test_dotdot_and_absolute_names_do_not_leave_the_folder(tree):
    fd = sf.open_dir(tree / "dir")
    try:
        with pytest.raises(sf.FileRefused, match=r"'\.\.' leaves its folder"):
            sf.read_beneath(fd, "../secret", 100)
        with pytest.raises(sf.FileRefused, match="relative"):
            sf.read_beneath(fd, str(tree / "secret"), 100)
    finally:
        os.close(fd)


def test_a_fifo_a_folder_and_a_large_file_are_refused_at_once(tree):
    os.mkfifo(tree / "dir" / "fifo")
    (tree / "dir" / "big").write_bytes(b"x" * 1001)
    started = time.monotonic()
    for name, why in (("fifo", "not a regular file"), ("sub", "not a regular file"),
                      ("big", "1001 bytes, more than the 1000")):
        with pytest.raises(sf.FileRefused, match=why):
            sf.read_file(tree / "dir" / name, 1000)
    assert time.monotonic() - started < 5
    with pytest.raises(sf.FileRefused, match="not a regular file"):
        sf.read_file("/dev/zero", 1000)


def test_an_error_names_the_file_never_its_content(tree):
    (tree / "dir" / "big").write_text("TOPSECRET\n" * 200)
    with pytest.raises(sf.FileRefused) as err:
        sf.read_file(tree / "dir" / "big", 100)
    assert "TOPSECRET" not in str(err.value) and "big" in str(err.value)


def test_write_atomic_replaces_a_planted_link_instead_of_writing_through_it(tree):
    target = tree / "secret"
    (tree / "dir" / "plot.png").symlink_to(target)
    fd = sf.open_dir(tree / "dir")
    try:
        sf.write_atomic(fd, "plot.png", b"new")
    finally:
        os.close(fd)
    assert target.read_text() == "root only"
    assert not (tree / "dir" / "plot.png").is_symlink()
    assert (tree / "dir" / "plot.png").read_bytes() == b"new"
    assert [p.name for p in (tree / "dir").iterdir() if p.name.endswith(".tmp")] == []


def test_write_atomic_gives_the_mode_asked_less_the_umask(tree):
    old = os.umask(0o027)
    try:
        sf.write_file_atomic(tree / "dir" / "x.csv", b"a,b\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tree / "dir" / "x.csv").stat().st_mode) == 0o640


def test_write_file_atomic_refuses_a_link_among_its_folders_and_makes_missing_ones(tree):
    (tree / "l").symlink_to(tree / "dir")
    with pytest.raises(sf.FileRefused, match="l is a symbolic link"):
        sf.write_file_atomic(tree / "l" / "x", b"1")
    assert not (tree / "dir" / "x").exists()
    sf.write_file_atomic(tree / "new" / "deeper" / "x", b"1")
    assert (tree / "new" / "deeper" / "x").read_bytes() == b"1"


def test_walk_links_takes_dotdot_after_the_link_as_the_kernel_does(tree):
    (tree / "x").mkdir()
    (tree / "x" / "l").symlink_to(tree / "dir" / "sub")
    path = f"{tree}/x/l/../profile.d"
    assert sf.walk_links(path) == tree / "x" / "l"
    # the kernel takes `..` after the link: dir/profile.d, where abspath says x/profile.d
    assert Path(os.path.abspath(path)) == tree / "x" / "profile.d"
    assert sf.resolve_physical(path) == tree / "dir" / "profile.d"
    assert sf.walk_links(tree / "x" / "missing" / "y") is None
    assert sf.walk_links(tree / "dir" / "sub") is None


@needs_root
def test_chown_tree_gives_links_not_their_targets_and_skips_hard_linked_files(tree):
    results = tree / "results"
    (results / "runs" / "r1").mkdir(parents=True)
    (results / "runs" / "r1" / "m.json").write_text("{}")
    (results / "link").symlink_to(tree / "secret")
    (results / "dirlink").symlink_to(tree / "dir")
    os.link(tree / "secret", results / "hard")
    (results / "runs" / "r1" / "tool").write_text("#!/bin/sh\n")
    os.chmod(results / "runs" / "r1" / "tool", 0o4755)
    fd = sf.open_dir(results)
    try:
        changed = sf.chown_tree(fd, 4242, 4243)
    finally:
        os.close(fd)
    owned = {p.relative_to(results).as_posix() for p in results.rglob("*")
             if os.lstat(p).st_uid == 4242}
    assert owned == {"runs", "runs/r1", "runs/r1/m.json", "runs/r1/tool", "link", "dirlink"}
    assert changed == 7  # the folder itself too
    assert os.lstat(results).st_uid == 4242
    for foreign in (tree / "secret", tree / "dir", tree / "dir" / "sub" / "f"):
        assert foreign.stat().st_uid == 0, foreign
    # the kernel clears set-user-ID when the owner changes
    assert not (results / "runs" / "r1" / "tool").stat().st_mode & stat.S_ISUID


def test_dotdot_in_a_path_is_walked_not_normalised_away(tree):
    """`runs/../../secret` from a run id a guest chose: abspath would take it out of
    the folder, the walk refuses it."""
    with pytest.raises(sf.FileRefused, match="leaves its folder"):
        sf.read_file(f"{tree}/dir/sub/../../secret", 100)
    with pytest.raises(sf.FileRefused, match="leaves its folder"):
        sf.write_file_atomic(f"{tree}/dir/../x", b"1")
    assert not (tree / "x").exists()


def test_sync_tree_syncs_the_files_below_and_follows_no_link(tree):
    (tree / "dir" / "a.pcap").write_bytes(b"x")
    (tree / "dir" / "link.pcap").symlink_to(tree / "secret")
    os.mkfifo(tree / "dir" / "fifo")
    fd = sf.open_dir(tree / "dir")
    try:
        assert sf.sync_tree(fd) == 2  # a.pcap and sub/f; not the link nor the FIFO
    finally:
        os.close(fd)
