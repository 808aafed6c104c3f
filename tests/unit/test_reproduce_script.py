"""scripts/reproduce.sh with SHARDS=N: N `pathdiv run --shard` at once, then one analysis;
Ctrl-C stops every shard (resumable), a failed shard fails the script, a bad SHARDS is
refused before anything starts.

The script runs from a copy of the repository's scripts/ with PYTHON pointing at a
stand-in for `python -m pathdiv.experiments.cli` that records what it was asked and
sleeps like a run: this checks the script's orchestration, not the runs.
"""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "reproduce.sh"

FAKE_CLI = r"""#!/bin/bash
# stand-in for python: `-m pathdiv.experiments.cli CMD ...` and the script's one-liners
log=$FAKE_LOG
if [[ "$1" == -m && "$2" == pathdiv.experiments.cli ]]; then
    cmd=$3; shift 3
    echo "$cmd $*" >> "$log"
    case $cmd in
        run)
            # as pathdiv does: a non-empty --out folder without the marker is refused
            out=""; prev=""
            for a in "$@"; do [[ "$prev" == --out ]] && out=$a; prev=$a; done
            if [[ -n "$(ls -A "$out" 2>/dev/null)" && ! -e "$out/.pathdiv-results" ]]; then
                echo "refused $*" >> "$log"; exit 2
            fi
            trap 'echo "stopped $*" >> "$log"; exit 130' TERM
            for _ in $(seq "$FAKE_RUN_S"); do sleep 0.2; done
            if [[ -n "$FAKE_FAIL" && "$*" == *"--shard 1/"* ]]; then exit 1; fi
            echo "finished $*" >> "$log"
            if [[ "$*" != *--shard* ]]; then  # one process: it analyses the folder too
                out=$(sed -E 's/.*--out ([^ ]+).*/\1/' <<< "$*")
                for f in metrics.csv stats.json report.md report.html config.yaml plan.json; do
                    echo x > "$out/$f"
                done
                mkdir -p "$out/plots"
            fi;;
        status) echo "folder: 60 run(s): 30 complete";;
        analyze)
            for f in metrics.csv stats.json report.md report.html config.yaml plan.json; do
                echo x > "$1/$f"
            done
            mkdir -p "$1/plots";;
    esac
    exit 0
fi
[[ "$1" == -c ]] && echo 0
exit 0
"""


def _setup(tmp_path: Path, run_s: int = 1, fail: bool = False) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "scripts" / "reproduce.sh")
    (root / "configs").mkdir()
    (root / "configs" / "noisy.yaml").write_text("name: noisy\n")
    fake = tmp_path / "python"
    fake.write_text(FAKE_CLI)
    fake.chmod(0o755)
    env = {**os.environ, "PYTHON": str(fake), "FAKE_LOG": str(tmp_path / "calls.log"),
           "FAKE_RUN_S": str(run_s * 5), "FAKE_FAIL": "1" if fail else "",
           "WORK": str(tmp_path / "work" / "noisy"), "SHARDS": "2"}
    return root, env


def _calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls.log"
    return path.read_text().splitlines() if path.exists() else []


def _start(root: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(["bash", str(root / "scripts" / "reproduce.sh"),
                             "configs/noisy.yaml"], cwd=root, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_shards_run_at_once_then_the_folder_is_analysed_once(tmp_path):
    root, env = _setup(tmp_path)
    done = _start(root, env)
    _, err = done.communicate(timeout=60)
    assert done.returncode == 0, err
    calls = _calls(tmp_path)
    work = env["WORK"]
    runs = [c for c in calls if c.startswith("run ")]
    assert sorted(runs) == [f"run configs/noisy.yaml --out {work} --shard 0/2 --jobs 1",
                            f"run configs/noisy.yaml --out {work} --shard 1/2 --jobs 1"]
    # both started before either finished, and the analysis came after both
    first_finish = min(i for i, c in enumerate(calls) if c.startswith("finished"))
    assert max(calls.index(r) for r in runs) < first_finish
    assert calls[-1] == f"analyze {work}"
    assert sum(c.startswith("analyze") for c in calls) == 1
    run_txt = (root / "docs" / "reproduction" / "noisy" / "run.txt").read_text()
    assert "command: SHARDS=2 scripts/reproduce.sh configs/noisy.yaml" in run_txt
    assert (Path(work) / "shard-0.log").exists() and (Path(work) / "shard-1.log").exists()


def test_ctrl_c_stops_every_shard_and_says_how_to_resume(tmp_path):
    root, env = _setup(tmp_path, run_s=60)
    proc = _start(root, env)
    deadline = time.monotonic() + 30
    while sum(c.startswith("run ") for c in _calls(tmp_path)) < 2:
        assert time.monotonic() < deadline, "the shards did not start"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "run the same command again to resume" in err
    calls = _calls(tmp_path)
    assert sum(c.startswith("stopped ") for c in calls) == 2
    assert not any(c.startswith(("finished", "analyze")) for c in calls)
    assert not (root / "docs" / "reproduction" / "noisy").exists()


def test_a_failed_shard_fails_the_script_without_analysis(tmp_path):
    root, env = _setup(tmp_path, fail=True)
    proc = _start(root, env)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "a shard did not finish every run" in err
    assert not any(c.startswith("analyze") for c in _calls(tmp_path))


def test_a_bad_shards_value_is_refused_before_anything_starts(tmp_path):
    root, env = _setup(tmp_path)
    env["SHARDS"] = "two"
    proc = _start(root, env)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "SHARDS=two: expected a whole number >= 1" in err
    assert _calls(tmp_path) == []


def test_jobs_go_to_pathdiv_run_and_a_bad_value_is_refused(tmp_path):
    root, env = _setup(tmp_path)
    env.pop("SHARDS")
    env["JOBS"] = "3"
    done = _start(root, env)
    _, err = done.communicate(timeout=60)
    assert done.returncode == 0, err
    work = env["WORK"]
    assert [c for c in _calls(tmp_path) if c.startswith("run ")] == [
        f"run configs/noisy.yaml --out {work} --jobs 3"]
    env["JOBS"] = "0"
    bad = _start(root, env)
    _, err = bad.communicate(timeout=30)
    assert bad.returncode == 2 and "JOBS=0: expected a whole number >= 1" in err


def test_status_into_a_reader_that_left_ends_quietly(tmp_path):
    """`pathdiv status DIR | head -1` (the script's progress line): no traceback when the
    reader is gone before pathdiv writes."""
    import sys
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "plan.json").write_text(
        '{"name": "noisy", "options": {}, "runs": [{"run_id": "a", "order": 0, '
        '"repetition": 1, "flow_type": "query", "factors": {}, "host_kernel": "lab", '
        '"status": "complete", "reason": ""}]}')
    read, write = os.pipe()
    os.close(read)  # the reader left: every write gets EPIPE
    proc = subprocess.run([sys.executable, "-m", "pathdiv.experiments.cli", "status",
                           str(folder)], stdout=write, stderr=subprocess.PIPE, text=True,
                          timeout=60, check=False)
    os.close(write)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
