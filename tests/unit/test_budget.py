"""Capture budget from the plan: packets per transfer, per link and per run; a budget too
small is refused naming the key, the value and the size needed; no link is left short."""

import math

import pytest

from pathdiv.experiments.config.load import ConfigError, load, validate
from pathdiv.experiments.plan.budget import (
    DISK_MARGIN_MB,
    MIN_FILE_PACKETS,
    budget_problems,
    disk_shortfall,
    mss,
    packet_bytes,
    run_need,
    transfer_packets,
    transfers,
)
from pathdiv.experiments.plan.designations import rounds
from pathdiv.experiments.plan.runs import expand
from pathdiv.topologies.model import Tier


def cfg(pattern="noisy", budget="auto", size="2MB", transport="tcp", **workload):
    return validate({
        "seed": 3, "dataplane": "kernel", "hosts": {"transport": transport, "kernel": "host"},
        "workload": {"pattern": pattern, "flow_types": {"long": size}, "iterations": 1,
                     **workload},
        "capture": {"snaplen": 96, "budget_mb": budget},
    })


def test_segments_follow_the_mss_and_mptcp_has_a_smaller_one():
    assert mss("tcp") == 1448 and mss("mptcp") == 1428
    one = transfer_packets(1448, "tcp", 1)
    two = transfer_packets(1449, "tcp", 1)
    assert two > one  # one byte more is one segment more (and its ACK)
    assert transfer_packets(10**6, "mptcp", 4) > transfer_packets(10**6, "tcp", 1)


def test_a_run_writes_each_transfer_once_per_hop():
    c = cfg(pattern="silent")
    need = run_need(c, "long", seed=9)
    topo = c.topology()
    per = transfer_packets(2_000_000, "tcp", 1)
    hops = sum(len(topo.paths(r.servers[0], r.client)[0]) - 1
               for rnd in rounds("silent", topo.hosts, 9, 1, 1) for r in rnd)
    assert need.total_packets == per * hops
    assert need.total_bytes == need.total_packets * packet_bytes(96) + 48 * 24


def test_the_client_link_of_a_fan_in_gets_the_whole_fan_in():
    c = cfg()
    need = run_need(c, "long", seed=9)
    per = transfer_packets(2_000_000, "tcp", 1)
    topo = c.topology()
    for rnd in rounds("noisy", topo.hosts, 9, 1, 1):
        for req in rnd:  # a client fetching from 7 servers: its access link sees all 7
            client_link = topo.links_of(req.client)[0].b.intf
            assert need.link_packets[client_link] == per * len(req.servers)
    # the old equal share of a budget that covers the whole run leaves that link short
    equal = int(need.total_mb * 1e6) // len(topo.links) // packet_bytes(96)
    assert equal < max(need.link_packets.values())


def test_caps_cover_every_link_and_grow_with_the_budget_slack():
    need = run_need(cfg(), "long", seed=9)
    exact = need.caps(need.total_mb)
    assert all(exact[i] >= max(n, MIN_FILE_PACKETS) for i, n in need.link_packets.items())
    double = need.caps(2 * need.total_mb)
    busiest = max(need.link_packets, key=need.link_packets.get)
    assert double[busiest] == math.ceil(2 * need.link_packets[busiest])


def test_a_budget_below_the_need_is_refused_naming_key_value_and_size():
    c = cfg(budget=5)
    runs = expand(c)
    need = math.ceil(run_need(runs[0].config, "long", runs[0].workload_seed).total_mb)
    (problem,) = budget_problems(runs)
    assert problem.startswith("capture.budget_mb: 5 is too small")
    assert f"needs {need} MB at snaplen 96" in problem and "or to auto" in problem
    assert budget_problems(expand(cfg(budget=need))) == []
    assert budget_problems(expand(cfg(budget="auto"))) == []


def test_captures_past_a_disk_name_the_access_links_when_they_would_fit():
    """A k=16 noisy long run: every link's captures need more than a run may write, the
    hosts' links alone do not; the refusal names that setting and its size."""
    c = load("configs/noisy.yaml", ["topology.k=16", "workload.iterations=1"])
    long = next(r for r in expand(c, repetitions=1) if r.flow_type == "long")
    (problem,) = budget_problems([long])
    access = c.with_overrides([("capture.links", "access")])
    mb = math.ceil(run_need(access, "long", long.workload_seed).total_mb)
    assert f"set capture.links: access (the hosts' links alone: {mb} MB)" in problem
    assert budget_problems([r for r in expand(access, repetitions=1)
                            if r.run_id == long.run_id]) == []


def test_budget_accepts_auto_or_a_positive_integer_only():
    with pytest.raises(ConfigError, match=r"capture.budget_mb: 'lots' is not allowed; expected "
                       r"an integer number of MB from 1 to 50000, or auto"):
        cfg(budget="lots")
    with pytest.raises(ConfigError, match=r"capture.budget_mb: 0 is not allowed"):
        cfg(budget=0)


@pytest.mark.parametrize("name", ["noisy", "silent"])
def test_the_reference_configs_lose_no_observation(name):
    runs = expand(load(f"configs/{name}.yaml"))
    assert budget_problems(runs) == []
    assert runs[0].config.data["capture"]["budget_mb"] == "auto"


def test_a_run_is_started_only_where_its_captures_fit_with_room_to_spare():
    assert disk_shortfall(1571.0, 1571.0 + DISK_MARGIN_MB, "results") is None
    why = disk_shortfall(1571.0, 900.0, "results/noisy")
    assert why is not None
    for part in ("900 MB free under results/noisy", "up to 1571 MB", "capture.budget_mb",
                 "capture.enabled: false", "--out DIR"):
        assert part in why


def test_a_run_without_room_fails_before_anything_is_built(tmp_path, monkeypatch):
    from pathdiv.experiments.execute import run as one_run

    run = expand(cfg(), repetitions=1)[0]
    built = []
    monkeypatch.setattr(one_run, "free_mb", lambda path: 50.0)
    monkeypatch.setattr(one_run, "preflight", lambda c: built.append(c))
    manifest = one_run.execute_run(run, tmp_path / "runs" / run.run_id)
    assert manifest["status"] == "failed"
    assert manifest["error"].startswith("DiskFull: disk: 50 MB free")
    assert built == []  # nothing was started: no preflight, no network
    assert not (tmp_path / "runs" / run.run_id / "captures").exists()


def test_free_space_is_read_where_the_folder_will_be(tmp_path):
    from pathdiv.experiments.execute.run import free_mb

    # the same file system; other writers may move its free space by a little between reads
    assert free_mb(tmp_path) > 0
    assert free_mb(tmp_path / "not" / "yet") == pytest.approx(free_mb(tmp_path), abs=100)


def brute_force_need(c, seed):
    """The need as every equal-cost path of every transfer says (the definition)."""
    topo = c.topology()
    captured = {lk.b.intf for lk in topo.links
                if c.captured_links == "all" or lk.tier is Tier.HOST}
    links = dict.fromkeys(captured, 0)
    total = 0
    for client, server, size in transfers(c, "long", seed):
        packets = transfer_packets(size, c.transport, c.subflows)
        paths = topo.paths(server, client)
        intfs = {lk.b.intf for p in paths for lk in topo.path_links(p)}
        mine = intfs & captured  # a packet is written once per captured link it crosses
        total += packets * (len(paths[0]) - 1 if mine == intfs else len(mine))
        for intf in mine:
            links[intf] += packets
    return links, total


@pytest.mark.parametrize("pattern,links,transport", [
    ("noisy", "all", "tcp"), ("silent", "all", "mptcp"), ("permutation", "all", "tcp"),
    ("permutation", "access", "mptcp"), ("noisy", "access", "tcp")])
def test_the_need_per_link_is_what_the_pairs_paths_say(pattern, links, transport):
    c = cfg(pattern=pattern, transport=transport).with_overrides([("capture.links", links)])
    need = run_need(c, "long", seed=5)
    expected, total = brute_force_need(c, 5)
    assert need.link_packets == expected
    assert need.total_packets == total


def test_k16_need_grows_with_transfers_and_links_not_paths(monkeypatch):
    """A k=16 permutation run (1,024 transfers, 64 equal-cost paths each across the core)
    with every link captured: no path is enumerated, each transfer and each link is looked
    up a bounded number of times, and the need is the structure's."""
    from pathdiv.topologies.fattree import FatTree

    plan = expand(load("configs/permutation.yaml", ["topology.k=16", "capture.links=all"]),
                  repetitions=1)
    run = next(r for r in plan if r.factors["transport"] == "ecmp-tcp")
    c, seed = run.config, run.workload_seed
    calls = []
    subtree = FatTree.subtree

    def counted(self, node, tier):
        calls.append(node)
        return subtree(self, node, tier)

    def no_paths(self, src, dst):
        raise AssertionError("path enumerated")

    monkeypatch.setattr(FatTree, "subtree", counted)
    monkeypatch.setattr(FatTree, "paths", no_paths)
    need = run_need(c, "long", seed)
    topo = c.topology()
    moves = transfers(c, "long", seed)
    assert len(moves) == 1024 and len(topo.links) == 3072
    # three tiers, two ends each, per transfer, then one lookup per link: 9,216 here,
    # where the paths' links number 1,024 x 64 x 6 = 393,216
    assert len(calls) <= 2 * 3 * 2 * len(moves) + len(topo.links)
    per = transfer_packets(c.flow_sizes()["long"], "tcp", 1)
    pod = {h: topo.nodes[h].pod for h in topo.hosts}
    across = sum(1 for client, server, _ in moves if pod[client] != pod[server])
    core = [lk.b.intf for lk in topo.links if lk.tier is Tier.CORE]
    # every host fetches once and serves once: its access link carries two transfers
    assert {need.link_packets[lk.b.intf] for lk in topo.links if lk.tier is Tier.HOST} \
        == {2 * per}
    # a transfer across the core may cross every core link of its two pods (8 x 8 each)
    assert sum(need.link_packets[i] for i in core) == across * 2 * 64 * per
    assert need.total_packets > 6 * across * per
