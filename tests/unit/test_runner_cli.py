"""`pathdiv run` where no network is needed: lab-kernel runs skipped, bad options refused."""

import json

import pytest

from pathdiv.experiments import runner
from pathdiv.experiments.cli import main
from pathdiv.experiments.execute import boot
from tests.conftest import REPO


@pytest.fixture
def no_lab_kernel(monkeypatch):
    def unavailable(log):
        raise boot.LabKernelUnavailable("/usr/src/linux-source-6.12.tar.xz is missing")

    monkeypatch.setattr(runner, "lab_kernel_image", unavailable)


def test_lab_kernel_runs_are_skipped_with_the_reason_and_nothing_is_analysed(
        tmp_path, capsys, no_lab_kernel):
    out = tmp_path / "silent"
    rc = main(["run", str(REPO / "configs/silent.yaml"), "--quick", "--out", str(out),
               "--quiet"])
    assert rc == 1
    captured = capsys.readouterr()
    assert "14 run(s): 14 skipped" in captured.out  # 2 flow types x (5 + 2 rb) cells
    assert "no complete run to analyse" in captured.err
    plan = json.loads((out / "plan.json").read_text())
    assert len(plan["runs"]) == (5 + 2) * 2
    assert {(e["status"], e["host_kernel"], e["reason"]) for e in plan["runs"]} == \
        {("skipped", "lab", runner.lab_skip_reason("/usr/src/linux-source-6.12.tar.xz is missing"))}
    manifest = json.loads(next((out / "runs").glob("*/manifest.json")).read_text())
    assert manifest["status"] == "skipped"
    assert manifest["config"]["hosts"]["kernel"] == "lab"  # never relabelled
    assert (out / "config.yaml").exists()


def test_resuming_with_another_config_is_refused(tmp_path, capsys, no_lab_kernel):
    out = tmp_path / "noisy"
    main(["run", str(REPO / "configs/noisy.yaml"), "--quick", "--out", str(out), "--quiet",
          "--only", "switching=ecmp-tcp"])
    rc = main(["run", str(REPO / "configs/noisy.yaml"), "--out", str(out), "--quiet"])
    assert rc == 1
    assert "holds results of a different config (differs in workload.iterations)" in \
        capsys.readouterr().err


@pytest.mark.parametrize(("args", "message"), [
    (["--reps", "0"], "--reps 0: expected an integer >= 1"),
    (["--only", "switching=warp"], "--only switching=warp: no such factor level"),
    (["--only", "switching"], "expected FACTOR=LEVEL"),
])
def test_bad_plan_options_name_the_fix(tmp_path, capsys, args, message):
    rc = main(["run", str(REPO / "configs/noisy.yaml"), "--out", str(tmp_path / "x"), *args])
    assert rc == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()  # nothing was started
