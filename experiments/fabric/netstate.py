"""One network for several runs (pure): when a built network may serve the next run, what
a node's state is, what a clean node looks like, and what a reset must do.

A run changes its network: link conditions (events), the data plane's mode, the hosts'
transport settings (sysctls, MPTCP endpoints and limits), and it leaves sockets,
processes, conntrack entries behind. Runs whose configs differ only in what a reset can
set again (`VARIANT_KEYS`: switching mode, transport, scheduler, ...) and in what never
touches the network (workload, captures, analysis, ...) share one network
(`reuse_key`). Between two runs the network is reset and then *verified*: every node's
state is read (`snapshot_script`, parsed by `parse_snapshot`) and compared
(`problems`): what no run may change (addresses, routes, rules, neighbours, switch
sysctls) against the snapshot taken right after the network was built; what the run's
variant decides (host sysctls, MPTCP endpoints and limits; a switch's mode is its
data plane's to check) against what that variant sets (`variant_state`); and what must
be gone (sockets other than TIME_WAIT, processes, conntrack entries) against nothing. A
difference that a reset can repair (`REPAIRABLE`: queues, classes, the conditions'
nftables table, which events change) is repaired; anything else means the network is
rebuilt.
"""

from __future__ import annotations

import contextlib
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pathdiv.experiments.config.planes import UnknownPlane, lookup
from pathdiv.experiments.fabric.conditions import NFT_TABLE as CONDITIONS_TABLE
from pathdiv.experiments.fabric.hostsetup import REORDERING, HostSpec, host_commands, host_sysctls
from pathdiv.topologies.fattree import FatTree

# Config keys a reset sets again between runs (the run's "variant"); every other key
# that is not in NETWORKLESS_SECTIONS fixes the built network.
VARIANT_KEYS = {
    "switching": ("mode", "spray"),
    "hosts": ("transport", "subflows", "scheduler", "subflow_paths", "reordering",
              "reorder_hold_us", "juggler_inseq_timeout_us", "juggler_ooo_timeout_us",
              "juggler_flows"),
}
# Sections a network never reads (the run's traffic, captures, analysis, the plan);
# `events` change links during a run, and a reset undoes them (REPAIRABLE).
NETWORKLESS_SECTIONS = ("name", "repetitions", "workload", "capture", "fidelity",
                        "analysis", "factors", "events")
# State a reset repairs when it differs from the built network's: queues and classes
# (bandwidth, delay and queue events), the conditions' table (loss events, cut links).
REPAIRABLE = ("qdisc", "class", "nft_conditions")
# Must equal the snapshot taken after the build.
INVARIANT = ("addr", "route", "rule", "neigh", "qdisc", "class", "nft_conditions",
             "nft_other", "switch_sysctl")
TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
              "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
              "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING", "0C": "NEW_SYN_RECV"}
MARK = "@@pathdiv-section "


def reuse_key(data: Mapping[str, Any], plane: str) -> str | None:
    """What fixes a built network of the resolved config `data` on data plane `plane`
    (two runs with equal keys may share one network), or None when the plane's registry
    entry says its switches hold state a reset cannot check (bmv2's registers and
    counters: rebuilt every run; p4-ebpf's maps are read back, DataPlane.state_problems)."""
    try:
        entry = lookup(plane)
    except UnknownPlane:
        return None
    if not entry.reusable:
        return None
    plane = entry.name
    kept: dict[str, Any] = {}
    for section, value in data.items():
        if section in NETWORKLESS_SECTIONS:
            continue
        if isinstance(value, Mapping) and section in VARIANT_KEYS:
            value = {k: v for k, v in value.items() if k not in VARIANT_KEYS[section]}
        kept[section] = value
    kept["dataplane_resolved"] = plane
    # whether the hosts receive through GRO (hosts.reordering: juggler) is fixed at the
    # build (fabric/hostsetup.py: receive_commands): Juggler and other runs never share
    kept["hosts_gro"] = data.get("hosts", {}).get("reordering") == "juggler"
    return json.dumps(kept, sort_keys=True, default=str)


def variant_of(data: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of `data` a reset sets (VARIANT_KEYS), for the manifest."""
    return {f"{s}.{k}": data.get(s, {}).get(k) for s, keys in VARIANT_KEYS.items()
            for k in keys}


# ---- what is read from a node ----------------------------------------------------------
def host_sysctl_keys(intf: str, cc: str, ecn: bool) -> list[str]:
    """Every sysctl any host variant sets (the union over transports, schedulers, path
    managers and reordering levels), so a key one run set and the next does not is seen."""
    keys: list[str] = []
    for transport in ("tcp", "mptcp"):
        for paths in ("hashed", "disjoint"):
            for level in REORDERING:
                spec = HostSpec(transport, 2, cc, "other", paths, level, 1, ecn)
                for item in host_sysctls(intf, spec):
                    key = item.partition("=")[0]
                    if key not in keys:
                        keys.append(key)
    return keys


SWITCH_SYSCTL_KEYS = ("net.ipv4.ip_forward", "net.ipv4.conf.all.rp_filter",
                      "net.ipv4.conf.default.rp_filter", "net.ipv6.conf.all.disable_ipv6")


def ip_batch(is_host: bool) -> str:
    """The `ip -j -batch` file a snapshot runs: JSON arrays in this order, then (hosts)
    the MPTCP limits as text (iproute2 6.1 prints them as text even with -j)."""
    lines = ["address show", "route show table all", "rule show", "neigh show"]
    if is_host:
        lines += ["mptcp endpoint show", "mptcp limits show"]
    return "\n".join(lines) + "\n"


def snapshot_script(ip_file: str, sysctl_keys: list[str], nft: bool = True) -> str:
    """Shell text for a node's shell: sections marked by MARK lines. One or two
    executions (ip; nft, unless the caller reads the ruleset itself: fabric/nftlib.py);
    sysctls and sockets are read with shell builtins (no process). The caller adds the
    `tc` section (fabric/rtnl.py) and the `nft` one if it read it, with `section`."""
    reads = " ".join(shlex.quote("/proc/sys/" + k.replace(".", "/")) for k in sysctl_keys)
    return "; ".join([
        f"echo '{MARK}ip'", f"ip -j -batch {shlex.quote(ip_file)} 2>&1",
        *([f"echo '{MARK}nft'", "nft -j list ruleset 2>&1"] if nft else []),
        f"echo '{MARK}sysctl'",
        f"for f in {reads}; do if [ -r \"$f\" ]; then read -r v < \"$f\"; "
        "echo \"$f=$v\"; else echo \"$f=absent\"; fi; done" if reads else "true",
        f"echo '{MARK}tcp'", "while read -r l; do echo \"$l\"; done < /proc/net/tcp",
        f"echo '{MARK}conntrack'",
        "if [ -r /proc/sys/net/netfilter/nf_conntrack_count ]; then "
        "read -r c < /proc/sys/net/netfilter/nf_conntrack_count; echo \"$c\"; fi",
        f"echo '{MARK}end'",
    ])


# ---- parsing ---------------------------------------------------------------------------
def _json_values(text: str) -> tuple[list[Any], str]:
    """Consecutive JSON values at the start of `text`, and the text after them."""
    decoder = json.JSONDecoder()
    out: list[Any] = []
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text) or text[i] not in "[{":
            return out, text[i:]
        try:
            value, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            return out, text[i:]
        out.append(value)


def _canon(items: Any, drop: tuple[str, ...] = ()) -> list[str]:
    """Each item as sorted-key JSON without the `drop` keys (at any depth), sorted."""
    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in drop}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x
    return sorted(json.dumps(strip(i), sort_keys=True) for i in (items or []))


# A link's carrier as the kernel reports it: it follows the peer's state through the
# link watcher, which may report a veth up to a second after both ends were set up.
CARRIER = ("LOWER_UP", "NO-CARRIER", "M-DOWN", "DORMANT")


def _link_config(link: dict[str, Any]) -> dict[str, Any]:
    """An `ip address show` entry without what is the carrier's state at the moment of
    reading (operstate, carrier flags), not configuration a run could leave behind."""
    out = {k: v for k, v in link.items() if k != "operstate"}
    if isinstance(out.get("flags"), list):
        out["flags"] = [f for f in out["flags"] if f not in CARRIER]
    return out


def _flags_as_keys(endpoint: dict[str, Any]) -> dict[str, Any]:
    """An endpoint as iproute2 6.1 prints it (`"subflow": true`), also from the
    `"flags": [...]` form other versions print."""
    out = {k: v for k, v in endpoint.items() if k != "flags"}
    out.update({flag: True for flag in endpoint.get("flags") or []})
    return out


def parse_limits(text: str) -> dict[str, int]:
    """`add_addr_accepted 0 subflows 2` -> {'add_addr_accepted': 0, 'subflows': 2}."""
    words = text.split()
    return {words[i]: int(words[i + 1]) for i in range(0, len(words) - 1, 2)
            if words[i + 1].isdigit()}


USER_HZ = 100  # /proc/net/tcp's timer column counts clock ticks of 1/USER_HZ s


class TcpTable(NamedTuple):
    live: list[str]  # sockets other than TIME_WAIT, 'STATE local remote' (kernel hex)
    time_wait: int  # TIME_WAIT sockets
    time_wait_expiry_s: float  # until the last one's timer expires (0 without one)


def parse_tcp(lines: list[str]) -> TcpTable:
    """/proc/net/tcp rows -> the live sockets, and the TIME_WAIT sockets with the
    expiry of the last one's timer (the `tm->when` of column `tr:tm->when`, in
    hexadecimal ticks)."""
    live, waiting, last = [], 0, 0.0
    for line in lines:
        f = line.split()
        if len(f) < 4 or f[0] == "sl":
            continue
        state = TCP_STATES.get(f[3].upper(), f[3])
        if state != "TIME_WAIT":
            live.append(f"{state} {f[1]} {f[2]}")
            continue
        waiting += 1
        if len(f) > 5:
            with contextlib.suppress(ValueError):
                last = max(last, int(f[5].partition(":")[2], 16) / USER_HZ)
    return TcpTable(sorted(live), waiting, last)


@dataclass
class NodeState:
    """One node's state, each section a canonical (comparable) value."""

    sections: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # what could not be read


def section(name: str, text: str) -> str:
    """A section of a snapshot (`tc`, `nft`) read apart from the node's script."""
    return f"{MARK}{name}\n{text.rstrip()}\n"


def snapshot_parts(text: str) -> dict[str, str]:
    """A node's snapshot output cut into its sections (MARK lines name them)."""
    parts: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith(MARK):
            name = line.removeprefix(MARK).strip()
            parts[name] = ""
        elif name:
            parts[name] += line + "\n"
    return parts


def parse_snapshot(text: str, is_host: bool) -> NodeState:
    """A node's snapshot output (see `snapshot_script`; sections in any order) ->
    NodeState."""
    parts = snapshot_parts(text)
    state = NodeState()
    if "end" not in parts:
        state.errors.append("the snapshot did not finish")
    _read_ip(parts.get("ip", ""), is_host, state)
    _read_tc(parts.get("tc", ""), state)
    _read_nft(parts.get("nft", ""), state)
    s = state.sections
    sysctl: dict[str, str] = {}
    for line in parts.get("sysctl", "").splitlines():
        path, sep, value = line.partition("=")
        if sep:
            sysctl[path.removeprefix("/proc/sys/").replace("/", ".")] = value.strip()
    s["sysctl" if is_host else "switch_sysctl"] = sysctl
    s["tcp"], s["time_wait"], _ = parse_tcp(parts.get("tcp", "").splitlines())
    count = parts.get("conntrack", "").strip()
    s["conntrack"] = int(count) if count.isdigit() else 0
    return state


def _read_ip(text: str, is_host: bool, state: NodeState) -> None:
    """The `ip -j -batch` section: addresses, routes, rules, neighbours (and a host's
    MPTCP endpoints and limits)."""
    s = state.sections
    ip_values, rest = _json_values(text)
    wanted = ["addr", "route", "rule", "neigh"] + (["mptcp_endpoints"] if is_host else [])
    if len(ip_values) < len(wanted):
        state.errors.append(f"ip printed {len(ip_values)} of {len(wanted)} JSON tables: "
                            f"{rest.strip()[:200]}")
    for key, value in zip(wanted, ip_values, strict=False):
        s[key] = value
    s["addr"] = _canon([_link_config(i) for i in s.get("addr") or []],
                       ("valid_life_time", "preferred_life_time", "tentative"))
    s["rule"] = _canon(s.get("rule") or [])  # no mode changes a rule (static: marks too)
    # "linkdown" is the carrier's state at the moment of reading (a veth just built may
    # not have it yet), not configuration a run could leave behind
    s["route"] = _canon([{**r, "flags": [f for f in r.get("flags") or [] if f != "linkdown"]}
                         for r in s.get("route") or []])
    s["neigh"] = _canon(s.get("neigh"))
    if is_host:
        s["mptcp_endpoints"] = _canon([_flags_as_keys(e) for e in
                                       s.get("mptcp_endpoints") or []], ("id",))
        s["mptcp_limits"] = parse_limits(rest)


def _read_tc(text: str, state: NodeState) -> None:
    """The qdiscs, then each interface's classes."""
    tc_values, rest = _json_values(text)
    if not tc_values:
        state.errors.append(f"tc printed no JSON: {rest.strip()[:200]}")
    state.sections["qdisc"] = _canon(tc_values[0] if tc_values else [], ("refcnt",))
    state.sections["class"] = [_canon(v) for v in tc_values[1:]]  # in interface order


def _read_nft(text: str, state: NodeState) -> None:
    """The ruleset: the mode's table, the conditions' table, every other table."""
    nft_values, rest = _json_values(text)
    if not nft_values:
        state.errors.append(f"nft printed no JSON: {rest.strip()[:200]}")
    tables: dict[str, list[Any]] = {}
    for item in (nft_values[0].get("nftables", []) if nft_values else []):
        for kind, body in item.items():
            if kind == "metainfo" or not isinstance(body, dict):
                continue
            table = body.get("table", body.get("name")) if kind != "table" else body["name"]
            tables.setdefault(str(table), []).append({kind: body})
    drop = ("handle", "counter", "packets", "bytes")
    s = state.sections
    s["nft_pathdiv"] = _canon(tables.pop("pathdiv", []), drop)
    s["nft_conditions"] = _canon(tables.pop(CONDITIONS_TABLE, []), drop)
    s["nft_other"] = _canon([t for ts in tables.values() for t in ts], drop)


# ---- what a clean node of a variant looks like -------------------------------------
def host_spec(cfg: Any) -> HostSpec:
    """The hosts' settings of a config (the same HostSpec the build uses)."""
    return HostSpec(cfg.transport, cfg.subflows, cfg.cc, cfg.scheduler, cfg.subflow_paths,
                    cfg.reordering, cfg.reorder_hold_us,
                    ecn=cfg.ecn_threshold_pkts is not None, juggler=cfg.juggler)


def endpoint_manager(spec: HostSpec) -> bool:
    """Whether the in-kernel path manager's endpoints serve this variant."""
    return spec.transport == "mptcp" and not spec.userspace_pm


def variant_state(topo: FatTree, node: str, spec: HostSpec,
                  defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Sections a clean `node` has under this variant. `defaults`: a fresh namespace's
    `sysctl` values (every key of host_sysctl_keys) and `mptcp_limits`. A switch has
    none: its routes and rules are the same in every mode (the mode is its data plane's
    marks or program, the plane's own to check: DataPlane.state_problems)."""
    if topo.nodes[node].is_switch:
        return {}
    intf = topo.links_of(node)[0].port_of(node).intf
    fresh = defaults.get("sysctl", {})
    sysctl = {k: fresh.get(k, "absent") for k in host_sysctl_keys(intf, spec.cc, spec.ecn)}
    for item in host_sysctls(intf, spec):
        key, _, value = item.partition("=")
        sysctl[key] = value
    extra = spec.subflows - 1
    if endpoint_manager(spec):
        endpoints = _canon([{"address": a, "subflow": True, "dev": intf}
                            for a in topo.host_addresses(node)[1:]])
        limits = {"add_addr_accepted": extra, "subflows": extra}
    else:
        endpoints, limits = [], dict(defaults.get("mptcp_limits", {}))
    return {"sysctl": sysctl, "mptcp_endpoints": endpoints, "mptcp_limits": limits}


def reset_host_commands(topo: FatTree, host: str, spec: HostSpec,
                        defaults: Mapping[str, Any]) -> list[list[str]]:
    """Commands that give `host` this variant whatever variant it had: every sysctl any
    variant sets (this one's value, else the fresh namespace's), the build's commands,
    then the endpoints flushed and the limits set also when no endpoint is wanted.
    TCP's per-destination metrics cache (RTT, ssthresh, cwnd learnt by the previous
    run's connections, which a new connection to the same host starts from) is flushed:
    a fresh network has none."""
    want = variant_state(topo, host, spec, defaults)
    sysctls = [f"{k}={v}" for k, v in want["sysctl"].items() if v != "absent"]
    cmds: list[list[str]] = [["sysctl", "-qw", *sysctls], ["ip", "tcp_metrics", "flush", "all"]]
    cmds += host_commands(topo, host, spec)[1:]  # its sysctls are among the above
    if not endpoint_manager(spec):
        limits = want["mptcp_limits"]
        cmds.append(["ip", "mptcp", "endpoint", "flush"])
        if {"subflows", "add_addr_accepted"} <= set(limits):
            cmds.append(["ip", "mptcp", "limits", "set", "subflow", str(limits["subflows"]),
                         "add_addr_accepted", str(limits["add_addr_accepted"])])
    return cmds


# ---- comparing --------------------------------------------------------------------------
def _where(was: str, now: str, context: int = 60) -> str:
    """'was ... -> now ...' from a little before the first character that differs."""
    pairs = enumerate(zip(was, now, strict=False))
    i = next((k for k, (a, b) in pairs if a != b), min(len(was), len(now)))
    start = max(0, i - context)
    lead = "..." if start else ""
    return (f"was {lead}{was[start:i + 2 * context]} -> now {lead}"
            f"{now[start:i + 2 * context]}")


def _differs(name: str, ref: Any, now: Any) -> str:
    if isinstance(ref, list) and isinstance(now, list) and all(
            isinstance(x, str) for x in ref + now):
        gone = [x for x in ref if x not in now]
        new = [x for x in now if x not in ref]
        if len(new) == 1 and len(gone) == 1:  # one item changed: show where
            return f"{name}: {_where(gone[0], new[0])}"
        parts = [f"+{x[:160]}" for x in new[:2]] + [f"-{x[:160]}" for x in gone[:2]]
        return f"{name}: " + ("; ".join(parts) or "order differs")
    if isinstance(ref, dict) and isinstance(now, dict):
        keys = sorted(k for k in set(ref) | set(now) if ref.get(k) != now.get(k))
        return f"{name}: " + "; ".join(f"{k} {ref.get(k)!r} -> {now.get(k)!r}"
                                       for k in keys[:4])
    return f"{name}: {str(ref)[:120]} -> {str(now)[:120]}"


def problems(reference: NodeState, observed: NodeState, expected: Mapping[str, Any],
             procs: Sequence[str] = ()) -> dict[str, list[str]]:
    """Section -> what differs from a clean node ({} when clean). `reference`: the node
    after its build; `expected`: `variant_state`; `procs`: processes left in it."""
    out: dict[str, list[str]] = {}
    ref, now = reference.sections, observed.sections
    if observed.errors:
        out["snapshot"] = list(observed.errors)
    for name in INVARIANT:
        if name in ref and ref.get(name) != now.get(name):
            out[name] = [_differs(name, ref.get(name), now.get(name))]
    for name, want in expected.items():
        if now.get(name) != want:
            out[name] = [_differs(name, want, now.get(name))]
    if now.get("tcp"):
        out["tcp"] = [f"{len(now['tcp'])} socket(s) left: {', '.join(now['tcp'][:3])}"]
    if now.get("conntrack"):
        out["conntrack"] = [f"{now['conntrack']} conntrack entr(y/ies) left"]
    if procs:
        out["procs"] = [f"{len(procs)} process(es) left: {', '.join(procs[:3])}"]
    return out


def unrepairable(found: Mapping[str, Mapping[str, list[str]]]) -> list[str]:
    """'node: section: what' for every difference a reset cannot repair (node ->
    section -> differences, as `problems` gives)."""
    return [f"{node}: {line}" for node, sections in sorted(found.items())
            for section, lines in sections.items() if section not in REPAIRABLE
            for line in lines]
