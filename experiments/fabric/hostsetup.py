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
# sees no reordering shorter than that (without moving packets); the other settings stay
# the kernel's, so the hold is the only difference from `default`. `juggler` is the lab
# kernel's Juggler (kernels/patches/0016-…, net/core/juggler_queue.c): at the entry of GRO
# the receiver holds each flow's out-of-order segments for up to
# `hosts.juggler_ooo_timeout_us` and hands them to TCP in order. Packets reach GRO on a
# veth only through its NAPI path, which GRO switched on opens (`receive_commands`); the
# other levels keep GRO off, as every interface of the fabric has it (fabric/shaping.py),
# so their hosts receive frame by frame as before.
HOLD_SYSCTL = "net.ipv4.tcp_reorder_hold_us"
JUGGLER_SYSCTL = "net.core.juggler"
REORDERING = {
    "default": (),
    "tuned": (
        "net.ipv4.tcp_reordering=32",
        "net.ipv4.tcp_max_reordering=1000",
        "net.ipv4.tcp_recovery=5",
        "net.ipv4.tcp_dsack=1",
    ),
    "gro": (f"{HOLD_SYSCTL}={{hold_us}}",),
    "juggler": (
        f"{JUGGLER_SYSCTL}_inseq_timeout_us={{inseq_us}}",
        f"{JUGGLER_SYSCTL}_ooo_timeout_us={{ooo_us}}",
        f"{JUGGLER_SYSCTL}_flows={{flows}}",
        f"{JUGGLER_SYSCTL}=1",
    ),
}
# Juggler's settings (in-sequence timeout µs, out-of-order timeout µs, flows): the
# schema's defaults (hosts.juggler_*)
JUGGLER_DEFAULTS = (0, 1000, 8)


def reordering_sysctls(level: str, hold_us: int,
                       juggler: tuple[int, int, int] = JUGGLER_DEFAULTS) -> list[str]:
    """key=value settings of a `hosts.reordering` level."""
    inseq_us, ooo_us, flows = juggler
    return [s.format(hold_us=hold_us, inseq_us=inseq_us, ooo_us=ooo_us, flows=flows)
            for s in REORDERING[level]]


@dataclass(frozen=True)
class HostSpec:
    transport: str  # tcp | mptcp
    subflows: int  # subflows per MPTCP connection (1 for TCP)
    cc: str
    scheduler: str = "default"
    subflow_paths: str = "hashed"  # hashed | disjoint | eliminate
    reordering: str = "default"  # default | tuned | gro | juggler (REORDERING)
    reorder_hold_us: int = 1000  # the bound of the reorder hold (gro)
    ecn: bool = False  # the switches mark ECN (switching.ecn_threshold_pkts)
    juggler: tuple[int, int, int] = JUGGLER_DEFAULTS  # juggler: inseq µs, ooo µs, flows

    @property
    def receives_through_gro(self) -> bool:
        """The host's interface has GRO on (Juggler works there)."""
        return self.reordering == "juggler"

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
        *reordering_sysctls(spec.reordering, spec.reorder_hold_us, spec.juggler),
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


def receive_commands(topo: FatTree, host: str, spec: HostSpec) -> list[list[str]]:
    """Commands after the link's (which turn every offload off): a Juggler host's
    interface receives through GRO. On a veth that opens its NAPI path (veth_poll ->
    napi_gro_receive), which a peer without TSO feeds (every fabric interface has TSO
    off); GRO then merges each flow's in-order segments before TCP."""
    if not spec.receives_through_gro:
        return []
    intf = topo.links_of(host)[0].port_of(host).intf
    return [["ethtool", "-K", intf, "gro", "on"]]
