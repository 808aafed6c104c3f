"""`pathdiv run` with hosts.kernel: lab: the runs execute in one boot of the lab kernel.

The plan mixes a run on this machine's kernel with two runs on the lab kernel (default and
rb scheduler, virtual clock), query flows only. pathdiv is killed while the lab kernel
runs (the UML must die with it, without `pathdiv clean`), then started again and, while
it runs, a second `pathdiv run` on the folder must refuse, naming the run and the pid;
then the first is interrupted (UML must stop with pathdiv and nothing may be marked
complete that is not), then resumed: every run
completes with every transfer measured, each manifest records the kernel and clock it
ran on, and the report is written. The kernel is built first when it is not cached
(about 15 minutes on an idle 2-core machine, once).
"""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pathdiv.kernels.abilities import LAB_SCHEDULERS
from pathdiv.kernels.build import kernel_release
from tests.conftest import REPO, dataplane_class, missing_packets

pytestmark = [pytest.mark.root, pytest.mark.slow]
PATHDIV = [sys.executable, "-m", "pathdiv.experiments.cli"]


@pytest.fixture
def config(tmp_path) -> Path:
    data = yaml.safe_load((REPO / "configs/class-rb.yaml").read_text())
    data["dataplane"] = "nftables"  # the subject is the lab kernel, not the plane
    data["factors"]["host"] = {
        "hostk": {"hosts.kernel": "host", "hosts.scheduler": "default"},
        "vanilla": {"hosts.kernel": "lab", "hosts.scheduler": "default"},
        "rb": {"hosts.kernel": "lab", "hosts.scheduler": "rb"},
    }
    path = tmp_path / "lab-mixed.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _argv(config: Path, out: Path) -> list[str]:
    return [*PATHDIV, "run", str(config), "--quick", "--only", "flow_type=query", "--out",
            str(out), "--quiet", "--jobs", "1"]  # one boot: the tests follow one kernel


def _vms_of(folder: Path) -> list[str]:
    """UML host processes booted for this results folder (their command line names it)."""
    out = subprocess.run(["pgrep", "-af", "rootfstype=hostfs"], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if str(folder) in line]


def _plan(out: Path) -> dict[str, dict]:
    return {e["run_id"]: e for e in json.loads((out / "plan.json").read_text())["runs"]}


def test_lab_runs_boot_once_stop_with_ctrl_c_and_record_their_kernel(root_fabric, lab_kernel,
                                                                     config, tmp_path):
    out = tmp_path / "results"
    release = kernel_release(lab_kernel)

    progress = out / ".labkernel" / "progress.json"

    def start_until_the_vm_runs() -> subprocess.Popen:
        progress.unlink(missing_ok=True)
        proc = subprocess.Popen(_argv(config, out), cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline and proc.poll() is None and not progress.exists():
            time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()
        assert progress.exists(), "the lab kernel did not start a run within 15 minutes"
        assert _vms_of(out), "no UML process runs for the results folder"
        return proc

    # SIGKILL: nothing in pathdiv can react, but the jail's parent-death signal ends UML
    killed = start_until_the_vm_runs()
    killed.kill()
    killed.communicate()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _vms_of(out):
        time.sleep(0.2)
    assert _vms_of(out) == []

    first = start_until_the_vm_runs()
    # a second pathdiv on the same folder must not delete and redo the run being written
    second = subprocess.run(_argv(config, out), cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    print(second.stderr)
    assert second.returncode == 1, second.stderr
    running = next(e["run_id"] for e in _plan(out).values() if e["host_kernel"] == "lab")
    assert f"another pathdiv is executing run(s) {running} (pid {first.pid} " in second.stderr
    assert first.poll() is None and _vms_of(out)
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 130, err
    assert _vms_of(out) == []  # UML does not outlive pathdiv
    plan = _plan(out)
    assert {e["factors"]["host"]: e["status"] for e in plan.values()}["hostk"] == "complete"
    interrupted = [e for e in plan.values() if e["host_kernel"] == "lab"
                   and e["status"] != "pending"]
    assert [e["status"] for e in interrupted] == ["failed"]
    assert "interrupted" in interrupted[0]["reason"]

    resumed = subprocess.run(_argv(config, out), cwd=REPO, capture_output=True, text=True,
                             timeout=3600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "report: " in resumed.stdout
    assert _vms_of(out) == []
    plan = _plan(out)
    assert {e["status"] for e in plan.values()} == {"complete"}
    assert len(list((out / ".labkernel").glob("*/console.log"))) == 3  # one boot per invocation

    manifests = {e["factors"]["host"]: json.loads(
        (out / "runs" / run_id / "manifest.json").read_text()) for run_id, e in plan.items()}
    host, vanilla, rb = manifests["hostk"], manifests["vanilla"], manifests["rb"]
    assert host["lab_kernel"] is None and host["clock"] == "real"
    assert host["kernel_release"] == subprocess.run(
        ["uname", "-r"], capture_output=True, text=True).stdout.strip()
    for m, scheduler in ((vanilla, "default"), (rb, "rb")):
        assert m["kernel_release"] == release and release.endswith("-pathdiv")
        assert m["lab_kernel"]["runner"] == "uml" and m["clock"] == "virtual"
        assert m["lab_kernel"]["image"] == str(lab_kernel)
        assert m["sysctls"]["net.mptcp.scheduler"] == scheduler
        assert m["sysctls"]["net.mptcp.enabled"] == "1"
        # every scheduler the patch series registers, and nothing else
        assert set(m["sysctls"]["net.mptcp.available_schedulers"].split()) == \
            set(LAB_SCHEDULERS)
        rows = list(csv.DictReader((out / "runs" / m["run_id"] / "transfers.csv").open()))
        assert len(rows) == 16 and all(r["ok"] == "True" for r in rows), rows
        assert len(list((out / "runs" / m["run_id"] / "captures").glob("*.pcap"))) == 48
        assert missing_packets(out / "runs" / m["run_id"]) == {}  # nothing lost at the stop
    # the analysis sees all three levels and found every transfer in the captures
    measured = list(csv.DictReader((out / "transfer_metrics.csv").open()))
    assert len(measured) == 3 * 16
    assert all(r["measured"] == "True" for r in measured)


def test_sigkill_mid_plan_leaves_no_uml_and_a_second_pathdiv_refuses_meanwhile(
        root_fabric, lab_kernel, tmp_path):
    """A lab-kernel-only plan (two query runs): while its first run executes in the guest,
    a second `pathdiv run` on the folder refuses, naming that run and the pid; SIGKILL of
    the first leaves no UML process a few seconds later, without `pathdiv clean`."""
    out = tmp_path / "results"
    argv = [*PATHDIV, "run", "configs/class-rb.yaml", "--quick", "--only", "flow_type=query",
            "--set", "dataplane=nftables", "--out", str(out), "--quiet", "--no-analyze",
            "--jobs", "1"]
    first = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        progress = out / ".labkernel" / "progress.json"
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and first.poll() is None and not progress.exists():
            time.sleep(0.5)
        assert first.poll() is None, first.communicate()
        assert progress.exists(), "the lab kernel did not start a run within 10 minutes"
        assert _vms_of(out)
        marked = [p.stem for p in (out / "running").glob("*.json")]
        assert len(marked) == 1
        second = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
        print(second.stderr)
        assert second.returncode == 1
        assert (f"another pathdiv is executing run(s) {marked[0]} (pid {first.pid} "
                in second.stderr)
        assert first.poll() is None and _vms_of(out)  # the second touched nothing
        first.kill()
        first.communicate()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _vms_of(out):
            time.sleep(0.2)
        assert _vms_of(out) == []
    finally:
        if first.poll() is None:
            first.kill()


@pytest.mark.parametrize("plane", ["bmv2", "p4-ebpf"])
def test_a_lab_run_on_a_p4_plane_compiles_on_the_host_and_records_it(root_fabric, lab_kernel,
                                                                     tmp_path, plane):
    """bmv2 and p4-ebpf in the lab kernel, as `pathdiv run` of the reference config starts
    them where p4lang's tools are installed: the guest reads the host's files read-only,
    so the P4 programs must have been compiled on the host before it booted."""
    dataplane_class(plane)  # skips with the reason when the plane's tools are missing
    out = tmp_path / "results"
    proc = subprocess.run(
        [*PATHDIV, "run", "configs/noisy.yaml", "--quick", "--only", "flow_type=query",
         "--only", "switching=ps-mptcp", "--only", "host=vanilla", "--reps", "1",
         "--set", f"dataplane={plane}", "--out", str(out), "--quiet"],
        cwd=REPO, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    plan = _plan(out)
    assert len(plan) == 1 and {e["status"] for e in plan.values()} == {"complete"}, plan
    run_id = next(iter(plan))
    m = json.loads((out / "runs" / run_id / "manifest.json").read_text())
    assert m["dataplane"]["dataplane"] == plane and m["dataplane"]["program"] == "spray"
    assert m["lab_kernel"]["runner"] == "uml" and m["clock"] == "virtual"
    rows = list(csv.DictReader((out / "runs" / run_id / "transfers.csv").open()))
    assert rows and all(r["ok"] == "True" for r in rows), rows
