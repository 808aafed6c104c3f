"""A run's manifest names the code it ran: HEAD, '-dirty' only when tracked files differ."""

from __future__ import annotations

import os
import stat

from pathdiv.experiments.manifest import git_revision

HEAD = "0123456789abcdef0123456789abcdef01234567"


def fake_git(folder, status_out: str, warn: str) -> None:
    """A `git` that answers rev-parse and status as told, warning on stderr each time
    (as git does in the lab kernel, where root's configuration is unreadable)."""
    script = folder / "git"
    script.write_text(
        "#!/bin/sh\n"
        f"echo '{warn}' >&2\n"
        'for a in "$@"; do\n'
        f'  [ "$a" = rev-parse ] && {{ echo {HEAD}; exit 0; }}\n'
        f'  [ "$a" = status ] && {{ printf "{status_out}"; exit 0; }}\n'
        "done\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_a_warning_on_gits_error_stream_does_not_make_a_clean_tree_dirty(tmp_path, monkeypatch):
    fake_git(tmp_path, "", "warning: unable to access '/root/.config/git/ignore': "
                           "Permission denied")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert git_revision(tmp_path) == HEAD


def test_a_changed_tracked_file_makes_it_dirty(tmp_path, monkeypatch):
    fake_git(tmp_path, " M experiments/runner.py\\n", "")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert git_revision(tmp_path) == HEAD + "-dirty"
