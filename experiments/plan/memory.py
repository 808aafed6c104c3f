"""Memory a run's network needs, the lab kernel's memory (`lab.memory_mb`), and whether
this machine can hold it (pure).

A network's memory grows with its nodes (a namespace and a Mininet node shell each), with
its captured links (every link's packet socket holds a ring of kernel memory,
`capture_ring_kb`, and an output buffer of CAPTURE_WRITE_MB) and with its hosts while
traffic runs: when every host fetches at once (a permutation), each fetch is a process
of about FETCH_PROCESS_MB of its own, or, in rounds of more than SHARED_ABOVE requests on
the virtual clock, a thread of a shared process (SHARED_FETCH_MB: its 1 MB receive
piece, its stack, its sockets; traffic/rounds.py). So, in MB of the kernel's memory,

    need = HEADROOM x (BASE_MB + PER_NODE_MB x nodes
                       + (ring MB + CAPTURE_WRITE_MB + PER_CAPTURE_MB) x captured links
                       + per fetch MB x hosts)

the terms read off the guest's memory in use (`memory_mb` in each manifest: MemTotal -
MemAvailable in the lab kernel, once built, with captures running and after the
traffic) of permutation runs at k = 8 and 16 and a fetch process's private pages
(/proc/PID/smaps_rollup) (docs/benchmarks.md, "Bigger fat trees"); HEADROOM covers the
runner's own objects, socket buffers and the static routes of MPTCP's alias addresses.

`lab.memory_mb: auto` (the default) gives the lab kernel what the plan's largest network
needs, rounded up to 256 MB and never less than AUTO_FLOOR_MB (the fixed default before,
so a k=4 run boots as it always did); every boot of a plan gets the same memory, so no
run's guest depends on which other runs share its lane. A lab kernel gets that and its
jail JAIL_EXTRA_MB more; the host must hold it besides its own HOST_RESERVE_MB.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pathdiv.experiments.config.load import Config
from pathdiv.topologies.fattree import FatTree

if TYPE_CHECKING:
    from pathdiv.experiments.plan.runs import Run

JAIL_EXTRA_MB = 64  # what a lab kernel's jail adds to its memory (kernels/uml.py)
HOST_RESERVE_MB = 1024  # left to the host, its pathdiv and the analysis

BASE_MB = 72.0
PER_NODE_MB = 0.83  # k=8: 245 MB built for 208 nodes
PER_CAPTURE_MB = 0.02  # a link's socket and file, beside its ring (k=8: 0.77 MB a link)
CAPTURE_WRITE_MB = 0.25  # the capture's output buffer per link (linkcap.c WRITE_BUFFER)
FETCH_PROCESS_MB = 12.6  # a fetch process's private pages (python -S, 1 MB piece, threads)
SHARED_FETCH_MB = 1.5  # a request's thread in a shared fetch
SHARED_ABOVE = 256  # requests of a round above which its fetches share processes
PER_SHARED = 128  # requests per shared fetch process
HEADROOM = 1.25

AUTO = "auto"
AUTO_FLOOR_MB = 1536  # lab.memory_mb: auto never gives less (the default before auto)

# The ring of kernel memory each link's capture holds. On the real clock the capturing
# process may be late by the host's scheduling, so the ring holds seconds of traffic
# (libpcap's default of tcpdump's era: 4 MiB). On the virtual clock a process woken by a
# full block runs before guest time moves on (CPU work takes none), so the ring needs
# only the block being filled, the one handed over and one spare: 3 x 256 KiB
# (linkcap.c's BLOCK_SIZE). A block that still finds no room is counted as dropped by
# the kernel and the run's fidelity verdict says so (docs/fidelity.md).
RING_REAL_KB = 4096
RING_VIRTUAL_KB = 768


def capture_ring_kb(virtual: bool) -> int:
    """KB of kernel memory one link's capture holds (linkcap's ring, tcpdump's -B)."""
    return RING_VIRTUAL_KB if virtual else RING_REAL_KB


def need_mb(k: int, captures: bool, virtual: bool = True, access_only: bool = False) -> int:
    """MB of memory a k-ary fat tree's network needs in the kernel that runs it
    (`virtual`: on the lab kernel's virtual clock, whose captures hold smaller rings;
    `access_only`: capture.links: access, the hosts' links only)."""
    nodes, hosts, all_links = _sizes(k)
    per_link = capture_ring_kb(virtual) / 1024 + CAPTURE_WRITE_MB + PER_CAPTURE_MB
    links = (hosts if access_only else all_links) if captures else 0
    per_fetch = (SHARED_FETCH_MB + FETCH_PROCESS_MB / PER_SHARED
                 if virtual and hosts > SHARED_ABOVE else FETCH_PROCESS_MB)
    return int(HEADROOM * (BASE_MB + PER_NODE_MB * nodes + per_link * links
                           + per_fetch * hosts))


@functools.lru_cache(maxsize=16)
def _sizes(k: int) -> tuple[int, int, int]:
    """Nodes, hosts and links of the k-ary fat tree (`check` asks once per run and boot)."""
    topo = FatTree(k)
    return len(topo.switches) + len(topo.hosts), len(topo.hosts), len(topo.links)


def virtual_of(cfg: Config) -> bool:
    """Whether `cfg`'s runs are on the lab kernel's virtual clock."""
    return cfg.host_kernel == "lab" and str(cfg.data["lab"]["clock"]) == "virtual"


def run_need_mb(cfg: Config) -> int:
    if cfg.topology_kind != "fattree":
        return other_need_mb(cfg)
    return need_mb(cfg.k, bool(cfg.data["capture"]["enabled"]), virtual_of(cfg),
                   cfg.captured_links == "access")


def other_need_mb(cfg: Config) -> int:
    """MB a network that is not a fat tree needs (parallel paths: a few nodes, one
    transfer and its background), by the same terms: its nodes, its captured links and
    a fetch process per host."""
    topo = cfg.topology()
    nodes, hosts = len(topo.nodes), len(topo.hosts)
    links = len(topo.links) if cfg.data["capture"]["enabled"] else 0
    per_link = capture_ring_kb(virtual_of(cfg)) / 1024 + CAPTURE_WRITE_MB + PER_CAPTURE_MB
    return int(HEADROOM * (BASE_MB + PER_NODE_MB * nodes + per_link * links
                           + FETCH_PROCESS_MB * hosts))


def network_of(cfg: Config) -> str:
    """'a k=8 fat tree with captures' (what the messages call `cfg`'s network)."""
    if cfg.topology_kind != "fattree":
        kind = "parallel-paths" if cfg.topology_kind == "paths" else cfg.topology_kind
        return f"a {kind} network of {len(cfg.topology().nodes)} nodes"
    captures = ""
    if cfg.data["capture"]["enabled"]:
        captures = (" with captures of its access links" if cfg.captured_links == "access"
                    else " with captures")
    return f"a k={cfg.k} fat tree{captures}"


def rounded(mb: int) -> int:
    """`mb` rounded up to a multiple of 256 (what a user would write)."""
    return -(-mb // 256) * 256


def auto_mb(configs: Iterable[Config]) -> int:
    """`lab.memory_mb: auto` for a plan of these configs: its largest network's need,
    rounded up to 256 MB, at least AUTO_FLOOR_MB."""
    needs = [run_need_mb(c) for c in configs if c.host_kernel == "lab"]
    return max(AUTO_FLOOR_MB, rounded(max(needs, default=0)))


def configured_mb(cfg: Config, auto: int) -> int:
    """`cfg`'s lab.memory_mb, with `auto` standing for the plan's automatic size."""
    value = cfg.data["lab"]["memory_mb"]
    return auto if value == AUTO else int(value)


def boot_mb(group: Sequence[Run], plan: Sequence[Run]) -> int:
    """Memory of the lab kernel that boots for `group`, runs of `plan`: the largest
    lab.memory_mb among them, auto sized for the plan's largest network."""
    auto = auto_mb(r.config for r in plan)
    return max((configured_mb(r.config, auto) for r in group), default=auto)


def config_mb(cfg: Config) -> int:
    """Memory of a lab kernel booted for `cfg` alone (`pathdiv net`, `probe`, the API)."""
    return configured_mb(cfg, auto_mb([cfg]))


def chosen(runs: Sequence[Run]) -> str:
    """What `pathdiv check` says of lab.memory_mb: '' when no run is on the lab kernel."""
    lab = [r for r in runs if r.config.host_kernel == "lab"]
    if not lab:
        return ""
    auto = auto_mb(r.config for r in lab)
    largest = max(lab, key=lambda r: run_need_mb(r.config)).config
    need = run_need_mb(largest)
    what = f"{network_of(largest)} needs about {need} MB"
    sizes = sorted({configured_mb(r.config, auto) for r in lab})
    autos = sum(1 for r in lab if r.config.data["lab"]["memory_mb"] == AUTO)
    if autos == len(lab):
        floor = f", at least {AUTO_FLOOR_MB}" if need < AUTO_FLOOR_MB else ""
        return (f"lab.memory_mb: auto = {auto} MB for every boot (the plan's largest "
                f"network: {what}{floor})")
    return (f"lab.memory_mb: {', '.join(map(str, sizes))} MB ({autos} of {len(lab)} run(s) "
            f"auto = {auto} MB; the largest network: {what})")


MAX_REAL_CLOCK_K = 8  # above it only the virtual clock keeps a 2-core machine's links exact


def clock_problems(runs: Sequence[Run]) -> list[str]:
    """A fat tree above MAX_REAL_CLOCK_K on a real clock: its hosts and switches would
    share two cores in real time, so the CPU, not the links, would set the rates."""
    for run in runs:
        cfg = run.config
        if cfg.topology_kind == "fattree" and cfg.k > MAX_REAL_CLOCK_K and not virtual_of(cfg):
            return [f"topology.k: {cfg.k} runs on the lab kernel's virtual clock only "
                    f"(hosts.kernel: lab, lab.clock: virtual; {run.run_id} has hosts.kernel: "
                    f"{cfg.host_kernel}, clock {'virtual' if virtual_of(cfg) else 'real'}): "
                    f"on a real clock {_sizes(cfg.k)[0]} nodes share this machine's "
                    f"cores and the CPU, not the links, sets the rates (k <= "
                    f"{MAX_REAL_CLOCK_K} there)"]
    return []


def largest_k(ram_mb: int, captures: bool, lab: bool, most: int, virtual: bool = True,
              access_only: bool = False) -> int | None:
    """The largest even k <= `most` whose network this machine's RAM holds (None: none)."""
    best = None
    for k in range(2, most + 1, 2):
        own = need_mb(k, captures, virtual, access_only)
        need = max(AUTO_FLOOR_MB, rounded(own)) + JAIL_EXTRA_MB if lab else own
        if need <= ram_mb - HOST_RESERVE_MB:
            best = k
    return best


def memory_problems(runs: list[Run], ram_mb: int, most_k: int) -> list[str]:
    """Why this machine (`ram_mb` of RAM, 0: unknown) cannot build the runs' networks:
    a lab.memory_mb set below what the network needs, or more than this machine has."""
    problems: list[str] = []
    auto = auto_mb(r.config for r in runs)
    seen: set[tuple[int, bool, str, int, bool, bool]] = set()
    for run in runs:
        cfg = run.config
        lab = cfg.host_kernel == "lab"
        memory = configured_mb(cfg, auto) if lab else 0
        captures = bool(cfg.data["capture"]["enabled"])
        virtual = virtual_of(cfg)
        access = cfg.captured_links == "access"
        key = (cfg.k, captures, cfg.host_kernel, memory, virtual, access)
        if key in seen:
            continue
        seen.add(key)
        need = run_need_mb(cfg)
        what = network_of(cfg)
        host_need = (max(need, memory) + JAIL_EXTRA_MB) if lab else need
        if ram_mb and host_need > ram_mb - HOST_RESERVE_MB:
            fits = largest_k(ram_mb, captures, lab, most_k, virtual, access)
            size = (max(AUTO_FLOOR_MB, rounded(need_mb(fits, captures, virtual, access)))
                    if fits else 0)
            sized = (f" with lab.memory_mb: {size}"
                     if fits and lab and cfg.data["lab"]["memory_mb"] != AUTO else "")
            would = (f"topology.k: {fits} fits here{sized} (or a machine with at least "
                     f"{host_need + HOST_RESERVE_MB} MB)" if fits else
                     f"a machine with at least {host_need + HOST_RESERVE_MB} MB")
            held = (f"{memory} MB of lab kernel" if lab and memory > need
                    else f"about {need} MB of memory")
            problems.append(
                f"topology.k: {cfg.k}: {what} needs {held} "
                f"(docs/benchmarks.md, \"Bigger fat trees\"), and this machine has {ram_mb} MB "
                f"of RAM ({HOST_RESERVE_MB} MB kept for the host): {would}")
        elif lab and memory < need:
            problems.append(
                f"lab.memory_mb: {memory} is below the about {need} MB {what} needs in the "
                f"lab kernel (docs/benchmarks.md, \"Bigger fat trees\"): set lab.memory_mb: "
                f"auto, or {rounded(need)} or more (--set lab.memory_mb={rounded(need)})")
    return problems
