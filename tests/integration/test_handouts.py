"""Every command of the lab handouts (docs/classroom/NN-*.md) runs, so the labs never rot.

A handout's fenced `sh` blocks are run line by line from the repository root
(a page that sets a data plane whose tools are not installed is skipped, naming them)
(`pathdiv ...` through this checkout's CLI, other lines with bash, `results/` moved to
a temporary folder); `pathdiv net CONFIG` is not run alone: the fenced `mininet` blocks
that follow it are fed to it on stdin, as one session. A block fenced as
`sh no-test: REASON` is not run; it is reported as a skip naming the reason.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, dataplane_class

LABS = REPO / "docs/classroom"
HANDOUTS = sorted(LABS.glob("[0-9][0-9]-*.md"))
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)
PATHDIV = [sys.executable, "-m", "pathdiv.experiments.cli"]
LAB_COMMANDS = {"paths", "counters", "mode", "flow", "p4", "exit", "help", "pingall",
                "nodes", "links", "net", "dump"}


@dataclass
class Step:
    kind: str  # sh | net | skip
    command: str
    stdin: str = ""
    reason: str = ""


def steps(text: str) -> list[Step]:
    out: list[Step] = []
    net: Step | None = None
    for info, body in FENCE.findall(text):
        lang, _, rest = info.strip().partition(" ")
        if lang == "sh" and rest.startswith("no-test:"):
            out.append(Step("skip", body.strip(), reason=rest.removeprefix("no-test:").strip()))
        elif lang == "sh":
            for line in body.splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                if line.startswith("pathdiv net "):
                    net = Step("net", line)
                    out.append(net)
                else:
                    out.append(Step("sh", line))
        elif lang == "mininet":
            if net is None:
                raise ValueError(f"a mininet block comes before any `pathdiv net`: {body!r}")
            net.stdin += body
    return out


def ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


# ---- the handouts' shape (no root) ------------------------------------------------
def test_there_are_six_handouts_each_with_an_answer_key_and_a_config() -> None:
    assert [p.name[:2] for p in HANDOUTS] == ["01", "02", "03", "04", "05", "06"]
    for page in HANDOUTS:
        assert (LABS / "answers" / page.name).is_file(), f"no answer key for {page.name}"
        configs = set(re.findall(r"configs/class-[a-z]+\.yaml", page.read_text()))
        assert configs and all((REPO / c).is_file() for c in configs), page.name


@pytest.mark.parametrize("page", HANDOUTS, ids=ids(HANDOUTS))
def test_handout_states_goal_commands_observations_and_questions(page: Path) -> None:
    text = page.read_text()
    for heading in ("**Goal.**", "## What to observe", "## Questions"):
        assert heading in text, f"{page.name} lacks {heading}"
    questions = re.findall(r"^\d+\. ", text.split("## Questions")[1], re.M)
    answers = re.findall(r"^\d+\. ", (LABS / "answers" / page.name).read_text(), re.M)
    assert len(questions) == len(answers) >= 3, page.name
    runnable = [s for s in steps(text) if s.kind != "skip"]
    assert runnable, f"{page.name} shows no command the test can run"
    for step in runnable:
        for line in step.stdin.splitlines():
            word = line.split()[0] if line.split() else ""
            assert word in LAB_COMMANDS or re.fullmatch(r"h\d+", word), \
                f"{page.name}: {line!r} is neither a lab CLI command nor a host command"


# ---- running them (root) ------------------------------------------------------------
def run_step(step: Step, results: Path) -> subprocess.CompletedProcess[str]:
    command = step.command.replace("results/", f"{results}/")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    if step.kind == "net":
        stdin = step.stdin if step.stdin.rstrip().endswith("exit") else step.stdin + "exit\n"
        argv = [*PATHDIV, *shlex.split(command)[1:]]
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, cwd=REPO,
                              env=env, timeout=300)
    if command.startswith("pathdiv "):
        return subprocess.run([*PATHDIV, *shlex.split(command)[1:]], capture_output=True,
                              text=True, cwd=REPO, env=env, timeout=300)
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=300)


@pytest.mark.root
@pytest.mark.parametrize("page", HANDOUTS, ids=ids(HANDOUTS))
def test_every_handout_command_runs(page: Path, root_fabric: None, tmp_path: Path) -> None:
    for plane in sorted(set(re.findall(r"--set dataplane=([a-z0-9-]+)", page.read_text()))):
        dataplane_class(plane)  # a page on bmv2 skips, naming what is missing, without it
    for step in steps(page.read_text()):
        if step.kind == "skip":
            continue
        proc = run_step(step, tmp_path / "results")
        where = f"{page.name}: `{step.command}`"
        assert proc.returncode == 0, f"{where} exited {proc.returncode}: {proc.stderr[-1500:]}"
        assert proc.stdout.strip(), f"{where} printed nothing"
        if step.kind == "net":
            errors = [ln for ln in proc.stdout.splitlines() if "error: " in ln]
            assert not errors, f"{where}: {errors}"
            assert "*** Unknown command" not in proc.stderr, f"{where}: {proc.stderr[-800:]}"
            flows = sum(1 for ln in step.stdin.splitlines() if ln.startswith("flow "))
            assert proc.stdout.count("goodput") == flows, f"{where}: {proc.stdout[-1500:]}"


UNTESTED = [(p, s) for p in HANDOUTS for s in steps(p.read_text()) if s.kind == "skip"]


@pytest.mark.parametrize(("page", "step"), UNTESTED, ids=[p.stem for p, _ in UNTESTED])
def test_blocks_not_run_say_why(page: Path, step: Step) -> None:
    assert len(step.reason) > 20, f"{page.name}: a no-test block must say why"
    pytest.skip(f"{page.name}: not run ({step.command.splitlines()[-1]}): {step.reason}")
