"""Link conditions per direction: the model (pure data, read by the fabric and analysis).

A link's two directions are conditioned apart. A direction is `(src, dst)`: packets
leaving `src` towards `dst`. Its conditions start as its tier's
(`topology.links.<tier>`), then `topology.link_overrides` replaces keys: `a1-c1` both
directions, `a1>c1` only a1 → c1 (applied after the both-direction entries). The commands
that set them on a running network are `pathdiv.experiments.fabric.conditions`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping
from typing import Any

from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.model import Link, LinkParams, Tier
from pathdiv.topologies.paths import ParallelPaths, PathSpec

Topology = FatTree | ParallelPaths

Direction = tuple[str, str]
Conditions = dict[Direction, LinkParams]


class ConditionError(ValueError):
    """A link name or a condition that does not fit the topology."""


def parse_link(topo: Topology, key: str) -> tuple[Link, list[Direction]]:
    """'a1-c1' -> (link, both directions); 'a1>c1' -> (link, [('a1', 'c1')])."""
    sep = ">" if ">" in key else "-"
    parts = key.split(sep)
    link = None
    if len(parts) == 2:
        try:
            link = topo.link_between(parts[0], parts[1])
        except KeyError:
            link = None
    if link is None:
        names = [lk.name for lk in topo.links]
        shown = ", ".join(names[:24]) + (f" ... ({len(names)} links)" if len(names) > 24 else "")
        what = (f"the k={topo.k} fat tree" if isinstance(topo, FatTree)
                else f"the {topo.count}-path topology")
        raise ConditionError(f"{key!r} is not a link of {what}; links are "
                             f"named lower-upper, e.g. {shown} (a1>c1: one direction)")
    if sep == ">":
        return link, [(parts[0], parts[1])]
    return link, [(link.a.node, link.b.node), (link.b.node, link.a.node)]


def link_params_of(links: Mapping[str, Mapping[str, Any]]) -> dict[Tier, LinkParams]:
    """`topology.links` of a config (tier -> keys) as each tier's LinkParams."""
    defaults = LinkParams()
    out = {}
    for tier, p in links.items():
        bw = p.get("bw_mbps", defaults.bw_mbps)
        out[Tier(tier)] = LinkParams(
            bw_mbps=None if bw is None else float(bw),
            delay_ms=float(p.get("delay_ms", defaults.delay_ms)),
            queue_pkts=int(p.get("queue_pkts", defaults.queue_pkts)),
            jitter_ms=float(p.get("jitter_ms", defaults.jitter_ms)),
            loss_pct=float(p.get("loss_pct", defaults.loss_pct)),
        )
    return out


def fat_tree_of(config: Mapping[str, Any]) -> FatTree:
    """The fat tree a config describes: `topology.k`, `topology.links` and an alias
    address per extra MPTCP subflow on every host; missing keys take the schema's
    defaults, and `topology.kind` is not looked at. The one way a config becomes a fat
    tree: the experiment's `Config.topology` and the analysis of a results folder (a
    run's manifest holds its resolved config) both call it."""
    topology = config.get("topology") or {}
    hosts = config.get("hosts") or {}
    aliases = int(hosts.get("subflows", 1)) - 1 if hosts.get("transport") == "mptcp" else 0
    params = link_params_of(topology.get("links") or {})
    return _fat_tree(int(topology.get("k", 4)), tuple(params.items()), max(aliases, 0))


@functools.lru_cache(maxsize=32)
def _fat_tree(k: int, params: tuple[tuple[Tier, LinkParams], ...], aliases: int) -> FatTree:
    """One FatTree per distinct (k, tier conditions, aliases): a plan asks for its runs'
    topology thousands of times (`check` at k=16: 1,344 nodes, 3,072 links each), and
    the object is immutable, its nodes, links and lookups built once on first use."""
    return FatTree(k, dict(params), aliases_per_host=aliases)


def parallel_paths_of(paths: Iterable[Mapping[str, Any]]) -> ParallelPaths:
    """`topology.paths` of a config as the parallel-paths topology object."""
    specs = []
    for p in paths:
        params = link_params_of({"bottleneck": p})[Tier.BOTTLENECK]
        background = p.get("background") or {}
        specs.append(PathSpec(params, int(background.get("flows", 0)),
                              background.get("cc")))
    return ParallelPaths(tuple(specs))


def topology_of(config: Mapping[str, Any]) -> FatTree | ParallelPaths:
    """The topology object a (validated) config describes, as its `topology.kind` says."""
    topology = config.get("topology") or {}
    if topology.get("kind") == "paths":
        return parallel_paths_of(topology.get("paths") or [])
    return fat_tree_of(config)


def changed(params: LinkParams, changes: Mapping[str, Any]) -> LinkParams:
    """`params` with every non-null key of `changes` replaced."""
    kinds = {"queue_pkts": int}
    given: dict[str, Any] = {k: kinds.get(k, float)(v) for k, v in changes.items()
                             if v is not None}
    return dataclasses.replace(params, **given)


def resolve(topo: Topology, overrides: Mapping[str, Mapping[str, Any]]) -> Conditions:
    """Every direction's conditions: tier, then both-direction overrides, then one-way."""
    out: Conditions = {}
    for link in topo.links:
        out[(link.a.node, link.b.node)] = link.params
        out[(link.b.node, link.a.node)] = link.params
    for one_way in (False, True):
        for key, changes in overrides.items():
            if (">" in key) != one_way:
                continue
            _, dirs = parse_link(topo, key)
            for d in dirs:
                out[d] = changed(out[d], changes)
    return out
