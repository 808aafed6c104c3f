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
# the checkout (or the installed pathdiv/): the folder that holds kernels/, experiments/, ...
REPO_DIR = KERNELS_DIR.parent
LAB_FRAGMENT = KERNELS_DIR / "uml.config"

# The names Linux gives its TCP congestion controls (net/ipv4/tcp_*.c).
LINUX_CCS = ("reno", "cubic", "bbr", "dctcp", "bic", "highspeed", "htcp", "hybla",
             "illinois", "lp", "nv", "scalable", "vegas", "veno", "westwood", "yeah", "cdg")


@dataclass(frozen=True)
class KernelAbilities:
    """What one kernel can do for a run."""

    name: str  # "this machine's kernel 6.18.0" / "the pathdiv lab kernel"
    ccs: frozenset[str]
    schedulers: frozenset[str]
    mptcp: bool
    netem: bool
    reorder_hold: bool = False  # net.ipv4.tcp_reorder_hold_us (hosts.reordering: gro)
    juggler: bool = False  # net.core.juggler (hosts.reordering: juggler)
    red: bool = False  # sch_red, the ECN-marking leaf of the nftables plane


def fragment_ccs(fragment: str) -> set[str]:
    """Congestion controls a config fragment builds in (reno is always there)."""
    found = re.findall(r"^CONFIG_TCP_CONG_([A-Z0-9]+)=y\s*$", fragment, re.M)
    return {"reno"} | {name.lower() for name in found if name != "ADVANCED"}


def _registered_names(patches: Iterable[str], ops: str) -> list[str]:
    """`.name = "x"` of the `struct <ops>` initialisers the patches add, in patch order."""
    names: dict[str, None] = {}
    for text in patches:
        for part in re.split(r"^\+\+\+ ", text, flags=re.M)[1:]:
            if re.search(rf"^\+.*\bstruct {ops}\b[^;(]*=", part, re.M):
                names.update(dict.fromkeys(
                    re.findall(r'^\+\s*\.name\s*=\s*"([a-z0-9_-]+)",', part, re.M)))
    return list(names)


def patch_schedulers(patches: Iterable[str]) -> set[str]:
    """MPTCP schedulers the patch series registers (`.name = "rb"`), plus the default."""
    return {"default", *_registered_names(patches, "mptcp_sched_ops")}


def patch_ccs(patches: Iterable[str]) -> set[str]:
    """TCP congestion controls the patch series registers (`.name = "lia"`)."""
    return set(_registered_names(patches, "tcp_congestion_ops"))


def lab_patches(kernels_dir: Path = KERNELS_DIR) -> list[str]:
    """The text of every patch of the lab kernel's series, in order."""
    return [p.read_text() for p in sorted((kernels_dir / "patches").glob("*.patch"))]


# The registries of schedulers and congestion controls a config may name: what Linux
# has, plus what the lab kernel's patches register (a new patch adds its names here).
LAB_SCHEDULERS = ("default", *_registered_names(lab_patches(), "mptcp_sched_ops"))
# lia: RFC 6356's coupled congestion control for MPTCP subflows (plain TCP runs it as Reno)
LAB_ONLY_CCS = tuple(_registered_names(lab_patches(), "tcp_congestion_ops"))
KNOWN_CCS = (*LINUX_CCS, *(cc for cc in LAB_ONLY_CCS if cc not in LINUX_CCS))


def patch_define(patches: Iterable[str], name: str) -> int | None:
    """The value of `#define NAME <integer>` in a file the patch series adds."""
    for text in patches:
        found = re.search(rf"^\+#define\s+{name}\s+(\d+)\b", text, re.M)
        if found:
            return int(found.group(1))
    return None


# Juggler's bound of net.core.juggler_flows (net/core/juggler_queue.h, patch 0016)
JUGGLER_MAX_FLOWS = patch_define(lab_patches(), "JUGGLER_MAX_FLOWS") or 64


def lab_kernel_abilities(kernels_dir: Path = KERNELS_DIR,
                         fragment: Path = LAB_FRAGMENT) -> KernelAbilities:
    text = fragment.read_text()
    patches = lab_patches(kernels_dir)
    return KernelAbilities(
        name="the pathdiv lab kernel",
        ccs=frozenset(fragment_ccs(text) | patch_ccs(patches)),
        schedulers=frozenset(patch_schedulers(patches)),
        mptcp=bool(re.search(r"^CONFIG_MPTCP=y", text, re.M)),
        netem=bool(re.search(r"^CONFIG_NET_SCH_NETEM=y", text, re.M)),
        red=bool(re.search(r"^CONFIG_NET_SCH_RED=y", text, re.M)),
        reorder_hold=any(re.search(r'^\+\s*\.procname\s*=\s*"tcp_reorder_hold_us"', p, re.M)
                         for p in patches),
        juggler=any(re.search(r'^\+\s*\.procname\s*=\s*"juggler"', p, re.M)
                    for p in patches),
    )
