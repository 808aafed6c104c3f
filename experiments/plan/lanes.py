"""How a plan's runs execute on one machine: phases one after another, each a set of
lanes that run at once, each lane a list of runs one after another (pure).

    phase 1   this machine's kernel: one lane (namespaces on the host, real clock)
    phase 2+  the lab kernel, one phase per clock (lab.clock) in plan order:
              virtual: up to `jobs` lanes at once (one per core by default), each
                       its boots of the lab kernel one after another (`boots`); on the
                       virtual clock a run's results do not depend on the host's load,
                       so lanes on the same machine do not disturb each other
              real:    one lane, one run at a time (the wall clock is the measurement)

`deal` spreads runs over lanes greedily, longest expected first, each to the lane with
the least expected time so far (ties: run id, then the lowest lane), so the same plan and
costs always give the same lanes; the shards of `pathdiv.experiments.cluster` use it too.

`boots` splits a lane into boots of the lab kernel: on the virtual clock a run whose
transfers are large (`own_boot`) has a boot to itself, so that nothing ran in that guest
before it, and nothing waits in the runner to run after it; the other runs of the lane
share one boot (and its network) and go first. What else a guest runs reaches a run's
packets through the guest's own history (its scheduler, the runner's process): a query
run's FCTs stay the same to the microsecond after other runs, a long incast run's, whose
losses and timeouts magnify a microsecond into seconds, do not, even when the runs only
wait their turn (docs/decisions/0008-network-reuse.md). On the virtual clock
the order of a lane's runs does not change their results, so it may be rearranged.

`jobs_problem` says why a number of lanes cannot run here: each lab kernel takes
lab.memory_mb of guest memory (plus its jail's allowance) from this machine's RAM.
"""

from __future__ import annotations

from collections.abc import Callable

from pathdiv.experiments.config.workloads import open_loop
from pathdiv.experiments.plan.memory import HOST_RESERVE_MB, JAIL_EXTRA_MB, boot_mb
from pathdiv.experiments.plan.runs import Run

MAX_JOBS = 64


def deal(runs: list[Run], count: int, cost: Callable[[Run], float]) -> list[list[Run]]:
    """`count` lists of runs, together every run exactly once, each in plan order."""
    if count < 1:
        raise ValueError(f"cannot split a plan into {count} parts; need at least 1")
    costs = {r.run_id: cost(r) for r in runs}
    if len(costs) != len(runs):
        raise ValueError("the plan repeats a run id; it cannot be split")
    loads = [0.0] * count
    assigned: dict[str, int] = {}
    for run in sorted(runs, key=lambda r: (-costs[r.run_id], r.run_id)):
        target = min(range(count), key=lambda i: (loads[i], i))
        assigned[run.run_id] = target
        loads[target] += costs[run.run_id]
    parts: list[list[Run]] = [[] for _ in range(count)]
    for run in sorted(runs, key=lambda r: r.order):
        parts[assigned[run.run_id]].append(run)
    return parts


def lab_groups(runs: list[Run]) -> list[tuple[str, list[Run]]]:
    """Lab-kernel runs by clock (lab.clock), each group in plan order: one phase each."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        if run.config.host_kernel == "lab":
            groups.setdefault(str(run.config.data["lab"]["clock"]), []).append(run)
    return list(groups.items())


def parallel(clock: str) -> bool:
    """Whether runs on `clock` may share the machine (the virtual clock only)."""
    return clock == "virtual"


def own_boot(run: Run) -> bool:
    """Whether `run` starts a boot of the lab kernel of its own: a lab run on the virtual
    clock whose transfers are larger than lab.own_boot_above_kb, or whose pattern draws
    arrivals over a duration (open loop: sizes from a distribution)."""
    cfg = run.config
    if cfg.host_kernel != "lab" or not parallel(str(cfg.data["lab"]["clock"])):
        return False
    if open_loop(str(cfg.data["workload"]["pattern"])):
        return True
    return cfg.flow_sizes()[run.flow_type] > 1000 * int(cfg.data["lab"]["own_boot_above_kb"])


def boots(lane: list[Run]) -> list[list[Run]]:
    """The boots of the lab kernel that execute `lane`, one after another, in its order:
    a run that needs its own (`own_boot`) alone, consecutive others together."""
    out: list[list[Run]] = []
    last_alone = False
    for run in lane:
        alone = own_boot(run)
        if not out or alone or last_alone:
            out.append([])
        out[-1].append(run)
        last_alone = alone
    return out


def shared_first(lane: list[Run]) -> list[Run]:
    """`lane` with the runs that share a boot first, then those that boot alone, each in
    plan order: one shared boot instead of one between every two large runs."""
    return sorted(lane, key=own_boot)


def phases(runs: list[Run], jobs: int, cost: Callable[[Run], float]
           ) -> list[tuple[str, list[list[Run]]]]:
    """(what, lanes) per phase in execution order; `what` is 'host' or a lab clock."""
    out: list[tuple[str, list[list[Run]]]] = []
    host = [r for r in runs if r.config.host_kernel != "lab"]
    if host:
        out.append(("host", [host]))
    for clock, group in lab_groups(runs):
        count = min(jobs, len(group)) if parallel(clock) else 1
        out.append((clock, [shared_first(lane) for lane in deal(group, count, cost) if lane]))
    return out


def virtual_runs(runs: list[Run]) -> int:
    return sum(1 for r in runs if r.config.host_kernel == "lab"
               and parallel(str(r.config.data["lab"]["clock"])))


def memory_per_job_mb(runs: list[Run]) -> int:
    """Host memory one lab kernel of these runs may take (the largest lab.memory_mb,
    auto sized for their largest network: plan/memory.py)."""
    lab = [r for r in runs if r.config.host_kernel == "lab"]
    return (boot_mb(lab, lab) if lab else 0) + JAIL_EXTRA_MB


def jobs_that_fit(cores: int, ram_mb: int, per_job_mb: int) -> int:
    """Lab kernels this machine can hold at once: one per core, as RAM allows (>= 1)."""
    by_ram = (ram_mb - HOST_RESERVE_MB) // per_job_mb if per_job_mb > 0 else cores
    return max(1, min(cores, by_ram))


def default_jobs(runs: list[Run], cores: int, ram_mb: int) -> int:
    """Lab kernels at once when the user did not say: one per core, as RAM and the
    virtual-clock runs allow."""
    fit = jobs_that_fit(cores, ram_mb, memory_per_job_mb(runs))
    return max(1, min(fit, virtual_runs(runs) or 1))


def jobs_problem(jobs: int, runs: list[Run], cores: int, ram_mb: int) -> str:
    """'' or why --jobs `jobs` cannot run `runs` here (a sentence with what would)."""
    if not 1 <= jobs <= MAX_JOBS:
        return (f"--jobs {jobs}: expected a whole number from 1 to {MAX_JOBS} (lab kernels "
                f"at once; this machine has {cores} core(s))")
    per_job = memory_per_job_mb(runs)
    if jobs > 1 and per_job and jobs * per_job > ram_mb - HOST_RESERVE_MB:
        fit = jobs_that_fit(cores, ram_mb, per_job)
        return (f"--jobs {jobs}: {jobs} lab kernels of {per_job} MB each (lab.memory_mb + "
                f"{JAIL_EXTRA_MB}) need {jobs * per_job} MB, and this machine has {ram_mb} MB "
                f"of RAM ({HOST_RESERVE_MB} MB kept for the host): use --jobs {fit} or "
                "lower lab.memory_mb")
    return ""
