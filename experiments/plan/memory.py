"""Memory a run's network needs, and whether this machine can hold it (pure).

A network's memory grows with its nodes (a namespace and a Mininet node shell each), with
its links when captures run (every link's tcpdump holds a 4 MiB kernel ring, `-B 4096`
in network/captures.py, besides its own process) and with its hosts once traffic has run
(servers, transfer processes, socket buffers, the captures' written pages). So, in MB of
the kernel's memory in use after a run's traffic,

    need = HEADROOM x (BASE_MB + PER_NODE_MB x nodes + PER_CAPTURE_MB x links
                       + PER_HOST_MB x hosts)

the terms read off the guest's memory in use (`memory_mb` in each manifest: MemTotal -
MemAvailable in the lab kernel, once built, with captures running and after the traffic)
of one noisy query run at k = 4, 6 and 8 (k=8: built and capturing only;
`benchmarks/fattree_lab.py`, docs/benchmarks.md "Bigger fat trees"); HEADROOM covers
longer flows' socket buffers and page cache. A lab kernel gets lab.memory_mb and its jail
a little more; the host must hold that besides its own.
"""

from __future__ import annotations

from pathdiv.experiments.config.load import Config
from pathdiv.experiments.plan.lanes import HOST_RESERVE_MB, JAIL_EXTRA_MB
from pathdiv.experiments.plan.runs import Run
from pathdiv.topologies.fattree import FatTree

BASE_MB = 72.0
PER_NODE_MB = 1.14
PER_CAPTURE_MB = 4.8 + 0.25  # measured, and tcpdump's 256 KB output buffer since
PER_HOST_MB = 8.4
HEADROOM = 1.25


def need_mb(k: int, captures: bool) -> int:
    """MB of memory a k-ary fat tree's network needs in the kernel that runs it."""
    topo = FatTree(k)
    nodes = len(topo.switches) + len(topo.hosts)
    links = len(topo.links) if captures else 0
    return int(HEADROOM * (BASE_MB + PER_NODE_MB * nodes + PER_CAPTURE_MB * links
                           + PER_HOST_MB * len(topo.hosts)))


def run_need_mb(cfg: Config) -> int:
    return need_mb(cfg.k, bool(cfg.data["capture"]["enabled"]))


def rounded(mb: int) -> int:
    """`mb` rounded up to a multiple of 256 (what a user would write)."""
    return -(-mb // 256) * 256


def largest_k(ram_mb: int, captures: bool, lab: bool, most: int) -> int | None:
    """The largest even k <= `most` whose network this machine's RAM holds (None: none)."""
    best = None
    for k in range(2, most + 1, 2):
        need = need_mb(k, captures) + (JAIL_EXTRA_MB if lab else 0)
        if need <= ram_mb - HOST_RESERVE_MB:
            best = k
    return best


def memory_problems(runs: list[Run], ram_mb: int, most_k: int) -> list[str]:
    """Why this machine (`ram_mb` of RAM, 0: unknown) cannot build the runs' networks:
    lab.memory_mb below what the network needs, or more than this machine has."""
    problems: list[str] = []
    seen: set[tuple[int, bool, str, int]] = set()
    for run in runs:
        cfg = run.config
        lab = cfg.host_kernel == "lab"
        memory = int(cfg.data["lab"]["memory_mb"]) if lab else 0
        captures = bool(cfg.data["capture"]["enabled"])
        key = (cfg.k, captures, cfg.host_kernel, memory)
        if key in seen:
            continue
        seen.add(key)
        need = run_need_mb(cfg)
        what = f"a k={cfg.k} fat tree{' with captures' if captures else ''}"
        host_need = (max(need, memory) + JAIL_EXTRA_MB) if lab else need
        if ram_mb and host_need > ram_mb - HOST_RESERVE_MB:
            fits = largest_k(ram_mb, captures, lab, most_k)
            sized = (f" with lab.memory_mb: {rounded(need_mb(fits, captures))}"
                     if fits and lab else "")
            would = (f"topology.k: {fits} fits here{sized} (or a machine with at least "
                     f"{host_need + HOST_RESERVE_MB} MB)" if fits else
                     f"a machine with at least {host_need + HOST_RESERVE_MB} MB")
            problems.append(
                f"topology.k: {cfg.k}: {what} needs about {need} MB of memory "
                f"(docs/benchmarks.md, \"Bigger fat trees\"), and this machine has {ram_mb} MB "
                f"of RAM ({HOST_RESERVE_MB} MB kept for the host): {would}")
        elif lab and memory < need:
            problems.append(
                f"lab.memory_mb: {memory} is below the about {need} MB {what} needs in the "
                f"lab kernel (docs/benchmarks.md, \"Bigger fat trees\"): set lab.memory_mb: "
                f"{rounded(need)} or more (--set lab.memory_mb={rounded(need)})")
    return problems
