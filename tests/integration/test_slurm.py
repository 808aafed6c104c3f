"""`pathdiv slurm` against a real Slurm: a one-node cluster started here, torn down after.

The fixture writes a munge key and a slurm.conf into a temporary folder, starts munged,
slurmctld and slurmd on this machine (ports chosen free, state and logs in the folder,
SLURM_CONF pointing at it), and stops them after the test. The test submits the job
array of a two-run plan (two shards) and the analysis job that depends on it, waits for
both, and checks the results folder and the report.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.root, pytest.mark.slow]
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "sinfo", "scontrol", "scancel")
PARTITION = "pathdiv"


def slurm_missing() -> str | None:
    missing = [t for t in (*DAEMONS, *CLIENTS) if shutil.which(t) is None]
    if missing:
        return (f"Slurm not installed ({', '.join(missing)} missing): apt-get install "
                "slurm-wlm (scripts/install-deps.sh)")
    if os.geteuid() != 0:
        return "needs root (slurmd runs the jobs, the emulation needs network namespaces)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return 2048


def slurm_conf(d: Path, node: str, cpus: int, mem_mb: int) -> str:
    return "\n".join([
        "ClusterName=pathdivtest",
        f"SlurmctldHost={node}(127.0.0.1)",
        f"SlurmctldPort={free_port()}",
        f"SlurmdPort={free_port()}",
        "AuthType=auth/munge",
        f"AuthInfo=socket={d / 'munge.sock'}",
        "CredType=cred/munge",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={d / 'state'}",
        f"SlurmdSpoolDir={d / 'spool'}",
        f"SlurmctldPidFile={d / 'slurmctld.pid'}",
        f"SlurmdPidFile={d / 'slurmd.pid'}",
        f"SlurmctldLogFile={d / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={d / 'log' / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "JobCompType=jobcomp/none",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "MpiDefault=none",
        "ReturnToService=2",
        "MinJobAge=600",
        "KillWait=10",
        f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem_mb} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def wait_for(what: str, check, timeout_s: float, step_s: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step_s)
    return False


@dataclass
class LocalSlurm:
    folder: Path
    env: dict[str, str]

    def run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True,
                              timeout=timeout, cwd=REPO)

    def job_state(self, job_id: str) -> list[str]:
        shown = self.run("scontrol", "show", "job", job_id).stdout
        return re.findall(r"JobState=(\S+)", shown)

    def logs(self) -> str:
        return "\n".join(f"== {p.name}\n{p.read_text()[-1500:]}"
                         for p in sorted((self.folder / "log").glob("*")))


@pytest.fixture(scope="module")
def local_slurm(tmp_path_factory) -> Iterator[LocalSlurm]:
    reason = slurm_missing()
    if reason:
        pytest.skip(reason)
    d = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool", "log"):
        (d / sub).mkdir()
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    node = socket.gethostname().split(".")[0]
    conf = d / "slurm.conf"
    conf.write_text(slurm_conf(d, node, os.cpu_count() or 1, max(1024, memory_mb() - 1024)))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    procs: list[subprocess.Popen[bytes]] = []
    cluster = LocalSlurm(d, env)

    def start(name: str, argv: list[str]) -> None:
        log = (d / "log" / f"{name}.out").open("wb")
        procs.append(subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT))

    try:
        start("munged", ["munged", "--foreground", "--force", f"--key-file={key}",
                         f"--socket={d / 'munge.sock'}", f"--pid-file={d / 'munged.pid'}",
                         f"--seed-file={d / 'munge.seed'}",
                         f"--log-file={d / 'log' / 'munged.log'}"])
        if not wait_for("munge socket", (d / "munge.sock").exists, 15):
            pytest.skip(f"munged did not start: {cluster.logs()[-300:]}")
        start("slurmctld", ["slurmctld", "-D", "-i", "-f", str(conf)])
        start("slurmd", ["slurmd", "-D", "-f", str(conf)])
        if not wait_for("idle node", lambda: cluster.run("sinfo", "-h", "-o", "%T")
                        .stdout.strip() == "idle", 60):
            pytest.skip(f"Slurm did not start here: {cluster.logs()[-600:]}")
        yield cluster
    finally:
        if procs:
            cluster.run("scancel", "--user", "root")
            wait_for("empty queue", lambda: not cluster.run("squeue", "-h").stdout.strip(), 60)
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_job_array_of_a_small_plan_and_the_analysis_after_it(local_slurm, tmp_path):
    out = tmp_path / "class-quick"
    submitted = subprocess.run(
        [sys.executable, "-m", "pathdiv.experiments.cli", "slurm",
         str(REPO / "configs/class-quick.yaml"),
         "--out", str(out), "--shards", "2", "--quick", "--only", "switching=ecmp-tcp",
         "--set", "workload.requests=1", "--set", "dataplane=nftables", "--mem", "1G",
         "--partition", PARTITION],
        env=local_slurm.env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    found = re.search(r"submitted job array (\d+) \(2 task\(s\)\) and analysis job (\d+)",
                      submitted.stdout)
    assert found, submitted.stdout
    array_id, analysis_id = found.groups()
    queue = ["squeue", "-h", "-j", f"{array_id},{analysis_id}"]
    assert wait_for("jobs done", lambda: not local_slurm.run(*queue).stdout.strip(), 900,
                    step_s=3), local_slurm.logs()
    assert local_slurm.job_state(array_id) == ["COMPLETED", "COMPLETED"], local_slurm.logs()
    assert local_slurm.job_state(analysis_id) == ["COMPLETED"], local_slurm.logs()

    logs = {p.name: p.read_text() for p in (out / "slurm").glob("*.out")}
    assert sorted(logs) == [f"analyze.{analysis_id}.out", f"shard-0.{array_id}.out",
                            f"shard-1.{array_id}.out"]
    for i in range(2):
        assert f"shard {i}/2 finished; a shard does not analyse" in \
            logs[f"shard-{i}.{array_id}.out"]
    assert f"report: {out / 'report.html'}" in logs[f"analyze.{analysis_id}.out"]
    assert "2 run(s) in 2 shards: 2 complete" in logs[f"analyze.{analysis_id}.out"]
    statuses = {json.loads(m.read_text())["status"]
                for m in (out / "runs").glob("*/manifest.json")}
    assert statuses == {"complete"} and len(list((out / "runs").iterdir())) == 2
    assert (out / "metrics.csv").is_file() and (out / "report.html").is_file()
    plan = json.loads((out / "plan.json").read_text())
    assert sorted(e["shard"] for e in plan["runs"]) == [0, 1]
    assert {e["status"] for e in plan["runs"]} == {"complete"}
