"""Link shaping as tc command lines (pure): HTB rate, drop-tail queue, optional delay.

Each end of a link shapes its own egress, so both directions get the link's rate,
queue and delay (`pathdiv.experiments.fabric.conditions` sets each direction apart).
HTB gives the rate; a pfifo leaf gives a queue counted in packets
(`queue_pkts`), as a switch buffer would be. A delay needs netem, whose leaf then
holds the queue limit instead; `netem_available()` in `pathdiv.experiments.fabric.environment`
tells whether this kernel has it.

A switch egress that marks ECN (`switching.ecn_threshold_pkts` = K, the kernel data
plane) gets a RED leaf in ECN mode instead of the pfifo: min = max = K full frames, so
RED's average crosses both thresholds at once and every ECN-capable packet is marked CE
(probability 1) from K queued frames on, and every other packet dropped there, as a
DCTCP switch does. RED averages the queue with weight 2^-Wlog; tc derives Wlog from
`burst`, and burst = K gives Wlog = 1 (tc's smallest), so the average is half the last
average plus half the queue now: within a packet of the instantaneous queue. RED's
hard limit is in bytes: queue_pkts full frames. RED and netem do not stack here: a
marking link has no delay.
"""

from __future__ import annotations

from pathdiv.topologies.model import LinkParams

FRAME_BYTES = 1514  # a full Ethernet frame at MTU 1500, what RED's byte thresholds count


def red_ecn_leaf(params: LinkParams, threshold_pkts: int) -> list[str]:
    """RED in ECN mode marking from `threshold_pkts` queued full frames (step marking)."""
    mark = str(threshold_pkts * FRAME_BYTES)
    rate = [] if params.bw_mbps is None else ["bandwidth", f"{params.bw_mbps:g}mbit"]
    return ["red", "limit", str(params.queue_pkts * FRAME_BYTES), "min", mark, "max", mark,
            "avpkt", str(FRAME_BYTES), "burst", str(threshold_pkts), "probability", "1.0",
            *rate, "ecn"]


def tc_commands(intf: str, params: LinkParams,
                ecn_threshold_pkts: int | None = None) -> list[list[str]]:
    """argv lists that configure `intf`'s egress; run inside the interface's namespace.
    With `ecn_threshold_pkts` the leaf marks ECN (RED) instead of only dropping."""
    cmds: list[list[str]] = []
    leaf_parent = ["root"]
    if params.bw_mbps is not None:
        rate = f"{params.bw_mbps:g}mbit"
        cmds.append(["tc", "qdisc", "replace", "dev", intf, "root", "handle", "1:", "htb",
                     "default", "1"])
        cmds.append(["tc", "class", "replace", "dev", intf, "parent", "1:", "classid", "1:1",
                     "htb", "rate", rate, "ceil", rate, "quantum", "1514"])
        leaf_parent = ["parent", "1:1"]
    if ecn_threshold_pkts is not None:
        leaf = red_ecn_leaf(params, ecn_threshold_pkts)
    elif params.delay_ms > 0:
        jitter = [f"{params.jitter_ms:g}ms"] if params.jitter_ms > 0 else []
        leaf = ["netem", "delay", f"{params.delay_ms:g}ms", *jitter,
                "limit", str(params.queue_pkts)]
    else:
        leaf = ["pfifo", "limit", str(params.queue_pkts)]
    cmds.append(["tc", "qdisc", "replace", "dev", intf, *leaf_parent, "handle", "10:", *leaf])
    return cmds


def offload_command(intf: str) -> list[str]:
    """Turn off segmentation/receive offloads so every packet on the wire is one frame
    (queues count real packets, spraying sprays real packets, captures see them)."""
    return ["ethtool", "-K", intf, "tso", "off", "gso", "off", "gro", "off"]


def interface_commands(ports: list[tuple[str, LinkParams]]) -> list[list[str]]:
    """Every interface of one node (name, its link's parameters): up, offloads off,
    shaped. Grouped by program, so a node script (`pathdiv.experiments.fabric.nodescript`) runs them
    as one `ip -batch`, one `ethtool` per interface and one `tc -batch`."""
    cmds = [["ip", "link", "set", "dev", intf, "up"] for intf, _ in ports]
    cmds += [offload_command(intf) for intf, _ in ports]
    for intf, params in ports:
        cmds += tc_commands(intf, params)
    return cmds
