"""The configuration schema as data: every key with its type, unit, default and doc.

`pathdiv.experiments.config.load` validates files and `--set` overrides against this tree, and the
README's key table is generated from it (`pathdiv keys`), so the three cannot drift.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pathdiv.experiments.config.checks as allowed
from pathdiv.experiments.config.planes import AUTO, plane_help
from pathdiv.experiments.config.planes import choices as plane_choices
from pathdiv.experiments.config.switching import MODES, SPRAYS, mode_help, mode_params
from pathdiv.experiments.config.workloads import PATTERNS, pattern_help
from pathdiv.kernels.abilities import KNOWN_CCS, LAB_SCHEDULERS
from pathdiv.topologies.paths import MAX_BACKGROUND_FLOWS, MAX_PATHS

Check = Callable[[Any], str | None]  # returns "what is allowed" when the value is bad


@dataclass(frozen=True)
class Leaf:
    """One configuration value."""

    kind: type | tuple[type, ...]
    default: Any
    doc: str
    choices: tuple[Any, ...] | None = None
    check: Check | None = None
    nullable: bool = False


@dataclass(frozen=True)
class Section:
    """A mapping with a fixed set of keys."""

    fields: dict[str, Leaf | Section | MapOf | ListOf]
    doc: str = ""


@dataclass(frozen=True)
class ListOf:
    """A list whose items all have the same shape (the events of a run)."""

    item: Section
    doc: str
    max_items: int = 1000


@dataclass(frozen=True)
class MapOf:
    """A mapping whose keys the user chooses (names of flow types, factors, levels)."""

    value: Leaf | Section | MapOf
    doc: str
    default: dict[str, Any] = field(default_factory=dict)
    key_pattern: str = r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$"
    min_items: int = 0  # an explicit {} with fewer entries is refused
    max_items: int = 1000


# Link condition keys: (type, doc, check). The tiers give them defaults; link overrides
# and `set` events change them per link or per direction (fabric/conditions.py).
CONDITION_KEYS: dict[str, tuple[type | tuple[type, ...], str, Check]] = {
    "bw_mbps": ((int, float), "link rate in Mbit/s (null: unshaped)", allowed.bw),
    "delay_ms": ((int, float), "one-way delay in ms added at each egress (needs netem: "
                 "hosts.kernel: lab)", allowed.delay),
    "jitter_ms": ((int, float), "delay variation in ms (netem: uniform within ±jitter_ms, "
                  "may reorder; needs delay_ms >= jitter_ms and hosts.kernel: lab)",
                  allowed.delay),
    "loss_pct": ((int, float), "random loss of IPv4 packets in percent, dropped on arrival "
                 "at the receiving end (nftables, any kernel)", allowed.loss),
    "queue_pkts": (int, "drop-tail queue length in packets at each egress", allowed.queue),
}
CONDITION_DEFAULTS: dict[str, Any] = {"delay_ms": 0, "jitter_ms": 0, "loss_pct": 0,
                                      "queue_pkts": 100}


def _link(bw_default: float | None) -> Section:
    fields: dict[str, Leaf | Section | MapOf | ListOf] = {}
    for key, (kind, doc, check) in CONDITION_KEYS.items():
        default = bw_default if key == "bw_mbps" else CONDITION_DEFAULTS[key]
        fields[key] = Leaf(kind, default, doc, check=check, nullable=key == "bw_mbps")
    return Section(fields, "shaping of one link tier, both directions")


def conditions_section(doc: str, unset: str) -> Section:
    """Every condition key, null = `unset` (link overrides, `set` events)."""
    return Section({key: Leaf(kind, None, f"{text}; null: {unset}", check=check,
                              nullable=True)
                    for key, (kind, text, check) in CONDITION_KEYS.items()}, doc)


_background_flows = allowed.Between(0, MAX_BACKGROUND_FLOWS, integer=True)


LINK_KEY_PATTERN = r"^[a-z]+[0-9]+[->][a-z]+[0-9]+$"


DVS = ("throughput_mbps", "goodput_mbps", "fct_s", "utilization")

SCHEMA = Section(
    {
        "name": Leaf(str, "experiment", "experiment name; results go to results/<name>-<time>/ "
                     "and Slurm jobs are named after it", check=allowed.plain_name_problem),
        "seed": Leaf(int, 1, "master seed: run order, host designations, ECMP hash seeds",
                     check=allowed.seed),
        "repetitions": Leaf((int, dict), 1, "repetitions of every factor combination, or "
                            "per flow type {query: 10, long: 2} (a flow type not named: 1; a "
                            "plan, repetitions x levels x flow types, has at most "
                            f"{allowed.MAX_RUNS} runs)", check=allowed.repetitions),
        "topology": Section(
            {
                "kind": Leaf(str, "fattree", "topology family: fattree = the k-ary fat "
                             "tree; paths = N disjoint bottleneck paths between two "
                             "dual-homed hosts (topology.paths; seed 003's testbed)",
                             choices=("fattree", "paths")),
                "k": Leaf(int, 4, "fat-tree arity (pods); k=4: 20 switches, 16 hosts; k=8: "
                          "80, 128; k=16: 320, 1,024 (above 8 on the lab kernel's virtual "
                          "clock only)",
                          check=allowed.even_k),
                "links": Section(
                    {"host": _link(20), "edge": _link(20), "core": _link(20)},
                    "per tier: host = host-edge, edge = edge-aggregation, "
                    "core = aggregation-core",
                ),
                "paths": ListOf(
                    Section(
                        {
                            **{key: Leaf(kind, None if key == "bw_mbps" else
                                         CONDITION_DEFAULTS[key], doc, check=check,
                                         nullable=key == "bw_mbps")
                               for key, (kind, doc, check) in CONDITION_KEYS.items()},
                            "background": Section(
                                {"flows": Leaf(int, 0, "long TCP downloads crossing only "
                                               "this bottleneck, for the whole run",
                                               check=_background_flows),
                                 "cc": Leaf(str, None, "their congestion control (null: "
                                            "hosts.cc; coupled ones run as their TCP "
                                            "form)", choices=KNOWN_CCS, nullable=True)},
                                "background TCP flows of this path"),
                        },
                        "one bottleneck path (kind: paths): the link ra<i>-rb<i>, both "
                        "directions, and its background flows",
                    ),
                    "kind paths: the bottlenecks, path 1 first; the client's address on "
                    "path i is an MPTCP subflow endpoint on its own interface (one subflow "
                    "per path); events name a bottleneck as ra<i>-rb<i>",
                    max_items=MAX_PATHS,
                ),
                "link_overrides": MapOf(
                    conditions_section("conditions of one link or one direction", "as its tier"),
                    "link name -> conditions replacing its tier's: 'a1-c1' both directions, "
                    "'a1>c1' only the direction from a1 to c1",
                    key_pattern=LINK_KEY_PATTERN,
                ),
            }
        ),
        "dataplane": Leaf(str, AUTO, plane_help(), choices=plane_choices()),
        "switching": Section(
            {
                "mode": Leaf(str, "ecmp", mode_help(), choices=tuple(MODES)),
                "spray": Leaf(str, "random", "per-packet choice when mode is spray",
                              choices=SPRAYS),
                **{p.key: Leaf(int, p.default, p.help,
                               check=allowed.Between(p.minimum, p.maximum, p.unit, integer=True))
                   for p in mode_params().values()},
                "ecn_threshold_pkts": Leaf(int, None, "switches mark ECN-capable packets CE "
                                           "when their egress queue holds at least this "
                                           "many packets (DCTCP's K), and drop other "
                                           "packets there; nftables plane: RED in ECN mode "
                                           "on every switch egress; bmv2: the egress "
                                           "queue depth (enq_qdepth); null = drop-tail "
                                           "only", check=allowed.ecn_threshold, nullable=True),
            }
        ),
        "hosts": Section(
            {
                "transport": Leaf(str, "tcp", "transport of every transfer",
                                  choices=("tcp", "mptcp")),
                "subflows": Leaf(int, 4, "MPTCP subflows per connection on the single "
                                 "interface (ndiffports)", check=allowed.subflows),
                "cc": Leaf(str, "cubic", "TCP congestion control (also for MPTCP subflows); "
                           "lia = RFC 6356 coupled control of MPTCP subflows, olia = "
                           "opportunistic linked increases (lab kernel; plain TCP runs "
                           "them as reno), coupled-bbr = BBR with coupled PROBE_BW "
                           "gains (lab kernel; plain TCP runs it as bbr)", choices=KNOWN_CCS),
                "kernel": Leaf(str, "host", "host: this machine's kernel; lab: the pathdiv lab "
                               "kernel (RB scheduler)", choices=("host", "lab")),
                "scheduler": Leaf(str, "default", "MPTCP packet scheduler "
                                  "(net.mptcp.scheduler); lab kernel: rb, roundrobin, "
                                  "rbstrict = rb without its stand-in (new data only "
                                  "on the pre-allocated subflow, waiting for its "
                                  "window room: the RB paper's pre-allocation), "
                                  "arp = AR&P (redundant subflows for bad paths, "
                                  "new packets by predicted arrival), ar = its "
                                  "AR part only, redundant = copies on every other "
                                  "subflow, minrtt = lowest RTT with room and, when "
                                  "the peer's window blocks, the slow subflow halved "
                                  "and the blocking data resent (MPTCP v0.94's "
                                  "default, the AR&P paper's baseline), minrtt-plain "
                                  "= minrtt without that; default is upstream's",
                                  choices=LAB_SCHEDULERS),
                "subflow_paths": Leaf(str, "hashed", "where MPTCP subflows go: hashed = "
                                      "kernel path manager, ECMP's hash decides; disjoint "
                                      "= source ports chosen so the hash puts them on "
                                      "distinct paths (switching.mode ecmp); eliminate = "
                                      "subflows whose path shares a fabric link with an "
                                      "earlier one are not opened",
                                      choices=("hashed", "disjoint", "eliminate")),
                "join_before_data": Leaf(bool, False, "MPTCP: a server sends a "
                                         "response's first byte only once all of the "
                                         "connection's subflows joined (at most 1 s), so "
                                         "they start together on empty queues (the "
                                         "counterfactual of seed 004's extra subflow "
                                         "elimination); false: they join while the first "
                                         "subflow already sends, as Linux's path managers "
                                         "open them once the connection is established"),
                "reordering": Leaf(str, "default", "how hosts' TCP tolerates reordering: "
                                   "default = the kernel's settings; tuned = a higher "
                                   "initial and maximum reordering degree and RACK without "
                                   "the duplicate-ACK threshold (net.ipv4.tcp_reordering, "
                                   "tcp_max_reordering, tcp_recovery, per namespace); gro "
                                   "= the lab kernel's reorder hold: a receiver holds the "
                                   "SACKs of out-of-order segments for up to "
                                   "hosts.reorder_hold_us (no packet is moved); juggler = "
                                   "the lab kernel's Juggler (Geng et al., EuroSys 2016): "
                                   "the host's interface receives through GRO, which puts "
                                   "each flow's segments back in order before TCP "
                                   "(hosts.juggler_*)",
                                   choices=("default", "tuned", "gro", "juggler")),
                "mptcp_d_alpha": Leaf((int, float), 1.3, "hosts.cc mptcp-d: an RTT sample "
                                      "above alpha x the subflow's lowest RTT is a "
                                      "significant change, which triggers link-sharing "
                                      "detection (the paper's Algorithm 1; 1.3 there)",
                                      check=allowed.mptcp_d_alpha),
                "mptcp_d_beta": Leaf((int, float), 0.1, "hosts.cc mptcp-d: a subflow whose "
                                     "changed RTT is within beta x its lowest RTT of the "
                                     "triggering RTT shares that subflow's link and has "
                                     "its window closed (0.1 in the paper)",
                                     check=allowed.mptcp_d_beta),
                "reorder_hold_us": Leaf(int, 1000, "bound of the reorder hold in µs "
                                        "(hosts.reordering: gro): at least the delay "
                                        "spread of the paths a flow is sprayed over",
                                        check=allowed.reorder_hold),
                "juggler_ooo_timeout_us": Leaf(int, 1000, "hosts.reordering: juggler: how "
                                               "long a segment beyond a hole waits for the "
                                               "missing data before the hole is taken as "
                                               "lost, in µs (net.core.juggler_ooo_timeout_"
                                               "us): at least the delay spread of the paths "
                                               "a flow is sprayed over",
                                               check=allowed.juggler_timeout),
                "juggler_inseq_timeout_us": Leaf(int, 0, "hosts.reordering: juggler: how "
                                                 "long in-order segments wait to go up in "
                                                 "larger batches, in µs (net.core.juggler_"
                                                 "inseq_timeout_us; 0: at the end of the "
                                                 "receive poll that brought them, as with "
                                                 "plain GRO)", check=allowed.juggler_timeout),
                "juggler_flows": Leaf(int, 8, "hosts.reordering: juggler: flows whose order "
                                      "each receive queue keeps (net.core.juggler_flows); a "
                                      "new flow evicts the least recently used (8: GRO's "
                                      "own bound, as Juggler's authors kept it)",
                                      check=allowed.juggler_flows),
            }
        ),
        "energy": Section(
            {
                "idle_watts": Leaf((int, float), 0.0, "power model: watts one host draws "
                                   "while a transfer it takes part in lasts, busy or not "
                                   "(0: count only the CPU work)", check=allowed.watts),
                "busy_watts_per_core": Leaf((int, float), 15.0, "power model: watts one "
                                            "core draws above idle while busy; a "
                                            "transfer's CPU seconds (client and server "
                                            "threads) times this is its busy energy",
                                            check=allowed.watts),
            },
            "energy_j = busy_watts_per_core x CPU seconds + idle_watts x FCT x hosts of "
            "the group (per run, run_energy_j: the hosts' CPU seconds and the traffic "
            "phase), on the real clock only (NaN on the virtual clock, where CPU work "
            "takes no time)",
        ),
        "lab": Section(
            {
                "clock": Leaf(str, "virtual", "clock of the lab kernel (hosts.kernel: lab): "
                              "virtual = User-Mode Linux time-travel, CPU work takes no "
                              "time and links are the only bottleneck; real = the wall "
                              "clock (for CPU-cost measures)", choices=("virtual", "real")),
                "memory_mb": Leaf((int, str), "auto", "memory of the lab kernel in MB, or "
                                  "auto: what the plan's largest network needs (the "
                                  "memory model of docs/benchmarks.md, \"Bigger fat "
                                  "trees\"), at least 1536; `pathdiv check` says what it "
                                  "chose, and refuses a plan this machine's RAM cannot "
                                  "hold", check=allowed.lab_memory),
                "own_boot_above_kb": Leaf(int, 128, "on the virtual clock, a run whose "
                                          "transfers are larger than this many KB (or "
                                          "whose pattern is open-loop) starts a boot of "
                                          "the lab kernel of its own, and so gives the "
                                          "same results wherever it stands in the plan; "
                                          "others follow the run before them in its boot "
                                          "(0: every run boots alone; docs/decisions/"
                                          "0008-network-reuse.md)",
                                          check=allowed.own_boot_kb),
            },
            "how lab-kernel runs execute",
        ),
        "network": Section(
            {
                "reuse": Leaf(bool, True, "runs that share topology, data plane and link "
                              "conditions reuse one built network (nftables plane): "
                              "between runs it is reset and verified, and rebuilt when "
                              "the check finds what a reset cannot undo; false = build "
                              "the network afresh for every run (on the virtual clock "
                              "both give the same results: docs/decisions/"
                              "0008-network-reuse.md; runs with "
                              "their own boot, lab.own_boot_above_kb, build their own)"),
            },
            "how runs share a built network",
        ),
        "workload": Section(
            {
                "pattern": Leaf(str, "silent", pattern_help(), choices=tuple(PATTERNS)),
                "flow_types": MapOf(
                    Leaf((str, int), None, "payload size", check=allowed.size_check),
                    "flow type name -> payload size of one transfer",
                    default={"query": "128KB", "short": "500KB", "long": "25MB"},
                    min_items=1, max_items=allowed.MAX_FLOW_TYPES,
                ),
                "iterations": Leaf(int, 4, "designation rounds per run (new pairs/groups each)",
                                   check=allowed.iterations),
                "requests": Leaf(int, 1, "requests per client per iteration",
                                 check=allowed.requests),
                "timeout_s": Leaf((int, float), 120, "a transfer not done by then fails",
                                  check=allowed.seconds),
                "measure_s": Leaf((int, float), 0, "topology.kind: paths only: the measured "
                                  "fetch reads for this many seconds and stops, a "
                                  "long-running flow (its flow type's size caps it); "
                                  "goodput is what it read over that time. 0: fetch the "
                                  "flow type's size", check=allowed.measure_s),
                "server_port": Leaf(int, 8080, "TCP port of the transfer server on every "
                                    "host", check=allowed.port),
                "load": Leaf((int, float), 0.5, "poisson: offered load per host as a "
                             "fraction of its access link rate", check=allowed.load_fraction),
                "sizes": Leaf(str, "websearch", "poisson: flow-size distribution: websearch "
                              "(DCTCP), datamining (VL2) or the path of a CDF file (lines "
                              "'<bytes> <cumulative probability>'; relative to the config's "
                              "folder; a regular file of at most 1 MB reached through no "
                              "symbolic link)", check=allowed.sizes),
                "max_size": Leaf((str, int), None, "poisson: sizes above this are cut to it "
                                 "(null: no cut)", check=allowed.size_check, nullable=True),
                "duration_s": Leaf((int, float), 10, "poisson: length of the arrival "
                                   "window (iterations are not used)", check=allowed.seconds),
                "background": Section(
                    {
                        "pattern": Leaf(str, "none", "none; poisson: open-loop flows between "
                                        "random hosts (sizes from workload.sizes); "
                                        "permutation: each host fetches 1MB chunks from a "
                                        "fixed partner at Poisson times",
                                        choices=("none", "poisson", "permutation")),
                        "load": Leaf((int, float), 0.3, "offered load per host as a fraction "
                                     "of its access link rate", check=allowed.load_fraction),
                        "port": Leaf(int, 8081, "TCP port of the background servers",
                                     check=allowed.port),
                    },
                    "load under the measured workload: in the captures, not in transfers.csv "
                    "(its flows go to background.csv)",
                ),
                "rpc": Section(
                    {
                        "rate_per_s": Leaf((int, float), 0, "requests per second per host, "
                                           "Poisson (0: no request/response traffic)",
                                           check=allowed.rpc_rate),
                        "connections": Leaf(int, 1, "persistent connections per host, each "
                                            "to a random other host", check=allowed.connections),
                        "request_size": Leaf((str, int), "100B", "bytes of one request",
                                             check=allowed.size_check),
                        "response_size": Leaf((str, int), "1KB", "bytes of one response",
                                              check=allowed.size_check),
                        "port": Leaf(int, 8082, "TCP port of the request/response servers",
                                     check=allowed.port),
                    },
                    "request/response (memcached-like) beside the measured workload; per "
                    "request latency goes to requests.csv",
                ),
                "designations": Leaf(str, "per_run", "per_run: every run draws its own "
                                     "client/server designations from its seed; "
                                     "per_repetition: every factor level of a repetition "
                                     "(and flow type) gets the same draws, so the levels "
                                     "are compared paired",
                                     choices=("per_run", "per_repetition")),
            }
        ),
        "events": ListOf(
            Section(
                {
                    "at_s": Leaf((int, float), None, "seconds after the workload starts",
                                 check=allowed.at_s),
                    "link": Leaf(str, None, "link name such as a1-c1 (a1>c1: one direction, "
                                 "for set only)"),
                    "action": Leaf(str, None, "down: both ends drop every packet that arrives "
                                   "(routes stay, as before routing reacts); up: restored",
                                   choices=("down", "up"), nullable=True),
                    "set": conditions_section("new conditions of the link from then on",
                                              "unchanged"),
                },
                "one change of one link",
            ),
            "changes applied while the workload runs, each with action or set; recorded "
            "with their actual times in the manifest",
            max_items=allowed.MAX_EVENTS,
        ),
        "capture": Section(
            {
                "enabled": Leaf(bool, True, "capture packet headers on every link"),
                "snaplen": Leaf(int, 96, "bytes kept per packet; 96 holds every header the "
                                "metrics read (Ethernet 14 + IPv4 20 + TCP with options <= 60)",
                                check=allowed.snaplen),
                "budget_mb": Leaf((int, str), "auto", "MB the captures of one run may "
                                  "write, all links together; auto: what the run's "
                                  "transfers need (payload / MSS x transfers x hops x "
                                  "(snaplen + 16)); each link's file is capped at its own "
                                  "need, and a budget below a run's need is refused at "
                                  "`pathdiv check`", check=allowed.budget),
                "links": Leaf(str, "all", "which links are captured: all (every link); "
                              "access: each host's own link only, enough for FCT, "
                              "goodput, subflows, retransmissions and RTT (throughput's "
                              "wire bytes, excess, utilization and link sharing need the "
                              "fabric's links and are left empty); a third of a fat "
                              "tree's captures, for the largest ones (the manifest's "
                              "capture.start says which)", choices=("all", "access")),
                "cc_trace_ms": Leaf((int, float), 0, "topology.kind: paths only: every "
                                    "this many ms (of the run's clock) each sender's TCP "
                                    "sockets' congestion-control state (cwnd, pacing "
                                    "rate, BBR's bandwidth estimate, min RTT and gains) "
                                    "is sampled into cc_trace.jsonl beside the captures; "
                                    "0: off", check=allowed.cc_trace_ms),
                "tool": Leaf(str, "auto", "the capturing program: linkcap (pathdiv's own, "
                             "one process for every link; built with the C compiler on "
                             "first use), tcpdump (one process per link), or auto: "
                             "linkcap where it can be built, else tcpdump; both write the "
                             "same pcap files", choices=("auto", "linkcap", "tcpdump")),
            }
        ),
        "fidelity": Section(
            {
                "enabled": Leaf(bool, True, "sample host CPU, qdiscs and TCP timeouts during "
                                "each run's traffic and give it a verdict (docs/fidelity.md)"),
                "sample_interval_s": Leaf((int, float), 0.05, "seconds between qdisc samples "
                                          "(a slow egress is seen only where its queue "
                                          "holds more than its rate sends in one "
                                          "interval: docs/fidelity.md)",
                                          check=allowed.sample_interval),
                "steal_degraded_pct": Leaf((int, float), 3, "CPU stolen by the hypervisor "
                                           "during traffic (percent, mean of the cores) from "
                                           "which a run is degraded", check=allowed.percent),
                "steal_invalid_pct": Leaf((int, float), 10, "steal (percent) from which a run "
                                          "is invalid", check=allowed.percent),
                "link_rate_degraded": Leaf((int, float), 0.9, "a backlogged link sending "
                                           "below this fraction of its rate makes the run "
                                           "degraded", check=allowed.fraction),
                "link_rate_invalid": Leaf((int, float), 0.75, "below this fraction of its "
                                          "rate: invalid", check=allowed.fraction),
                "min_backlogged_s": Leaf((int, float), 1.0, "seconds a link must surely "
                                         "have been backlogged (the bytes its queue held, "
                                         "at its rate) before its rate is judged",
                                         check=allowed.min_backlogged),
                "rto_degraded": Leaf(int, 3, "TCP timeouts beyond the qdisc drops (all hosts) "
                                     "from which a run is degraded", check=allowed.rtos),
                "rto_invalid": Leaf(int, 20, "unexplained TCP timeouts from which a run is "
                                    "invalid", check=allowed.rtos),
                "max_repeats": Leaf(int, 2, "times an invalid run is repeated (earlier "
                                    "attempts kept in runs/<run_id>/attempt-<n>/)",
                                    check=allowed.max_repeats),
            },
            "fidelity monitor and verdict of real-clock runs",
        ),
        "factors": MapOf(
            MapOf(
                MapOf(Leaf((str, int, float, bool, dict), None, "override value, or for "
                           "applies_to {other factor: [levels]}", nullable=True),
                      "dotted config key -> value; applies_to: {other factor: [levels]} "
                      "where this level acts (analysis/stats/scope.py)",
                      key_pattern=r"^([a-z_]+(\.([a-z_]+|[0-9])){1,5}|applies_to)$", max_items=50),
                "level name -> overrides",
                min_items=1, max_items=allowed.MAX_LEVELS,
            ),
            "factor name -> levels; the plan crosses all factors",
            max_items=allowed.MAX_FACTORS,
        ),
        "analysis": Section(
            {
                "clusters": Leaf(list, ["condition", "flow_type"], "columns that split the "
                                 "data into test clusters", check=allowed.names),
                "ivs": Leaf(list, None, "independent variables: one or two factor names; null: "
                            "the config's factors", nullable=True, check=allowed.names),
                "dvs": Leaf(list, list(DVS), "dependent variables (metrics.csv columns)",
                            check=allowed.names),
                "alpha": Leaf(float, 0.05, "significance level", check=allowed.probability),
                "reference": Leaf((str, list), None, "the published study (or list of "
                                  "studies) this config reproduces: files of "
                                  "analysis/references/ (seed001, seed000); the report "
                                  "puts their figures beside ours", nullable=True,
                                  check=allowed.reference),
                "lower_is_better": Leaf(list, None, "metrics where a smaller value is the "
                                        "better outcome (rankings, a reference's claims "
                                        "of kind better); null: fct_s, excess_pct, "
                                        "retrans_pct, reorder_pct", nullable=True,
                                        check=allowed.names),
                "min_effect_pct": Leaf((int, float), 1.0, "smallest effect of interest, in "
                                       "percent of the compared mean: the summary separates "
                                       "significant effects at least this large from "
                                       "significant but negligible ones, and a claim of no "
                                       "difference is judged within +- this margin",
                                       check=allowed.percent),
                "compare": Leaf(list, None, "comparisons of interest the report's summary "
                                "answers first: pairs [a, b] of levels of one factor, a "
                                "against b, optionally with the other factors' levels "
                                "the comparison holds, [a, b, {factor: level or "
                                "[levels]}]; null: each factor's levels against its first",
                                nullable=True, check=allowed.pairs),
            }
        ),
    }
)


def iter_leaves(
    node: Leaf | Section | MapOf | ListOf = SCHEMA, prefix: str = ""
) -> list[tuple[str, Leaf | MapOf]]:
    """(dotted key, leaf) for every documented key; map values are shown as <name>
    when they are sections, list items as []."""
    out: list[tuple[str, Leaf | MapOf]] = []
    if isinstance(node, Section):
        for key, child in node.fields.items():
            out += iter_leaves(child, f"{prefix}.{key}" if prefix else key)
    elif isinstance(node, ListOf):
        out += iter_leaves(node.item, f"{prefix}[]")
    elif isinstance(node, MapOf) and isinstance(node.value, Section):
        out += iter_leaves(node.value, f"{prefix}.<name>")
    elif isinstance(node, MapOf):
        out.append((prefix, node))
    else:
        out.append((prefix, node))
    return out
