"""Host configuration as command lines (pure): addresses, routes, sysctls, MPTCP.

Every host has one interface. Its primary address and, for MPTCP with N subflows,
N-1 alias addresses are /32s on that interface; the edge switch is the on-link
gateway. Each alias is an MPTCP `subflow` endpoint, so a connection opens its extra
subflows from distinct source addresses over the one interface (the `ndiffports`
behaviour): the 5-tuples differ, so ECMP can place them on different paths.

With `subflow_paths` other than `hashed` the namespace runs MPTCP's userspace path
manager instead (`net.mptcp.pm_type=1`, no endpoints): the transfer tool opens the
subflows itself from source ports pathdiv chose (`experiments/traffic/placement.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pathdiv.topologies.fattree import FatTree

# The fabric is IPv4: IPv6 would send its own router solicitations and MLD reports on
# every link, which interface counters and captures would then mix with the traffic.
NO_IPV6 = ("net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")

# `hosts.reordering`: how a host's TCP tells reordering from loss, per namespace (these are
# per-network-namespace sysctls in both kernels pathdiv runs, 6.12 and later). `default`
# leaves a new namespace's values: initial reordering degree 3 (duplicate ACKs, or SACKed
# segments, before a loss is assumed), at most 300, RACK loss detection (tcp_recovery=1):
# a segment is lost when one sent after it was (S)ACKed more than a reordering window ago;
# the window is min_rtt/4, but 0 while no reordering was seen on the connection and
# `tcp_reordering` segments or more are SACKed (net/ipv4/tcp_recovery.c, 6.12).
# `tuned` starts with degree 32 (up to 1000) and sets RACK_NO_DUPTHRESH (tcp_recovery bit
# 0x4): RACK's time window applies from the first SACK, and it widens by a step of
# min_rtt/4 for each DSACK (a spurious retransmission), up to one srtt. `gro` is the lab
# kernel's reorder hold (kernels/patches/0005-…, net/ipv4/tcp_reorder_hold.h): a receiver
# holds the SACKs of out-of-order segments for up to `hosts.reorder_hold_us`, so a sender
# sees no reordering shorter than that (Juggler's idea, without moving packets); the other
# settings stay the kernel's, so the hold is the only difference from `default`.
HOLD_SYSCTL = "net.ipv4.tcp_reorder_hold_us"
REORDERING = {
    "default": (),
    "tuned": (
        "net.ipv4.tcp_reordering=32",
        "net.ipv4.tcp_max_reordering=1000",
        "net.ipv4.tcp_recovery=5",
        "net.ipv4.tcp_dsack=1",
    ),
    "gro": (f"{HOLD_SYSCTL}={{hold_us}}",),
}


def reordering_sysctls(level: str, hold_us: int) -> list[str]:
    """key=value settings of a `hosts.reordering` level."""
    return [s.format(hold_us=hold_us) for s in REORDERING[level]]


@dataclass(frozen=True)
class HostSpec:
    transport: str  # tcp | mptcp
    subflows: int  # subflows per MPTCP connection (1 for TCP)
    cc: str
    scheduler: str = "default"
    subflow_paths: str = "hashed"  # hashed | disjoint | eliminate
    reordering: str = "default"  # default | tuned | gro (REORDERING)
    reorder_hold_us: int = 1000  # the bound of the reorder hold (gro)
    ecn: bool = False  # the switches mark ECN (switching.ecn_threshold_pkts)

    @property
    def userspace_pm(self) -> bool:
        return self.transport == "mptcp" and self.subflow_paths != "hashed"


def host_sysctls(intf: str, spec: HostSpec) -> list[str]:
    """key=value settings of a host whose one interface is `intf`."""
    sysctls = [
        *NO_IPV6,
        "net.ipv4.conf.all.rp_filter=2",
        "net.ipv4.conf.default.rp_filter=2",
        f"net.ipv4.conf.{intf}.rp_filter=2",
        f"net.ipv4.tcp_congestion_control={spec.cc}",
        # ask for ECN on every connection where switches mark or DCTCP runs (DCTCP's
        # window follows the share of CE marks; the kernel default 2 only answers)
        f"net.ipv4.tcp_ecn={1 if spec.ecn or spec.cc == 'dctcp' else 2}",
        "net.ipv4.tcp_no_metrics_save=1",
        f"net.mptcp.enabled={1 if spec.transport == 'mptcp' else 0}",
        *reordering_sysctls(spec.reordering, spec.reorder_hold_us),
    ]
    if spec.transport == "mptcp" and spec.scheduler != "default":
        sysctls.append(f"net.mptcp.scheduler={spec.scheduler}")
    if spec.transport == "mptcp":
        sysctls.append(f"net.mptcp.pm_type={1 if spec.userspace_pm else 0}")
    return sysctls


def host_commands(topo: FatTree, host: str, spec: HostSpec) -> list[list[str]]:
    """argv lists to run inside `host`'s namespace, in order: the sysctls first, then
    only `ip` commands (so a node script runs them as one `ip -batch`)."""
    intf = topo.links_of(host)[0].port_of(host).intf
    gateway = topo.nodes[topo.edge_of(host)].address
    addrs = topo.host_addresses(host)
    cmds: list[list[str]] = [["sysctl", "-qw", *host_sysctls(intf, spec)]]
    cmds.append(["ip", "addr", "flush", "dev", intf])
    cmds += [["ip", "addr", "add", f"{a}/32", "dev", intf] for a in addrs]
    cmds.append(["ip", "link", "set", intf, "up"])
    link = topo.links_of(host)[0]
    cmds.append(["ip", "neigh", "replace", gateway, "lladdr", topo.mac(link.peer_of(host)),
                 "dev", intf, "nud", "permanent"])
    cmds.append(["ip", "route", "replace", "default", "via", gateway, "dev", intf, "onlink",
                 "src", addrs[0]])
    if spec.transport == "mptcp" and not spec.userspace_pm:
        extra = spec.subflows - 1
        cmds.append(["ip", "mptcp", "endpoint", "flush"])
        cmds.append(["ip", "mptcp", "limits", "set", "subflow", str(extra),
                     "add_addr_accepted", str(extra)])
        cmds += [["ip", "mptcp", "endpoint", "add", a, "dev", intf, "subflow"]
                 for a in addrs[1:]]
    return cmds
