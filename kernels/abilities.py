"""What a kernel offers a config: congestion controls, MPTCP schedulers, netem (pure).

`pathdiv check` holds every run of a plan against the kernel it will run on before
anything starts: this machine's kernel is read from /proc (environment.this_kernel), the
lab kernel's is read from its recipe here (config fragment and patch series), so the
answer does not depend on whether the lab kernel has been built yet.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

KERNELS_DIR = Path(__file__).resolve().parent
LAB_FRAGMENT = KERNELS_DIR / "uml.config"

# The names Linux gives its TCP congestion controls (net/ipv4/tcp_*.c), for the schema.
KNOWN_CCS = ("reno", "cubic", "bbr", "dctcp", "bic", "highspeed", "htcp", "hybla",
             "illinois", "lp", "nv", "scalable", "vegas", "veno", "westwood", "yeah", "cdg",
             "lia", "olia", "coupled-bbr")
# Those only the lab kernel's patches register (kernels/patches): lia, RFC 6356's coupled
# congestion control for MPTCP subflows, and olia, the opportunistic linked increases
# (plain TCP sockets run both as Reno), and coupled-bbr, BBR with Coupled BBR's PROBE_BW
# gains (seed 003, section IV; plain TCP sockets run it as BBR).
LAB_ONLY_CCS = ("lia", "olia", "coupled-bbr")


@dataclass(frozen=True)
class KernelAbilities:
    """What one kernel can do for a run."""

    name: str  # "this machine's kernel 6.18.0" / "the pathdiv lab kernel"
    ccs: frozenset[str]
    schedulers: frozenset[str]
    mptcp: bool
    netem: bool
    reorder_hold: bool = False  # net.ipv4.tcp_reorder_hold_us (hosts.reordering: gro)


def fragment_ccs(fragment: str) -> set[str]:
    """Congestion controls a config fragment builds in (reno is always there)."""
    found = re.findall(r"^CONFIG_TCP_CONG_([A-Z0-9]+)=y\s*$", fragment, re.M)
    return {"reno"} | {name.lower() for name in found if name != "ADVANCED"}


def _registered_names(patches: Iterable[str], ops: str) -> set[str]:
    """`.name = "x"` of the `struct <ops>` initialisers the patches add, file by file."""
    names: set[str] = set()
    for text in patches:
        for part in re.split(r"^\+\+\+ ", text, flags=re.M)[1:]:
            if re.search(rf"^\+.*\bstruct {ops}\b[^;(]*=", part, re.M):
                names |= set(re.findall(r'^\+\s*\.name\s*=\s*"([a-z0-9_-]+)",', part, re.M))
    return names


def patch_schedulers(patches: Iterable[str]) -> set[str]:
    """MPTCP schedulers the patch series registers (`.name = "rb"`), plus the default."""
    return {"default"} | _registered_names(patches, "mptcp_sched_ops")


def patch_ccs(patches: Iterable[str]) -> set[str]:
    """TCP congestion controls the patch series registers (`.name = "lia"`)."""
    return _registered_names(patches, "tcp_congestion_ops")


def lab_kernel_abilities(kernels_dir: Path = KERNELS_DIR,
                         fragment: Path = LAB_FRAGMENT) -> KernelAbilities:
    text = fragment.read_text()
    patches = [p.read_text() for p in sorted((kernels_dir / "patches").glob("*.patch"))]
    return KernelAbilities(
        name="the pathdiv lab kernel",
        ccs=frozenset(fragment_ccs(text) | patch_ccs(patches)),
        schedulers=frozenset(patch_schedulers(patches)),
        mptcp=bool(re.search(r"^CONFIG_MPTCP=y", text, re.M)),
        netem=bool(re.search(r"^CONFIG_NET_SCH_NETEM=y", text, re.M)),
        reorder_hold=any(re.search(r'^\+\s*\.procname\s*=\s*"tcp_reorder_hold_us"', p, re.M)
                         for p in patches),
    )
