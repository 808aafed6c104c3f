"""Problems between the keys of a config whose every key is valid on its own (pure).

`load.validate` asks these after the schema's checks: a key two factors set, fidelity
thresholds in the wrong order, the parallel paths against the hosts, link names of
overrides and events, a rate to offer a load against, the data plane against the links'
loss and the switching mode, and the analysis' names against the factors and metrics.
Each problem names the key, the bad value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pathdiv.analysis.metrics.columns import dependent_variables
from pathdiv.analysis.stats.compare_pairs import compare_pair
from pathdiv.analysis.stats.scope import level_overrides
from pathdiv.experiments.config.checks import SIZE_DISTRIBUTIONS
from pathdiv.experiments.config.enumeration import enumeration_problems
from pathdiv.experiments.config.planes import AUTO, lookup, refusals
from pathdiv.experiments.config.sizes import CdfError, read_cdf
from pathdiv.experiments.config.workloads import open_loop
from pathdiv.topologies.conditions import ConditionError, parse_link, resolve, topology_of
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.paths import ParallelPaths


# ---- factors and analysis ---------------------------------------------------------------
def level_keys(factors: Mapping[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(factor, level, dotted key) of every key a factor level sets."""
    for factor, levels in factors.items():
        for level, overrides in levels.items():
            for dotted in level_overrides(overrides):
                yield factor, level, dotted


def factor_problems(data: Mapping[str, Any]) -> list[str]:
    """A key set by the levels of two factors (one would silently undo the other)."""
    problems = []
    owner: dict[str, str] = {}
    for factor, level, dotted in level_keys(data["factors"]):
        other = owner.setdefault(dotted, factor)
        if other != factor:
            problems.append(
                f"factors.{factor}.{level}.{dotted}: factor {other!r} sets {dotted} "
                "too; a key belongs to one factor, or the levels of one would "
                "silently undo the other's (merge the two factors into one)")
    return problems


def ecn_problems(data: Mapping[str, Any]) -> list[str]:
    """An ECN threshold a link's queue would drop before."""
    ecn = data["switching"]["ecn_threshold_pkts"]
    return [f"switching.ecn_threshold_pkts: {ecn} packets is not below "
            f"topology.links.{tier}.queue_pkts ({link['queue_pkts']}): "
            "the queue would drop before it marks; use a smaller threshold"
            for tier, link in data["topology"]["links"].items()
            if ecn is not None and link["queue_pkts"] <= ecn]


def analysis_problems(data: Mapping[str, Any]) -> list[str]:
    """The analysis' dependent variables, factors and clusters against what exists;
    `analysis.ivs: null` is resolved here to every factor, so later stages read a list."""
    factors, analysis = data["factors"], data["analysis"]
    if analysis["ivs"] is None:
        analysis["ivs"] = list(factors)
    known = dependent_variables()
    problems = [] if analysis["dvs"] else [
        "analysis.dvs: [] is empty; name at least one metric column, e.g. "
        "[throughput_mbps, fct_s], or leave analysis.dvs out for the defaults"]
    for key in ("ivs", "clusters", "dvs"):
        names = [str(n) for n in analysis[key] or []]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            problems.append(f"analysis.{key}: {', '.join(map(repr, twice))} given twice; "
                            "name each column once")
    problems += [f"analysis.dvs: {name!r} is not a metrics.csv column; choose from "
                f"{', '.join(known)}" for name in analysis["dvs"] if name not in known]
    # without factors there is nothing to compare (the report then only describes)
    problems += [f"analysis.ivs: {name!r} is not a factor of this config; factors: "
                 f"{', '.join(factors)}"
                 for name in (analysis["ivs"] if factors else []) if name not in factors]
    if factors and not 1 <= len(analysis["ivs"]) <= 2:
        problems.append(f"analysis.ivs: {analysis['ivs']!r} names {len(analysis['ivs'])} "
                        "factors; the MANOVA takes one or two")
    for i, pair in enumerate(analysis.get("compare") or []):
        a, b, held = compare_pair(pair)  # its shape was checked with the leaf
        # a pair the plan narrowed away (--set factors.X=...) is skipped by the analysis;
        # a pair across two factors, or a level with itself, compares nothing
        owner_a = {f for f in analysis["ivs"] if a in (factors.get(f) or {})}
        owner_b = {f for f in analysis["ivs"] if b in (factors.get(f) or {})}
        listed = "; ".join(f"{f}: {', '.join(factors[f])}" for f in analysis["ivs"]
                           if f in factors)
        if a == b or (owner_a and owner_b and not owner_a & owner_b):
            problems.append(f"analysis.compare[{i}]: [{a}, {b}] is not a pair of two levels "
                            f"of one factor of analysis.ivs; levels: {listed}")
        # the levels held: of another factor of analysis.ivs; a level the plan narrowed
        # away is passed over, a factor holding none of its own levels compares nothing
        for other, levels in held:
            if other not in analysis["ivs"] or other in owner_a | owner_b:
                others = [f for f in analysis["ivs"] if f not in owner_a | owner_b]
                problems.append(f"analysis.compare[{i}][2].{other}: not another factor of "
                                f"analysis.ivs than the pair's; choose from "
                                f"{', '.join(others) or 'none'}")
            elif factors and not set(levels) & set(factors.get(other) or {}):
                problems.append(f"analysis.compare[{i}][2].{other}: {list(levels)!r} holds no "
                                f"level of {other}; levels: {listed}")
    columns = ["condition", "flow_type", *factors]
    for name in analysis["clusters"]:
        if name not in columns:
            problems.append(f"analysis.clusters: {name!r} is not a column that splits the "
                            f"data; choose from {', '.join(columns)}")
        elif name in analysis["ivs"]:
            problems.append(f"analysis.clusters: {name!r} is also in analysis.ivs; a "
                            "factor is compared within clusters or splits them, not both")
    return problems


FLOW_TYPES = ("query", "short", "long")  # the reference design's


def repetitions_problems(data: Mapping[str, Any]) -> list[str]:
    """`repetitions: {flow type: n}` naming no flow type. A flow type the config narrowed
    away (--set workload.flow_types=...) keeps its entry; a name no flow type has is a typo."""
    reps = data["repetitions"]
    if not isinstance(reps, dict):
        return []
    flows = list(dict.fromkeys([*(data["workload"]["flow_types"] or {}), *FLOW_TYPES]))
    return [f"repetitions.{flow}: {flow!r} is not a flow type; choose from {', '.join(flows)}"
            for flow in reps if flow not in flows]


def cross_problems(data: Mapping[str, Any]) -> list[str]:
    """Problems between keys: a key one factor owns, ECN below the queues, repetitions per
    flow type, the analysis' names."""
    return (factor_problems(data) + ecn_problems(data) + repetitions_problems(data)
            + analysis_problems(data))


def shadowed_overrides(data: Mapping[str, Any], keys: Iterable[str]) -> list[str]:
    """`--set` keys that factor levels set again, so the override would not reach them."""
    problems = []
    sets = list(level_keys(data.get("factors", {})))
    for key in keys:
        levels = list(dict.fromkeys(
            f"{factor}={level}" for factor, level, k in sets
            if k == key or k.startswith(key + ".") or key.startswith(k + ".")))
        if levels:
            problems.append(
                f"--set {key}: the factor level(s) {', '.join(levels)} set {key} "
                "themselves, so this override would change no run of theirs; edit those "
                "levels in the config, or pick levels with --only")
    return problems


def threshold_problems(section: Mapping[str, Any]) -> list[str]:
    """Pairs of thresholds in the wrong order (the degraded one must come first)."""
    pairs = (("steal_degraded_pct", "steal_invalid_pct"),
             ("link_rate_invalid", "link_rate_degraded"),
             ("rto_degraded", "rto_invalid"))
    out = []
    for low, high in pairs:
        if low in section and high in section and section[low] > section[high]:
            out.append(f"fidelity.{low}: {section[low]!r} is not allowed; expected at most "
                       f"fidelity.{high} ({section[high]!r})")
    return out


# ---- the topology and its links ---------------------------------------------------------
def paths_problems(data: Mapping[str, Any]) -> list[str]:
    """`topology.paths` against `topology.kind` and the hosts; the paths-only keys
    (`workload.measure_s`, `capture.cc_trace_ms`) against the kind."""
    kind, paths = data["topology"]["kind"], data["topology"]["paths"] or []
    measure_s = data["workload"].get("measure_s") or 0
    trace_ms = (data.get("capture") or {}).get("cc_trace_ms") or 0
    if kind != "paths":
        only = [f"{key}: {value} with topology.kind: {kind}; it is for kind: paths "
                "(allowed here: 0)" for key, value in (("workload.measure_s", measure_s),
                                                       ("capture.cc_trace_ms", trace_ms))
                if value]
        return only + ([f"topology.paths: {len(paths)} paths given with topology.kind: "
                        f"{kind}; paths are for kind: paths (or remove topology.paths)"]
                       if paths else [])
    problems = []
    if measure_s > data["workload"]["timeout_s"]:
        problems.append(f"workload.measure_s: {measure_s} is longer than workload.timeout_s "
                        f"({data['workload']['timeout_s']}); allowed: measure_s <= timeout_s")
    if not paths:
        problems.append("topology.paths: missing; kind: paths needs 1..8 bottlenecks, e.g. "
                        "paths: [{bw_mbps: 100, delay_ms: 25}, {bw_mbps: 100, delay_ms: 25}]")
    for i, p in enumerate(paths):
        if (p.get("jitter_ms") or 0) > (p.get("delay_ms") or 0):
            problems.append(f"topology.paths[{i}].jitter_ms: {p['jitter_ms']} is larger than "
                            f"delay_ms ({p.get('delay_ms')}); allowed: jitter_ms <= delay_ms")
    if data["hosts"]["kernel"] != "lab":
        problems.append(f"hosts.kernel: {data['hosts']['kernel']!r} with topology.kind: "
                        "paths; allowed: lab (the paths' delays need netem, and their runs "
                        "execute in the lab kernel)")
    if data["topology"]["link_overrides"]:
        problems.append("topology.link_overrides: kind: paths sets each bottleneck in "
                        "topology.paths; allowed: {} (events may still change ra<i>-rb<i>)")
    return problems


def event_problems(topo: FatTree | ParallelPaths, events: list[dict[str, Any]]) -> list[str]:
    """Each event's time, link name and change."""
    problems = []
    for i, event in enumerate(events):
        where = f"events[{i}]"
        if event["at_s"] is None:
            problems.append(f"{where}.at_s: missing; expected seconds after the workload "
                            "starts, e.g. at_s: 5")
        if event["link"] is None:
            problems.append(f"{where}.link: missing; expected a link name such as a1-c1")
        else:
            try:
                parse_link(topo, str(event["link"]))
            except ConditionError as exc:
                problems.append(f"{where}.link: {exc}")
        changes = {k: v for k, v in (event["set"] or {}).items() if v is not None}
        if (event["action"] is None) == (not changes):
            problems.append(f"{where}: needs exactly one of action (down or up) or "
                            "set (e.g. set: {bw_mbps: 5})")
        elif event["action"] is not None and ">" in str(event["link"] or ""):
            problems.append(f"{where}.link: {event['link']!r}: a link goes {event['action']} "
                            "as a whole; name it with '-' (a1-c1)")
    return problems


def override_problems(topo: FatTree | ParallelPaths, overrides: Mapping[str, Any]
                      ) -> list[str]:
    """Link overrides that name no link of the topology."""
    problems = []
    for name in overrides:
        try:
            parse_link(topo, name)
        except ConditionError as exc:
            problems.append(f"topology.link_overrides.{name}: {exc}")
    return problems


def jitter_problems(topo: FatTree | ParallelPaths, overrides: Mapping[str, Any]
                    ) -> list[str]:
    """Link directions whose jitter exceeds their delay (netem would reorder)."""
    conds = resolve(topo, overrides)
    bad = sorted(f"{u}>{v}" for (u, v), c in conds.items() if c.jitter_ms > c.delay_ms)
    return [f"jitter_ms: larger than delay_ms on {', '.join(bad[:6])}"
            f"{' ...' if len(bad) > 6 else ''}; netem varies the delay by "
            "±jitter_ms, so set delay_ms >= jitter_ms there"] if bad else []


def load_problems(data: Mapping[str, Any]) -> list[str]:
    """Offered loads need a host link rate; open-loop sizes need a readable CDF."""
    problems = []
    workload = data["workload"]
    arrivals = open_loop(workload["pattern"]) or workload["background"]["pattern"] != "none"
    if arrivals and data["topology"]["links"]["host"]["bw_mbps"] is None:
        problems.append("topology.links.host.bw_mbps: null (unshaped) leaves no link rate to "
                        "offer workload.load or workload.background.load against; set a rate")
    sizes = str(workload["sizes"])
    drawn = open_loop(workload["pattern"]) or workload["background"]["pattern"] == "poisson"
    if sizes not in SIZE_DISTRIBUTIONS and drawn:
        try:
            read_cdf(sizes)
        except CdfError as exc:
            problems.append(f"workload.sizes: {exc}")
    return problems


def refused_by_plane(data: Mapping[str, Any]) -> list[str]:
    """What the configured data plane refuses of this config (its registry entry's
    `refusals`: e.g. loss_pct, dropped before a P4 switch reads, or a switching mode its
    program lacks). `auto` refuses per run what it cannot place (dataplane/select.py)."""
    plane = str(data["dataplane"])
    if plane == AUTO:
        return []
    return [f"dataplane: {plane}: {p}" for p in refusals(lookup(plane), data)]


def condition_problems(data: Mapping[str, Any]) -> list[str]:
    """Link names of overrides and events, the shape of each event, what the workload's
    load and the data plane need of the links."""
    topo = topology_of(data)
    overrides = data["topology"]["link_overrides"]
    named = override_problems(topo, overrides)
    problems = (named + event_problems(topo, data.get("events") or [])
                + ([] if named else jitter_problems(topo, overrides))
                + load_problems(data))
    # bounded in closed form only once the links and sizes it counts from are valid
    return (problems or enumeration_problems(data, len(topo.hosts))) + refused_by_plane(data)
