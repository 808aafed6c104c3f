"""The parallel-paths topology (topology.kind: paths) as a user reads it: nodes, links,
addresses, routes, the commands that build it and change it, and `pathdiv check`'s
answers about it."""

from __future__ import annotations

import ipaddress

import pytest

from pathdiv.experiments import api
from pathdiv.experiments.cli import main
from pathdiv.experiments.config.load import ConfigError, validate
from pathdiv.experiments.fabric.paths_net import build_commands, event_commands
from pathdiv.experiments.plan.runs import expand
from pathdiv.topologies.conditions import ConditionError, parse_link, resolve
from pathdiv.topologies.model import LinkParams, Role, Tier
from pathdiv.topologies.paths import ParallelPaths, PathsError, PathSpec

FIG8 = (PathSpec(LinkParams(100, 25, 100), 2, "bbr"),
        PathSpec(LinkParams(100, 25, 100, loss_pct=1), 2, "bbr"))


def lab_config(**topology) -> dict:
    return {"name": "t", "topology": {"kind": "paths", **topology},
            "hosts": {"transport": "mptcp", "cc": "coupled-bbr", "kernel": "lab",
                      "scheduler": "arp"},
            "workload": {"pattern": "silent", "flow_types": {"long": "4MB"}}}


def problems_of(raw: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        validate(raw)
    return info.value.problems


def test_two_paths_with_background_have_the_papers_testbed():
    topo = ParallelPaths(FIG8)
    # Fig. 2: an MPTCP client and server, a TCP pair per path, four routers
    assert sorted(topo.switches) == ["ra1", "ra2", "rb1", "rb2"]
    assert sorted(topo.hosts) == ["bc1", "bc2", "bs1", "bs2", "h1", "h2"]
    assert all(topo.nodes[r].role is Role.ROUTER for r in topo.switches)
    bottlenecks = [lk for lk in topo.links if lk.tier is Tier.BOTTLENECK]
    assert [lk.name for lk in bottlenecks] == ["ra1-rb1", "ra2-rb2"]
    assert bottlenecks[1].params.loss_pct == 1 and bottlenecks[0].params.loss_pct == 0
    # access links are unshaped: only the bottleneck shapes
    assert all(lk.params == LinkParams() for lk in topo.links if lk.tier is Tier.HOST)


def test_each_path_is_disjoint_and_background_crosses_only_its_own_bottleneck():
    topo = ParallelPaths(FIG8)
    paths = topo.paths("h2", "h1")
    assert paths == [("h2", "rb1", "ra1", "h1"), ("h2", "rb2", "ra2", "h1")]
    links = [set(lk.name for lk in topo.path_links(p)) for p in paths]
    assert not links[0] & links[1]
    background = topo.path_links(topo.paths("bs2", "bc2")[0])
    assert [lk.name for lk in background if lk.tier is Tier.BOTTLENECK] == ["ra2-rb2"]


def test_the_client_has_one_address_and_interface_per_path_each_a_subflow_endpoint():
    topo = ParallelPaths((*FIG8, PathSpec(LinkParams(20, 5))))
    assert topo.host_addresses("h1") == ["10.1.1.2", "10.2.1.2", "10.3.1.2"]
    assert topo.subflow_endpoints() == [("10.2.1.2", "h1-eth1"), ("10.3.1.2", "h1-eth2")]
    assert [lk.a.intf for lk in topo.links_of("h1")] == ["h1-eth0", "h1-eth1", "h1-eth2"]
    assert topo.path_of_address("10.3.1.2") == 3 and topo.path_of_address("10.0.0.2") is None
    # every interface's address lies in its path's /16 and is unique
    addrs = topo.interface_addresses()
    assert len(set(addrs.values())) == len(addrs) == len(topo.interfaces)
    for intf, cidr in addrs.items():
        link = topo.link_of_intf(intf)
        path = int(link.b.node[2:]) if link.b.node[:2] in ("ra", "rb") else None
        assert (path is not None and ipaddress.ip_interface(cidr) in \
            ipaddress.ip_network(f"10.{path}.0.0/16")) or False, (intf, cidr)


def test_routes_send_each_client_address_over_its_own_path():
    topo = ParallelPaths(FIG8)
    client = topo.routes()["h1"]
    by_source = {r.source: (r.dev, r.via) for r in client if r.source}
    assert by_source == {"10.1.1.2": ("h1-eth0", "10.1.1.1"),
                         "10.2.1.2": ("h1-eth1", "10.2.1.1")}
    server = {r.prefix: r.dev for r in topo.routes()["h2"]}
    assert server == {"10.1.0.0/16": "h2-eth0", "10.2.0.0/16": "h2-eth1"}
    # the server-side router of path 2 hands the service address to h2's path-2 interface
    rb2 = {r.prefix: (r.dev, r.via) for r in topo.routes()["rb2"]}
    assert rb2["10.0.0.2/32"] == ("rb2-eth0", "10.2.2.2")


def test_build_commands_shape_both_directions_of_each_bottleneck():
    topo = ParallelPaths(FIG8)
    cmds = build_commands(topo)
    netem = [(ns, argv) for ns, argv in cmds if "netem" in argv]
    assert sorted((ns, argv[argv.index("dev") + 1]) for ns, argv in netem) == [
        ("pdp-ra1", "ra1-eth1"), ("pdp-ra2", "ra2-eth1"), ("pdp-rb1", "rb1-eth1"),
        ("pdp-rb2", "rb2-eth1")]
    lossy = [argv for ns, argv in netem if ns in ("pdp-ra2", "pdp-rb2")]
    assert all("loss" in a and a[a.index("loss") + 1] == "1%" for a in lossy)
    assert all("loss" not in a for ns, a in netem if ns in ("pdp-ra1", "pdp-rb1"))
    tbf = [argv for _, argv in cmds if "tbf" in argv]
    assert len(tbf) == 4 and all(a[a.index("rate") + 1] == "100mbit" for a in tbf)
    assert all(a[a.index("limit") + 1] == str(100 * 1514) for a in tbf)
    endpoints = [argv for ns, argv in cmds if argv[:3] == ["ip", "mptcp", "endpoint"]]
    assert endpoints == [["ip", "mptcp", "endpoint", "add", "10.2.1.2", "dev", "h1-eth1",
                          "subflow"]]


def test_events_change_a_bottleneck_and_down_then_up_restores_it():
    topo = ParallelPaths(FIG8)
    current = {i: topo.specs[i - 1].params for i in topo.path_numbers}
    cmds = event_commands(topo, current, {"link": "ra2-rb2", "set": {"bw_mbps": 10,
                                                                      "delay_ms": None}})
    assert current[2].bw_mbps == 10 and current[2].delay_ms == 25
    assert {ns for ns, _ in cmds} == {"pdp-ra2", "pdp-rb2"}
    assert all(a[2] == "change" for _, a in cmds)
    down = event_commands(topo, current, {"link": "ra2-rb2", "action": "down"})
    assert any("100%" in a for _, a in down)
    up = event_commands(topo, current, {"link": "ra2-rb2", "action": "up"})
    assert all("100%" not in a for _, a in up) and current[2].bw_mbps == 10
    with pytest.raises(KeyError, match="ra<i>-rb<i>"):
        event_commands(topo, current, {"link": "h1-ra1", "set": {"loss_pct": 5}})


def test_an_unshaped_path_that_gets_a_rate_adds_its_queue():
    topo = ParallelPaths((PathSpec(LinkParams(None, 5)), PathSpec(LinkParams(10, 5))))
    current = {1: topo.specs[0].params, 2: topo.specs[1].params}
    cmds = event_commands(topo, current, {"link": "ra1-rb1", "set": {"bw_mbps": 10}})
    assert [a[2] for _, a in cmds if "tbf" in a] == ["add", "add"]


def test_link_names_and_overrides_resolve_on_the_paths_topology():
    topo = ParallelPaths(FIG8)
    link, dirs = parse_link(topo, "rb2>ra2")
    assert link.name == "ra2-rb2" and dirs == [("rb2", "ra2")]
    conds = resolve(topo, {"rb2>ra2": {"bw_mbps": 5}})
    assert conds[("rb2", "ra2")].bw_mbps == 5 and conds[("ra2", "rb2")].bw_mbps == 100
    with pytest.raises(ConditionError, match="2-path topology"):
        parse_link(topo, "a1-c1")


@pytest.mark.parametrize("count", [0, 9])
def test_the_number_of_paths_is_bounded(count):
    with pytest.raises(PathsError, match="between 1 and 8"):
        ParallelPaths(tuple(PathSpec() for _ in range(count)))


def test_check_accepts_the_papers_setting_and_builds_its_object():
    cfg = validate(lab_config(paths=[
        {"bw_mbps": 100, "delay_ms": 25, "background": {"flows": 2, "cc": "bbr"}},
        {"bw_mbps": 100, "delay_ms": 25, "loss_pct": 1, "background": {"flows": 2}}]))
    topo = cfg.topology()
    assert isinstance(topo, ParallelPaths)
    assert topo.specs[1] == PathSpec(LinkParams(100.0, 25.0, 100, loss_pct=1.0), 2, None)
    assert topo.specs[0].background_cc == "bbr"


@pytest.mark.parametrize(("change", "key", "said"), [
    ({"paths": [{"bw_mbps": -3}]}, "topology.paths[0].bw_mbps", "-3"),
    ({"paths": [{"loss_pct": 100}]}, "topology.paths[0].loss_pct", "< 100"),
    ({"paths": [{"background": {"flows": 99}}]}, "topology.paths[0].background.flows",
     "<= 16"),
    ({"paths": [{"background": {"cc": "vegas2"}}]}, "topology.paths[0].background.cc",
     "bbr"),
    ({"paths": []}, "topology.paths", "1..8"),
    ({"paths": [{}] * 9}, "topology.paths", "9"),
    ({"paths": [{"delay_ms": 1, "jitter_ms": 2}]}, "topology.paths[0].jitter_ms",
     "jitter_ms <= delay_ms"),
])
def test_check_names_the_key_the_value_and_what_is_allowed(change, key, said):
    problems = problems_of(lab_config(**change))
    assert any(p.startswith(key) and said in p for p in problems), problems


def test_paths_need_the_lab_kernel_and_no_fat_tree_keys():
    raw = lab_config(paths=[{}, {}])
    raw["hosts"]["kernel"] = "host"
    assert any(p.startswith("hosts.kernel: 'host'") and "allowed: lab" in p
               for p in problems_of(raw))
    fat = lab_config(paths=[{}, {}])
    fat["topology"]["kind"] = "fattree"
    assert any(p.startswith("topology.paths: 2 paths given with topology.kind: fattree")
               for p in problems_of(fat))
    overridden = lab_config(paths=[{}, {}], link_overrides={"ra1-rb1": {"loss_pct": 1}})
    assert any(p.startswith("topology.link_overrides") for p in problems_of(overridden))


def test_a_long_running_fetch_and_the_cc_trace_are_for_paths_within_the_timeout():
    raw = lab_config(paths=[{}, {}])
    raw["workload"].update(measure_s=40, timeout_s=120)
    raw["capture"] = {"cc_trace_ms": 10}
    cfg = validate(raw)
    assert cfg.data["workload"]["measure_s"] == 40
    assert cfg.data["capture"]["cc_trace_ms"] == 10
    raw["workload"]["timeout_s"] = 30
    assert "workload.measure_s: 40 is longer than workload.timeout_s (30); allowed: " \
        "measure_s <= timeout_s" in problems_of(raw)
    fat = lab_config(paths=[])
    fat["topology"]["kind"] = "fattree"
    fat["workload"]["measure_s"] = 40
    fat["capture"] = {"cc_trace_ms": 5}
    problems = problems_of(fat)
    assert "workload.measure_s: 40 with topology.kind: fattree; it is for kind: paths " \
        "(allowed here: 0)" in problems
    assert any(p.startswith("capture.cc_trace_ms: 5 with topology.kind: fattree")
               for p in problems)


def test_events_must_name_a_link_of_the_paths_topology():
    raw = lab_config(paths=[{}, {}])
    raw["events"] = [{"at_s": 15, "link": "a1-c1", "set": {"loss_pct": 50}}]
    assert any(p.startswith("events[0].link") and "2-path topology" in p
               for p in problems_of(raw))
    raw["events"] = [{"at_s": 15, "link": "ra2-rb2", "set": {"loss_pct": 50}}]
    validate(raw)


def test_a_factor_level_changes_one_path_by_its_index():
    raw = lab_config(paths=[{"bw_mbps": 20}, {"bw_mbps": 20}])
    raw["factors"] = {"loss": {"none": {}, "one": {"topology.paths.1.loss_pct": 1}}}
    runs = {r.factors["loss"]: r.config.topology() for r in expand(validate(raw))}
    assert [s.params.loss_pct for s in runs["one"].specs] == [0, 1]
    assert [s.params.loss_pct for s in runs["none"].specs] == [0, 0]
    raw["factors"]["loss"]["bad"] = {"topology.paths.1.loss_pct": 120}
    assert any("factors.loss.bad" in p and "loss_pct" in p for p in problems_of(raw))


@pytest.mark.parametrize("command", ["net", "probe"])
def test_net_and_probe_refuse_the_paths_topology_by_name(command, capsys):
    assert main([command, "configs/seed003-fig10.yaml"]) != 0
    err = capsys.readouterr().err
    assert "topology.kind: 'paths'" in err and "allowed: fattree" in err


def test_the_live_network_refuses_the_paths_topology_before_building():
    with pytest.raises(ConfigError, match=r"topology.kind: 'paths': `api.network` builds "
                                          r"the fat tree only \(allowed: fattree\)"):
        with api.network("configs/seed003-fig10.yaml"):
            pass
