"""Where root may write results: no links, no system folders, no foreign folders; and
the results belong to the user who ran pathdiv through sudo."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pathdiv.experiments import runner
from pathdiv.experiments.config.load import validate
from pathdiv.experiments.config.results_folder import MARKER, hand_over, out_problem

CFG = validate({"name": "safe"})


def refused(out: Path) -> str:
    with pytest.raises(runner.ResultsError) as err:
        runner.prepare_folder(CFG, out)
    return str(err.value)


class TestAnOutThroughALinkOrDotDotIsRefused:
    """`--out` that is, or passes through, a symbolic link; `..` taken after a link."""

    def test_a_symlinked_out_or_a_link_on_its_way_is_refused(self, tmp_path):
        victim = tmp_path / "victim"
        victim.mkdir()
        (tmp_path / "out").symlink_to(victim)
        assert refused(tmp_path / "out") == (
            f"{tmp_path}/out: {tmp_path}/out is a symbolic link; pathdiv writes results as "
            "root and follows no link: give the real path of the folder")
        (tmp_path / "shared").symlink_to(victim)
        assert f"{tmp_path}/shared is a symbolic link" in refused(tmp_path / "shared" / "new")
        assert list(victim.iterdir()) == []

    def test_a_link_followed_by_dotdot_does_not_escape_the_check(self, tmp_path):
        """`--out x/l/../victim` with `l` pointing into another tree: the kernel takes `..`
        after the link (the other tree's folder), a lexical check would have seen x/victim;
        it is refused, and the other tree's folder is left as it was."""
        (tmp_path / "x").mkdir()
        other = tmp_path / "other"
        (other / "deep").mkdir(parents=True)
        (other / "victim").mkdir()
        (other / "victim" / "profile.sh").write_text("keep")
        (tmp_path / "x" / "l").symlink_to(other / "deep")
        out = Path(f"{tmp_path}/x/l/../victim")
        assert refused(out) == (f"{out}: {tmp_path}/x/l is a symbolic link; pathdiv writes "
                                "results as root and follows no link: give the real path of "
                                "the folder")
        assert sorted(p.name for p in (other / "victim").iterdir()) == ["profile.sh"]
        assert not (tmp_path / "x" / "victim").exists()


sudo_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (run as through sudo)")


@sudo_only
def test_through_sudo_a_folder_the_user_could_not_have_made_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("SUDO_UID", "4321")
    monkeypatch.setenv("SUDO_GID", "4322")
    tmp_path.chmod(0o755)
    for folder in (tmp_path, *tmp_path.parents):  # let uid 4321 reach tmp_path
        folder.chmod(folder.stat().st_mode | 0o001)
    roots = tmp_path / "roots"  # root's, empty: --out would have handed it to the user
    roots.mkdir()
    assert refused(roots) == (f"{roots} belongs to uid 0, not to uid 4321, who ran pathdiv "
                              "through sudo; pathdiv would hand it to you: give a folder "
                              "of your own (a new one, or one of your results folders)")
    assert refused(roots / "new") == (
        f"{roots}/new: uid 4321, who ran pathdiv through sudo, may not make folders in "
        f"{roots}; give a results folder where you may write (pathdiv hands it to you)")
    closed = tmp_path / "closed"
    (closed / "mine").mkdir(parents=True)
    os.chown(closed / "mine", 4321, 4322)
    closed.chmod(0o700)
    assert "cannot enter " + str(closed) in refused(closed / "mine")
    closed.chmod(0o755)
    assert runner.prepare_folder(CFG, closed / "mine") == closed / "mine"
    os.chown(roots, 4321, 4322)
    assert runner.prepare_folder(CFG, roots / "new") == roots / "new"
    assert list(roots.iterdir()) == [roots / "new"]


@pytest.mark.parametrize("out", ["/", "/etc", "/etc/cron.d/x", "/usr/local", "/home",
                                 "/proc/1/x", "/sys/x", "/boot/x"])
def test_system_folders_are_refused(out):
    assert out_problem(Path(out)) == (f"{out} is a system folder; give a folder of its "
                                      "own for the results, e.g. results/my-run")


def test_a_non_empty_folder_that_is_not_a_results_folder_is_refused(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("x")
    assert refused(home) == (f"{home} is a folder that is not empty and holds no pathdiv "
                             "results; give a new or empty folder (an existing results "
                             "folder is resumed)")
    assert (home / ".bashrc").read_text() == "x" and len(list(home.iterdir())) == 1


def test_a_new_or_empty_folder_becomes_a_marked_results_folder_that_resumes(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert runner.prepare_folder(CFG, empty) == empty
    assert (empty / MARKER).is_file()
    assert runner.prepare_folder(CFG, empty) == empty  # a resume
    fresh = runner.prepare_folder(CFG, tmp_path / "a" / "b")
    assert (fresh / MARKER).is_file()


class TestALinkInsideAResultsFolderIsRefused:
    """A link anywhere in a results folder (a guest or the folder's owner planted it)."""

    def test_a_link_inside_a_results_folder_is_refused(self, tmp_path):
        folder = runner.prepare_folder(CFG, tmp_path / "out")
        (folder / "runs").mkdir()
        (folder / "runs" / "query_rep1").symlink_to("/etc")
        assert refused(folder) == (f"{folder} holds the symbolic link {folder}/runs/query_rep1; "
                                   "pathdiv follows no link in a results folder: remove it")
        (folder / "runs" / "query_rep1").unlink()
        (folder / "runs" / "query_rep1").mkdir()
        (folder / "runs" / "query_rep1" / "metrics.csv").symlink_to("/etc/passwd")
        assert "holds the symbolic link" in refused(folder)

    def test_analyze_refuses_a_folder_with_a_link_a_guest_could_have_planted(
            self, tmp_path, capsys):
        from pathdiv.experiments.cli import main

        folder = runner.prepare_folder(CFG, tmp_path / "out")
        (folder / "runs").mkdir()
        (folder / "report.md").symlink_to(tmp_path / "elsewhere.md")
        assert main(["analyze", str(folder)]) == 1
        assert capsys.readouterr().err == (
            f"pathdiv: {folder} holds the symbolic link {folder}/report.md; pathdiv follows no "
            "link in a results folder: remove it, then analyse again\n")
        assert not (tmp_path / "elsewhere.md").exists()


def test_results_are_readable_by_others_not_0600(tmp_path):
    folder = runner.prepare_folder(CFG, tmp_path / "out")
    mode = stat.S_IMODE((folder / "config.yaml").stat().st_mode)
    assert mode & 0o044 == 0o044, oct(mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chown to another user)")
def test_hand_over_gives_the_folder_to_the_sudo_user_without_following_links(
        tmp_path, monkeypatch):
    folder = runner.prepare_folder(CFG, tmp_path / "out")
    (folder / "runs" / "r1").mkdir(parents=True)
    (folder / "runs" / "r1" / "manifest.json").write_text("{}")
    outside = tmp_path / "outside"
    outside.write_text("root's")
    (folder / "runs" / "r1" / "link").symlink_to(outside)
    monkeypatch.setenv("SUDO_UID", "4321")
    monkeypatch.setenv("SUDO_GID", "4322")
    assert hand_over(folder) == 7  # folder, marker, config, runs, r1, manifest, link
    for path in [folder, folder / "config.yaml", folder / "runs" / "r1" / "manifest.json",
                 folder / "runs" / "r1" / "link"]:
        info = path.lstat()
        assert (info.st_uid, info.st_gid) == (4321, 4322), path
    assert outside.stat().st_uid == 0


def test_a_bomb_in_a_results_folders_config_is_refused_not_expanded(tmp_path):
    from tests.hostile_configs import LAUGHS

    folder = runner.prepare_folder(CFG, tmp_path / "out")
    (folder / "config.yaml").write_text(LAUGHS)  # what a guest could write there
    said = refused(folder)
    assert said.startswith(f"{folder}/config.yaml cannot be read (line ")
    assert "an alias bomb?" in said
