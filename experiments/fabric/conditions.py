"""The commands that set link conditions on a running network (pure).

The conditions themselves, per direction, are `pathdiv.topologies.conditions`.

Mechanisms (documented in the README):
  bw_mbps, queue_pkts  HTB class and a drop-tail leaf on src's egress (any kernel);
                       with switching.ecn_threshold_pkts on the nftables plane, a
                       switch's leaf is RED marking ECN instead (`shaping.red_ecn_leaf`;
                       needs sch_red: the lab kernel has it);
  delay_ms, jitter_ms  a netem leaf on src's egress (lab kernel only: this machine's
                       kernel may lack netem, and `pathdiv check` says so naming the key);
                       jitter is netem's uniform ±jitter_ms (it may reorder packets);
  loss_pct             an nftables netdev *ingress* rule on dst's interface dropping that
                       share of IPv4 packets (`numgen random`), on any kernel. Dropping on
                       arrival is what a lossy wire does: the sender gets no local drop
                       signal (an egress drop would tell TCP at once), and ARP is spared.
                       On the bmv2 data plane a switch reads packets before that hook, so
                       loss into a bmv2 switch is refused at check.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pathdiv.experiments.fabric.shaping import FRAME_BYTES, offload_command, tc_commands
from pathdiv.topologies.conditions import Conditions, Direction
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.model import Link, LinkParams

NFT_TABLE = "pathdiv_conditions"
LOSS_SCALE = 1_000_000  # numgen range: loss_pct resolves to 0.0001 %
NETEM_KEYS = ("delay_ms", "jitter_ms")


def _ingress_chain(prefix: str, intf: str, priority: int) -> tuple[str, list[str]]:
    """(chain, nft commands that create it empty) of one netdev ingress chain of `intf`."""
    chain = prefix + intf.replace("-", "_")
    return chain, [
        f"add table netdev {NFT_TABLE}",
        f'add chain netdev {NFT_TABLE} {chain} {{ type filter hook ingress device "{intf}" '
        f"priority {priority}; }}",
        f"flush chain netdev {NFT_TABLE} {chain}",
    ]


def loss_command(intf: str, loss_pct: float) -> list[str]:
    """One `nft` argv that (re)creates the ingress chain of `intf` with its loss rule."""
    chain, cmds = _ingress_chain("in_", intf, -500)
    threshold = round(loss_pct * LOSS_SCALE / 100)
    if threshold > 0:
        cmds.append(f"add rule netdev {NFT_TABLE} {chain} meta protocol ip numgen random "
                    f"mod {LOSS_SCALE} < {threshold} counter drop")
    return ["nft", "; ".join(cmds)]


def marking(topo: FatTree, node: str, ecn_threshold_pkts: int | None) -> int | None:
    """The ECN threshold of `node`'s egress queues: switches mark, hosts do not."""
    return ecn_threshold_pkts if topo.nodes[node].is_switch else None


def node_commands(topo: FatTree, node: str, conds: Conditions,
                  ecn_threshold_pkts: int | None = None) -> list[list[str]]:
    """Every interface of `node`: up, offloads off, egress shaped (marking ECN from
    `ecn_threshold_pkts` packets if `node` is a switch), ingress loss."""
    ports = [(lk.port_of(node).intf, lk.peer_of(node).node) for lk in topo.links_of(node)]
    cmds = [["ip", "link", "set", "dev", intf, "up"] for intf, _ in ports]
    cmds += [offload_command(intf) for intf, _ in ports]
    ecn = marking(topo, node, ecn_threshold_pkts)
    for intf, peer in ports:
        cmds += tc_commands(intf, conds[(node, peer)], ecn)
    for intf, peer in ports:
        if conds[(peer, node)].loss_pct > 0:
            cmds.append(loss_command(intf, conds[(peer, node)].loss_pct))
    return cmds


def change_commands(topo: FatTree, direction: Direction, old: LinkParams,
                    new: LinkParams,
                    ecn_threshold_pkts: int | None = None) -> dict[str, list[list[str]]]:
    """node -> commands that turn one direction's `old` conditions into `new` (a
    switch's leaf keeps marking ECN from `ecn_threshold_pkts`)."""
    src, dst = direction
    link = topo.link_between(src, dst)
    out: dict[str, list[list[str]]] = {}
    shaping = dataclasses.replace(new, loss_pct=0.0) != dataclasses.replace(old, loss_pct=0.0)
    if shaping:
        intf = link.port_of(src).intf
        full = tc_commands(intf, new, marking(topo, src, ecn_threshold_pkts))
        if (old.bw_mbps is None) != (new.bw_mbps is None):
            # HTB root <-> plain leaf cannot be replaced in place: start from an empty root.
            out[src] = [["tc", "qdisc", "del", "dev", intf, "root"], *full]
        else:  # keep the root (an HTB root cannot be "replaced" by itself): class, leaf
            out[src] = [c for c in full if c[1] == "class" or "10:" in c]
    if new.loss_pct != old.loss_pct:
        out.setdefault(dst, []).append(loss_command(link.port_of(dst).intf, new.loss_pct))
    return out


def cut_command(intf: str, cut: bool) -> list[str]:
    """One `nft` argv: every packet arriving on `intf` dropped (cut) or none (restored)."""
    chain, cmds = _ingress_chain("cut_", intf, -501)
    if cut:
        cmds.append(f"add rule netdev {NFT_TABLE} {chain} counter drop")
    return ["nft", "; ".join(cmds)]


def link_state_commands(link: Link, up: bool) -> dict[str, list[list[str]]]:
    """`link` failed (down: both ends drop everything that arrives) or working again.

    The interfaces stay up and every route stays: this is a link that died before any
    routing protocol reacted, so ECMP keeps hashing flows onto it (a kernel `ip link
    set down` would instead flush the data plane's routes through it for good)."""
    return {p.node: [cut_command(p.intf, not up)] for p in (link.a, link.b)}


def netem_keys(data: Mapping[str, Any]) -> list[str]:
    """'key=value' for every key of a resolved config that needs netem (delay, jitter)."""
    out = []
    topo = data.get("topology", {})
    for tier, params in (topo.get("links") or {}).items():
        out += [f"topology.links.{tier}.{k}={params[k]:g}" for k in NETEM_KEYS
                if params.get(k)]
    for name, params in (topo.get("link_overrides") or {}).items():
        out += [f"topology.link_overrides.{name}.{k}={params[k]:g}" for k in NETEM_KEYS
                if params.get(k)]
    for i, event in enumerate(data.get("events") or []):
        changes = event.get("set") or {}
        out += [f"events[{i}].set.{k}={changes[k]:g}" for k in NETEM_KEYS if changes.get(k)]
    return out


# A switch program that queues packets itself (bmv2) drains them slightly slower than the
# link's shaper, so the queue builds in the switch, where the program can read its depth.
PROGRAM_QUEUE_SHARE = 0.98


def program_queues(topo: FatTree, conds: Conditions) -> dict[str, list[tuple[int, int, int]]]:
    """switch -> (port number, rate in full frames per second, depth in packets) of each
    egress queue, for a switch program that queues and marks ECN by itself (bmv2's
    `set_queue_rate`/`set_queue_depth`). Unshaped directions get no entry (no queue)."""
    out: dict[str, list[tuple[int, int, int]]] = {}
    for sw in topo.switches:
        rows = []
        for link in topo.links_of(sw):
            params = conds[(sw, link.peer_of(sw).node)]
            if params.bw_mbps is None:
                continue
            pps = int(params.bw_mbps * 1e6 * PROGRAM_QUEUE_SHARE / (FRAME_BYTES * 8))
            rows.append((link.port_of(sw).number, max(pps, 1), params.queue_pkts))
        out[sw] = rows
    return out
