"""Batch scripts made from hostile names and paths: sbatch sees exactly the intended
directives, the node's shell exactly the intended command, or the value is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pathdiv.experiments.cluster import slurm

# a "pathdiv" that prints the words it was started with, one JSON list
ECHO = [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))"]
HOSTILE_CONFIG = Path("/data/my configs/$(touch pwned) `id`; 'q' \"x\" *.yaml")
HOSTILE_ARGS = ["--set", "name=a b; rm -rf /", "--only", "f=$(reboot)", "--set",
                "workload.sizes='~/x y.cdf'"]


def job(**kw) -> slurm.SlurmJob:
    base = dict(name="study-1", command=ECHO, config=HOSTILE_CONFIG, out=Path("/shared/out"),
                shards=3, plan_args=HOSTILE_ARGS, partition="emu", time_limit="2:00:00",
                mem="6G", cpus=2, workdir=Path("/shared/work"))
    return slurm.SlurmJob(**{**base, **kw})


def sbatch_directives(script: str) -> list[str]:
    """What sbatch reads as options: #SBATCH lines before the first command line."""
    out = []
    for line in script.splitlines()[1:]:
        if line.strip() and not line.startswith("#"):
            break
        if line.startswith("#SBATCH"):
            out.append(line)
    return out


def shell_words(script: str, tmp_path: Path) -> list[str]:
    """The words the node's bash hands to pathdiv, by running the script with ECHO."""
    path = tmp_path / "job.sh"
    path.write_text(script)
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "3"}
    done = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, check=True)
    assert not (tmp_path / "pwned").exists()
    return json.loads(done.stdout.splitlines()[-1])


def test_sbatch_sees_exactly_the_intended_directives():
    assert sbatch_directives(slurm.array_script(job())) == [
        "#SBATCH --job-name=pathdiv-study-1", "#SBATCH --array=0-2",
        "#SBATCH --output=/shared/out/slurm/shard-%a.%A.out", "#SBATCH --cpus-per-task=2",
        "#SBATCH --mem=6G", "#SBATCH --partition=emu", "#SBATCH --time=2:00:00",
        "#SBATCH --chdir=/shared/work", "#SBATCH --nodes=1", "#SBATCH --exclusive"]


def test_the_shell_passes_hostile_paths_and_options_as_single_words(tmp_path):
    words = shell_words(slurm.array_script(job()), tmp_path)
    assert words == ["run", str(HOSTILE_CONFIG), "--out", "/shared/out", *HOSTILE_ARGS,
                     "--quiet", "--shard", "1/3"]
    analysis = slurm.analysis_script(job())
    assert sbatch_directives(analysis)[0] == "#SBATCH --job-name=pathdiv-study-1-analyze"
    assert shell_words(analysis, tmp_path) == ["analyze", "/shared/out"]


@pytest.mark.parametrize("field, value, said", [
    ("name", "x\nrm -rf /", "the experiment name 'x\\nrm -rf /' cannot go on an #SBATCH"),
    ("name", "a b", "the experiment name 'a b' cannot go on an #SBATCH line"),
    ("out", Path("/shared/my results"), "--out '/shared/my results' cannot go on an #SBATCH"),
    ("out", Path("/shared/x\n#SBATCH --uid=0"), "--out '/shared/x\\n#SBATCH --uid=0'"),
    ("partition", "emu --uid=0", "--partition 'emu --uid=0' cannot go on an #SBATCH line"),
    ("time_limit", "1:00\necho", "--time '1:00\\necho' cannot go on an #SBATCH line"),
    ("mem", "6G;id", "--mem '6G;id' cannot go on an #SBATCH line"),
    ("workdir", Path("/w/$(id)"), "the working folder '/w/$(id)' cannot go on an #SBATCH"),
    ("config", Path("/c/x\nreboot.yaml"), "'/c/x\\nreboot.yaml' holds a control character"),
    ("plan_args", ["--set", "name=x\rboot"], "'name=x\\rboot' holds a control character"),
])
def test_a_value_that_would_change_the_script_is_refused(field, value, said):
    for make in (slurm.array_script, slurm.analysis_script):
        with pytest.raises(slurm.SlurmError) as err:
            make(job(**{field: value}))
        assert str(err.value).startswith(said), str(err.value)
