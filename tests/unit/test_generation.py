"""One analysis writes one complete generation of files (analysis/generation.py): written
aside and swapped in under a lock, so an interrupted or a concurrent analysis never
leaves files of two analyses side by side, and a link planted in the folder meanwhile is
replaced, never written through."""

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

import pathdiv.analysis.safefiles as safefiles
from pathdiv.analysis import generation
from pathdiv.analysis.generation import new_generation, verify
from pathdiv.analysis.report import analyze
from tests.conftest import REPO


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_a_generation_is_committed_whole_and_the_last_ones_leftovers_removed(tmp_path):
    (tmp_path / "config.yaml").write_text("name: x\n")
    with new_generation(tmp_path) as gen:
        gen.write_text("stats.json", "{}")
        gen.write_text("reference.json", "[]")
        gen.write_bytes("plots/a.png", b"a")
        assert not (tmp_path / "stats.json").exists()  # nothing in place before the commit
    first = generation.committed(tmp_path)
    assert first is not None and set(first["files"]) == {"stats.json", "reference.json",
                                                          "plots/a.png"}
    assert verify(tmp_path) == []
    with new_generation(tmp_path) as gen:
        gen.write_text("stats.json", '{"n": 2}')
        gen.write_bytes("plots/b.png", b"b")
    # the second generation alone: the first one's reference.json and plot are gone
    assert _files(tmp_path) == {"config.yaml", "stats.json", "plots/b.png",
                                generation.RECORD, generation.LOCK}
    assert verify(tmp_path) == []
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".analysis-")]


def test_an_analysis_that_fails_leaves_the_previous_generation_as_it_was(tmp_path):
    with new_generation(tmp_path) as gen:
        gen.write_text("stats.json", "old")
    with pytest.raises(RuntimeError), new_generation(tmp_path) as gen:
        gen.write_text("stats.json", "new")
        gen.write_text("report.md", "new")
        raise RuntimeError("the statistics failed")
    assert (tmp_path / "stats.json").read_text() == "old"
    assert not (tmp_path / "report.md").exists()
    assert verify(tmp_path) == []


def test_a_commit_cut_short_is_finished_by_the_next_analysis(tmp_path, monkeypatch):
    with new_generation(tmp_path) as gen:
        for name in ("a", "b", "c"):
            gen.write_text(f"{name}.txt", "old")
    real, moved = os.replace, []

    def killed_after_two(src, dst, **kw):  # the journal, one file, then SIGKILL
        if len(moved) == 2:
            raise SystemExit("killed")
        moved.append(src)
        return real(src, dst, **kw)

    with pytest.raises(SystemExit), new_generation(tmp_path) as gen:
        for name in ("a", "b", "c"):
            gen.write_text(f"{name}.txt", "new")
        monkeypatch.setattr(generation.os, "replace", killed_after_two)  # the commit's
    monkeypatch.setattr(generation.os, "replace", real)
    assert generation.interrupted_commit(tmp_path)
    assert [(tmp_path / f"{n}.txt").read_text() for n in "abc"] == ["new", "old", "old"]
    assert verify(tmp_path)  # the mix is seen, not hidden
    assert generation.finish(tmp_path)
    assert [(tmp_path / f"{n}.txt").read_text() for n in "abc"] == ["new", "new", "new"]
    assert verify(tmp_path) == [] and not generation.interrupted_commit(tmp_path)


def test_a_link_planted_during_the_analysis_is_replaced_not_written_through(tmp_path):
    """The folder's owner links report.html to a root-owned file, and plots/ to a
    root-owned folder, while the analysis runs: neither is written."""
    victim = tmp_path / "root-owned"
    victim.mkdir()
    (victim / "shadow").write_text("keep")
    folder = tmp_path / "results"
    folder.mkdir()
    with new_generation(folder) as gen:
        gen.write_text("report.html", "new")
        (folder / "report.html").symlink_to(victim / "shadow")
    assert (victim / "shadow").read_text() == "keep"
    assert not (folder / "report.html").is_symlink()
    (folder / "plots").symlink_to(victim)
    with pytest.raises(generation.GenerationError, match="nothing was changed"), \
            new_generation(folder) as gen:
        gen.write_bytes("plots/box.png", b"png")
    assert sorted(p.name for p in victim.iterdir()) == ["shadow"]
    assert (folder / "report.html").read_text() == "new" and verify(folder) == []


def test_write_report_writes_no_plot_through_a_link_planted_while_it_runs(
        tmp_path, monkeypatch):
    """The attack on `pathdiv analyze` itself: while it computes, plots/box_fct_s.png
    becomes a link to a root-owned file (Path.write_bytes used to follow it)."""
    folder = tmp_path / "noisy"
    shutil.copytree(REPO / "docs" / "reproduction" / "noisy-instants", folder)
    victim = tmp_path / "root-owned.conf"
    victim.write_text("keep")
    (folder / "plots").mkdir()
    real = analyze.make_plots

    def plant_then_plot(*args, **kwargs):
        (folder / "plots" / "box_fct_s.png").symlink_to(victim)
        return real(*args, **kwargs)

    monkeypatch.setattr(analyze, "make_plots", plant_then_plot)
    analyze.write_report(folder, stats_only=True)
    assert victim.read_text() == "keep"
    assert not (folder / "plots" / "box_fct_s.png").is_symlink()
    assert verify(folder) == []


def test_a_second_analysis_waits_for_the_first(tmp_path):
    code = ("import sys, pathlib\nfrom pathdiv.analysis.generation import new_generation\n"
            "with new_generation(pathlib.Path(sys.argv[1])) as gen:\n"
            "    pathlib.Path(sys.argv[2]).write_text('in')\n"
            "    gen.write_text('stats.json', 'second')\n")
    entered = tmp_path / "entered"
    folder = tmp_path / "results"
    folder.mkdir()
    with new_generation(folder) as gen:
        gen.write_text("stats.json", "first")
        other = subprocess.Popen([sys.executable, "-c", code, str(folder), str(entered)])
        time.sleep(1.5)
        assert not entered.exists()  # held at the lock
    other.wait(timeout=60)
    assert entered.exists() and (folder / "stats.json").read_text() == "second"


def test_an_interrupted_analyze_leaves_one_complete_generation(tmp_path):
    """`pathdiv analyze` killed (SIGKILL: nothing of it runs after) while it writes its
    files, then interrupted with Ctrl-C: the folder holds the last complete
    generation each time, and the next analysis cleans up and commits its own."""
    folder = tmp_path / "noisy"
    shutil.copytree(REPO / "docs" / "reproduction" / "noisy-instants", folder)
    argv = [sys.executable, "-m", "pathdiv.analysis", str(folder), "--stats-only"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    first = generation.committed(folder)
    assert first is not None and "report.html" in first["files"] and verify(folder) == []
    for sig in (signal.SIGKILL, signal.SIGINT):
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        staged: list[Path] = []
        while time.monotonic() < deadline and proc.poll() is None and not any(
                (s / "stats.json").exists() for s in staged):  # some of it written aside
            staged = [p for p in folder.iterdir() if p.name.startswith(".analysis-")]
            time.sleep(0.05)
        assert proc.poll() is None, "the analysis ended before it could be interrupted"
        proc.send_signal(sig)
        proc.wait(timeout=120)
        assert verify(folder) == [], sig
        assert generation.committed(folder) == first  # the previous one, whole
    json.loads(safefiles.read_file(folder / "stats.json", 10_000_000))
    # the killed analysis' staging folder is the next analysis' to remove
    with new_generation(folder) as gen:
        gen.write_text("stats.json", "{}")
    assert generation.committed(folder)["id"] != first["id"] and verify(folder) == []
    assert not [p for p in folder.iterdir() if p.name.startswith(".analysis-")]


def test_a_stats_only_reanalysis_keeps_the_recorded_fidelity_table(tmp_path):
    """A results folder analysed in full (fidelity.csv from the runs' manifests), then
    again with --stats-only (no manifest read): the recorded table stays, byte for byte,
    and the new generation records it; so does a compact folder (no runs/ at all)."""
    from tests.support.study_data import synthetic_metrics

    metrics = synthetic_metrics(2, repetitions=2, conditions=["noisy"], flow_types=["long"])
    metrics["fidelity"] = "ok"
    metrics.to_csv(tmp_path / "metrics.csv", index=False)
    for run in sorted(set(metrics["run_id"])):
        (tmp_path / "runs" / run).mkdir(parents=True)
        (tmp_path / "runs" / run / "manifest.json").write_text(json.dumps({
            "run_id": run, "flow_type": "long", "repetition": 1, "status": "complete",
            "clock": "real", "fidelity": {"verdict": "ok", "clock": "real",
                                          "figures": {"steal_pct": 1.5}}}))
    analyze.write_report(tmp_path)
    recorded = (tmp_path / "fidelity.csv").read_bytes()
    assert recorded.count(b"\n") == 1 + len(set(metrics["run_id"]))
    analyze.analyze_folder(tmp_path, stats_only=True)
    assert (tmp_path / "fidelity.csv").read_bytes() == recorded
    assert "fidelity.csv" in generation.committed(tmp_path)["files"]
    assert verify(tmp_path) == []
    shutil.rmtree(tmp_path / "runs")  # a compact reproduction folder
    analyze.analyze_folder(tmp_path, stats_only=True)
    assert (tmp_path / "fidelity.csv").read_bytes() == recorded


def test_a_full_reanalysis_that_cannot_measure_a_recorded_run_again_changes_nothing(
        tmp_path, monkeypatch):
    """A run of metrics.csv that this analysis neither measured nor kept (its run folder
    gone, captures that cannot be read): measuring the runs again would leave its rows
    out of metrics.csv. The analysis is refused, naming the run, and the folder keeps
    its metrics; with every run measured it goes on."""
    from tests.support.study_data import synthetic_metrics

    metrics = synthetic_metrics(2, repetitions=2, conditions=["noisy"], flow_types=["long"])
    metrics.to_csv(tmp_path / "metrics.csv", index=False)
    (tmp_path / "runs").mkdir()
    recorded = (tmp_path / "metrics.csv").read_bytes()
    gone = sorted(set(metrics["run_id"]))[0]

    def measure(folder, out, notes, keep=lambda ids: ids != gone, recorded=None):
        notes.append(f"run {gone} was not measured: CaptureFormatError: not a capture")
        path = Path(out) / "metrics.csv"
        metrics[metrics["run_id"].map(keep)].to_csv(path, index=False)
        return path

    monkeypatch.setattr(analyze, "compute_metrics", measure)
    with pytest.raises(ValueError, match=f"1 run\\(s\\) this analysis could not measure "
                                         f"again: {gone} \\(run {gone} was not measured"):
        analyze.analyze_folder(tmp_path)
    assert (tmp_path / "metrics.csv").read_bytes() == recorded
    assert not (tmp_path / "stats.json").exists()
    monkeypatch.setattr(analyze, "compute_metrics",
                        lambda folder, out, notes, recorded=None:
                        measure(folder, out, [], lambda i: True))
    analyze.analyze_folder(tmp_path)
    assert (tmp_path / "stats.json").exists()


def test_runs_whose_captures_were_deleted_keep_their_rows_beside_runs_added_later(
        tmp_path):
    """A researcher trims the captures of measured runs, then adds runs: the analysis
    measures the new ones and keeps the trimmed ones' recorded rows, saying so; rows
    from another analysis (or of no record) are refused, naming the run and the fix,
    and the folder is left as it was."""
    import pandas as pd

    from pathdiv.analysis.metrics import measured
    from tests.unit.test_metrics import run, tcp_spec

    for name, size in (("r1", 3000), ("r2", 4000)):
        run(tmp_path, [tcp_spec(size_bytes=size)], name=name)
    analyze.analyze_folder(tmp_path)
    first = pd.read_csv(tmp_path / "metrics.csv")
    assert (tmp_path / "runs" / "r1" / "timeline.csv").exists()
    shutil.rmtree(tmp_path / "runs" / "r1" / "captures")  # trimmed to save disk
    run(tmp_path, [tcp_spec(size_bytes=5000)], name="r3")  # added later
    analyze.analyze_folder(tmp_path)
    now = pd.read_csv(tmp_path / "metrics.csv")
    assert sorted(now["run_id"]) == ["r1", "r2", "r3"]
    kept = now[now["run_id"] == "r1"].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, first[first["run_id"] == "r1"]
                                  .reset_index(drop=True)[kept.columns])
    assert sorted(pd.read_csv(tmp_path / "transfer_metrics.csv")["run_id"]) == [
        "r1", "r2", "r3"]
    assert (tmp_path / "runs" / "r1" / "timeline.csv").exists()  # kept with its rows
    assert "r1" in json.loads((tmp_path / "measured.json").read_text())["runs"]
    said = "kept as measured before its captures were deleted"
    assert said in (tmp_path / "report.md").read_text()
    assert any(said in n for n in json.loads((tmp_path / "stats.json").read_text())["notes"])
    assert verify(tmp_path) == []

    record = json.loads((tmp_path / "measured.json").read_text())
    record["runs"]["r1"]["analysis"] = "0" * 64  # measured by another pathdiv
    (tmp_path / "measured.json").write_text(json.dumps(record))
    before = (tmp_path / "metrics.csv").read_bytes()
    with pytest.raises(ValueError, match=r"rows of run r1, whose captures are gone, .*"
                                         r"another analysis .*Restore .*r1/captures"):
        analyze.analyze_folder(tmp_path)
    assert (tmp_path / "metrics.csv").read_bytes() == before
    (tmp_path / measured.MEASURED_FILE).unlink()  # measured before pathdiv recorded it
    with pytest.raises(ValueError, match=r"run r1.*no record of the analysis"):
        analyze.analyze_folder(tmp_path)
    assert (tmp_path / "metrics.csv").read_bytes() == before
