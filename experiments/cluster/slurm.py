"""A plan as a Slurm job array plus an analysis job that waits for it.

`pathdiv slurm CONFIG --out DIR --shards N` writes two batch scripts into DIR/slurm/:

  array.sbatch    --array=0-(N-1); task I runs
                  `pathdiv run CONFIG --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT
                  --out DIR` (one shard, resumable, no analysis)
  analyze.sbatch  `pathdiv analyze DIR`, submitted with --dependency=afterok:<array id>,
                  so it starts once every task exited 0 (every run of every shard
                  complete or skipped)

and submits both with `sbatch --parsable` (not with --dry-run).

What a task needs (written into array.sbatch too): 2 cores, the memory of one
emulation (`task_mem`: at least 6G, and for lab-kernel runs the lab kernel's
lab.memory_mb, auto sized for the plan's largest network, its jail and the host's
share), a whole
node (`--exclusive`: two emulations on one node disturb each other's timing) and root,
or CAP_NET_ADMIN + CAP_SYS_ADMIN, for the network namespaces. DIR must be on a file
system every node mounts at the same path.

Script text is pure (`array_script`, `analysis_script`); `submit` runs sbatch.

Every value is quoted or refused (`check_job`): a value on an `#SBATCH` line (job
name, output and working folders, partition, time, memory) must consist of characters
neither sbatch nor a shell treats specially (SBATCH_SAFE), since a space, quote or
newline there would end the option or the header (sbatch reads directives only up to
the first command line); the command lines quote every word with `shlex`; no value may
hold a control character (a newline in a comment would start a command).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pathdiv.experiments.manifest import write_text_atomic
from pathdiv.experiments.plan.memory import HOST_RESERVE_MB, JAIL_EXTRA_MB, boot_mb
from pathdiv.experiments.plan.runs import Run

SCRIPT_DIR = "slurm"
TASK_CPUS = 2
TASK_MEM = "6G"  # at least: a k=4 lab kernel of 1.5 GiB, its jail and the host; host runs ~1 GiB
TASK_MEM_MB = 6144


def task_mem(runs: list[Run]) -> str:
    """The memory one task of the plan `runs` asks for (--mem): TASK_MEM, or what its
    lab kernel (plan/memory.py), the jail and the host's share take when that is more."""
    lab = [r for r in runs if r.config.host_kernel == "lab"]
    mb = boot_mb(lab, runs) + JAIL_EXTRA_MB + HOST_RESERVE_MB if lab else 0
    return TASK_MEM if mb <= TASK_MEM_MB else f"{mb}M"


SBATCH_SAFE = re.compile(r"^[A-Za-z0-9_./+@:=,-]{1,1000}$")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class SlurmError(RuntimeError):
    """sbatch refused a script or is missing (the message carries its words)."""


def check_job(job: SlurmJob) -> None:
    """Refuse a value that could change what sbatch or the node's shell reads."""
    header = {"the experiment name": job.name, "--out": str(job.out),
              "--partition": job.partition, "--time": job.time_limit, "--mem": job.mem,
              "the working folder": str(job.workdir) if job.workdir else None}
    for what, value in header.items():
        if value is not None and not SBATCH_SAFE.fullmatch(value):
            raise SlurmError(f"{what} {value[:60]!r} cannot go on an #SBATCH line: use only "
                             "letters, digits and _ . / + @ : = , - (no spaces, quotes or "
                             "newlines)")
    words = [*job.command, str(job.config), *job.plan_args]
    for word in words:
        if CONTROL.search(word):
            raise SlurmError(f"{word[:60]!r} holds a control character (a newline?); it "
                             "cannot go into a batch script")
    if job.cpus < 1 or job.shards < 1:
        raise SlurmError(f"cpus ({job.cpus}) and shards ({job.shards}) must be >= 1")


@dataclass(frozen=True)
class SlurmJob:
    name: str
    command: list[str]  # how a node starts pathdiv, e.g. ['/opt/pathdiv/.venv/bin/pathdiv']
    config: Path
    out: Path
    shards: int
    plan_args: list[str] = field(default_factory=list)  # --set/--reps/--only/--quick
    partition: str | None = None
    time_limit: str | None = None
    mem: str = TASK_MEM
    cpus: int = TASK_CPUS
    exclusive: bool = True
    workdir: Path | None = None


def _header(job: SlurmJob, name: str, output: str, cpus: int, mem: str) -> list[str]:
    lines = ["#!/bin/bash", f"#SBATCH --job-name={name}", f"#SBATCH --output={output}",
             f"#SBATCH --cpus-per-task={cpus}", f"#SBATCH --mem={mem}"]
    if job.partition:
        lines.append(f"#SBATCH --partition={job.partition}")
    if job.time_limit:
        lines.append(f"#SBATCH --time={job.time_limit}")
    if job.workdir:
        lines.append(f"#SBATCH --chdir={job.workdir}")
    return lines


def array_script(job: SlurmJob) -> str:
    """The job array: task I executes shard I of N of the plan into the shared folder."""
    check_job(job)
    out = job.out / SCRIPT_DIR
    lines = _header(job, f"pathdiv-{job.name}", f"{out}/shard-%a.%A.out", job.cpus, job.mem)
    lines.insert(2, f"#SBATCH --array=0-{job.shards - 1}")
    lines.append("#SBATCH --nodes=1")
    if job.exclusive:
        lines.append("#SBATCH --exclusive")
    run = shlex.join([*job.command, "run", str(job.config), "--out", str(job.out),
                      *job.plan_args, "--quiet"])
    lines += [
        "#",
        f"# pathdiv: shard $SLURM_ARRAY_TASK_ID of {job.shards} of the plan of "
        f"{shlex.quote(str(job.config))}.",
        f"# A task needs {job.cpus} cores, {job.mem} of memory, a node of its own (two",
        "# emulations on one node disturb each other's timing), and root (or CAP_NET_ADMIN",
        "# + CAP_SYS_ADMIN) for the network namespaces of the emulation. Runs with",
        "# hosts.kernel: lab boot the lab kernel (User-Mode Linux): build it once into a",
        "# PATHDIV_CACHE every node shares (`make kernel`) before submitting.",
        f"# {job.out} must be on a file system every node mounts at the same path.",
        "# Resubmitting resumes: complete runs are skipped.",
        "set -euo pipefail",
        f'exec {run} --shard "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT"',
        "",
    ]
    return "\n".join(lines)


def analysis_script(job: SlurmJob) -> str:
    """The analysis job: metrics, statistics and report once every shard is done."""
    check_job(job)
    out = job.out / SCRIPT_DIR
    lines = _header(job, f"pathdiv-{job.name}-analyze", f"{out}/analyze.%j.out", 1, job.mem)
    analyze = shlex.join([*job.command, "analyze", str(job.out)])
    lines += [
        "#",
        "# pathdiv: submitted with --dependency=afterok:<array job>, so it starts once",
        "# every shard exited 0 (and with --kill-on-invalid-dep=yes, so a failed shard ends it",
        "# instead of leaving it pending). Needs no root.",
        "set -euo pipefail",
        f"{shlex.join([*job.command, 'status', str(job.out)])}",
        f"exec {analyze}",
        "",
    ]
    return "\n".join(lines)


def write_scripts(job: SlurmJob) -> tuple[Path, Path]:

    folder = job.out / SCRIPT_DIR
    array, analysis = folder / "array.sbatch", folder / "analyze.sbatch"
    write_text_atomic(array, array_script(job))
    write_text_atomic(analysis, analysis_script(job))
    array.chmod(0o755)
    analysis.chmod(0o755)
    return array, analysis


def parse_job_id(stdout: str) -> str:
    """`sbatch --parsable` prints 'JOBID' or 'JOBID;CLUSTER'."""
    job_id = stdout.strip().splitlines()[-1].split(";")[0].strip() if stdout.strip() else ""
    if not job_id.isdigit():
        raise SlurmError(f"sbatch printed {stdout.strip()!r}, not a job id")
    return job_id


def sbatch_argv(script: Path, after: str | None = None) -> list[str]:
    argv = ["sbatch", "--parsable"]
    if after:
        # a failed shard makes afterok unsatisfiable: end the analysis job instead of
        # leaving it pending for ever (resubmit once the shard is fixed)
        argv += [f"--dependency=afterok:{after}", "--kill-on-invalid-dep=yes"]
    return [*argv, str(script)]


def submit(array: Path, analysis: Path,
           run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run
           ) -> tuple[str, str]:
    """Submit the array, then the analysis job depending on it: (array id, analysis id)."""
    ids: list[str] = []
    for script in (array, analysis):
        argv = sbatch_argv(script, ids[0] if ids else None)
        try:
            done = run(argv, capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise SlurmError("sbatch is not installed here; submit from a Slurm login node, "
                             f"or run `sbatch {script}` there (--dry-run wrote it)") from None
        if done.returncode != 0:
            raise SlurmError(f"{shlex.join(argv)} failed (exit {done.returncode}): "
                             f"{done.stderr.strip()[-500:]}")
        ids.append(parse_job_id(done.stdout))
    return ids[0], ids[1]
