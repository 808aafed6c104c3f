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
             "illinois", "lp", "nv", "scalable", "vegas", "veno", "westwood", "yeah", "cdg")


@dataclass(frozen=True)
class KernelAbilities:
    """What one kernel can do for a run."""

    name: str  # "this machine's kernel 6.18.0" / "the pathdiv lab kernel"
    ccs: frozenset[str]
    schedulers: frozenset[str]
    mptcp: bool
    netem: bool


def fragment_ccs(fragment: str) -> set[str]:
    """Congestion controls a config fragment builds in (reno is always there)."""
    found = re.findall(r"^CONFIG_TCP_CONG_([A-Z0-9]+)=y\s*$", fragment, re.M)
    return {"reno"} | {name.lower() for name in found if name != "ADVANCED"}


def patch_schedulers(patches: Iterable[str]) -> set[str]:
    """MPTCP schedulers the patch series registers (`.name = "rb"`), plus the default."""
    names = {"default"}
    for text in patches:
        names |= set(re.findall(r'^\+\s*\.name\s*=\s*"([a-z0-9_]+)",', text, re.M))
    return names


def lab_kernel_abilities(kernels_dir: Path = KERNELS_DIR,
                         fragment: Path = LAB_FRAGMENT) -> KernelAbilities:
    text = fragment.read_text()
    patches = [p.read_text() for p in sorted((kernels_dir / "patches").glob("*.patch"))]
    return KernelAbilities(
        name="the pathdiv lab kernel",
        ccs=frozenset(fragment_ccs(text)),
        schedulers=frozenset(patch_schedulers(patches)),
        mptcp=bool(re.search(r"^CONFIG_MPTCP=y", text, re.M)),
        netem=bool(re.search(r"^CONFIG_NET_SCH_NETEM=y", text, re.M)),
    )
