"""Link conditions: config keys and their error text, per-direction resolution, and the
tc/nft command lines that set them (pure, no root)."""

from __future__ import annotations

import pytest

from pathdiv.experiments.config.load import ConfigError, validate
from pathdiv.experiments.fabric.conditions import (
    change_commands,
    link_state_commands,
    netem_keys,
    node_commands,
)
from pathdiv.topologies.conditions import resolve
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.model import LinkParams


def problems(raw) -> list[str]:
    with pytest.raises(ConfigError) as info:
        validate(raw)
    return info.value.problems


def test_every_condition_key_is_validated_with_key_value_and_allowed():
    msgs = problems({"topology": {"links": {"core": {
        "bw_mbps": 0, "delay_ms": -1, "jitter_ms": -2, "loss_pct": 100, "queue_pkts": 0}}}})
    assert msgs == [
        "topology.links.core.bw_mbps: 0 is not allowed; expected a number > 0 and <= 100000 "
        "(Mbit/s)",
        "topology.links.core.delay_ms: -1 is not allowed; expected a number >= 0 and <= 10000 "
        "(ms)",
        "topology.links.core.jitter_ms: -2 is not allowed; expected a number >= 0 and <= "
        "10000 (ms)",
        "topology.links.core.loss_pct: 100 is not allowed; expected a percentage "
        "0 <= loss_pct < 100",
        "topology.links.core.queue_pkts: 0 is not allowed; expected an integer >= 1 and <= "
        "100000 (packets)",
    ]


def test_an_unknown_link_name_lists_valid_ones():
    (msg,) = problems({"topology": {"link_overrides": {"a1-c9": {"loss_pct": 1}}}})
    assert msg.startswith("topology.link_overrides.a1-c9: 'a1-c9' is not a link of the k=4 "
                          "fat tree; links are named lower-upper, e.g. h1-e1, h2-e1, e1-a1")
    (msg,) = problems({"topology": {"link_overrides": {"a1+c1": {"loss_pct": 1}}}})
    assert msg.startswith("topology.link_overrides.a1+c1: the name 'a1+c1' is not allowed")


def test_override_values_are_checked_like_tier_values():
    (msg,) = problems({"topology": {"link_overrides": {"a1-c1": {"loss_pct": "a lot"}}}})
    assert msg == "topology.link_overrides.a1-c1.loss_pct: 'a lot' is a str; expected " \
                  "integer or number"
    (msg,) = problems({"topology": {"link_overrides": {"a1-c1": {"latency": 3}}}})
    assert msg.startswith("topology.link_overrides.a1-c1.latency: unknown key; valid keys "
                          "here are bw_mbps, delay_ms, jitter_ms, loss_pct, queue_pkts")


def test_overrides_set_both_directions_then_one():
    cfg = validate({"topology": {"link_overrides": {
        "a1-c1": {"loss_pct": 2, "bw_mbps": 10}, "c1>a1": {"bw_mbps": 5}}}})
    conds = cfg.link_conditions()
    assert conds[("a1", "c1")] == LinkParams(bw_mbps=10, loss_pct=2)
    assert conds[("c1", "a1")] == LinkParams(bw_mbps=5, loss_pct=2)
    assert conds[("a2", "c3")] == LinkParams(bw_mbps=20)  # the core tier's


def test_node_commands_shape_egress_and_drop_loss_on_arrival():
    topo = FatTree(4, {t: LinkParams(bw_mbps=20) for t in ("host", "edge", "core")})
    conds = resolve(topo, {"c1>a1": {"loss_pct": 1.5}, "a1>c1": {"bw_mbps": 7}})
    a1 = node_commands(topo, "a1", conds)
    rates = [c for c in a1 if c[:2] == ["tc", "class"] and "a1-eth2" in c]
    assert rates and rates[0][rates[0].index("rate") + 1] == "7mbit"  # a1 -> c1 egress
    (nft,) = [c for c in a1 if c[0] == "nft"]  # c1 -> a1 loss: dropped where it arrives
    assert 'hook ingress device "a1-eth2"' in nft[1]
    assert "meta protocol ip numgen random mod 1000000 < 15000 counter drop" in nft[1]
    assert not [c for c in node_commands(topo, "c1", conds) if c[0] == "nft"]


def test_events_change_rate_in_place_and_cut_both_ends():
    topo = FatTree(4)
    old, new = LinkParams(bw_mbps=20), LinkParams(bw_mbps=5)
    cmds = change_commands(topo, ("e1", "a1"), old, new)
    assert list(cmds) == ["e1"]
    assert [c[:3] for c in cmds["e1"]] == [["tc", "class", "replace"],
                                           ["tc", "qdisc", "replace"]]
    unshaped = change_commands(topo, ("e1", "a1"), old, LinkParams(bw_mbps=None))
    assert unshaped["e1"][0] == ["tc", "qdisc", "del", "dev", "e1-eth2", "root"]
    down = link_state_commands(topo.link_between("a1", "c1"), up=False)
    assert sorted(down) == ["a1", "c1"]
    assert all("counter drop" in cmds[0][1] for cmds in down.values())
    up = link_state_commands(topo.link_between("a1", "c1"), up=True)
    assert all("drop" not in cmds[0][1] for cmds in up.values())


def test_netem_keys_name_every_delay_and_jitter():
    cfg = validate({"topology": {"links": {"core": {"delay_ms": 2}},
                                 "link_overrides": {"e1>a1": {"jitter_ms": 1,
                                                              "delay_ms": 3}}},
                    "events": [{"at_s": 1, "link": "a1-c1", "set": {"delay_ms": 9}}]})
    assert netem_keys(cfg.data) == [
        "topology.links.core.delay_ms=2", "topology.link_overrides.e1>a1.delay_ms=3",
        "topology.link_overrides.e1>a1.jitter_ms=1", "events[0].set.delay_ms=9"]
    assert netem_keys(validate({"topology": {"links": {"core": {"loss_pct": 1}}}}).data) == []


def test_loss_is_refused_on_bmv2():
    (msg,) = problems({"dataplane": "bmv2", "topology": {"links": {"core": {"loss_pct": 1}}}})
    assert msg.startswith("dataplane: bmv2: loss_pct: loss into a switch is dropped by "
                          "nftables on arrival")
    assert msg.endswith("use dataplane: nftables for lossy links")


def test_check_refuses_delay_where_netem_is_missing_naming_the_key(monkeypatch, capsys):
    from pathdiv.experiments.cli import main
    from pathdiv.experiments.fabric import environment
    from tests.conftest import REPO

    monkeypatch.setattr(environment, "netem_available", lambda: False)
    monkeypatch.delenv(environment.LAB_KERNEL_ENV, raising=False)
    cfg = str(REPO / "configs/seed003-lossy.yaml")
    assert main(["check", cfg]) == 0  # hosts.kernel: lab: the lab kernel has netem
    capsys.readouterr()
    assert main(["check", cfg, "--set", "hosts.kernel=host"]) == 2
    err = capsys.readouterr().err
    assert "topology.link_overrides.c3>a2.delay_ms=10: delay and jitter need netem, which " \
           "this machine's kernel" in err
    assert "run on the lab kernel (hosts.kernel: lab)" in err


def test_keys_lists_the_new_keys(capsys):
    from pathdiv.experiments.cli import main

    assert main(["keys"]) == 0
    out = capsys.readouterr().out
    for key in ("topology.links.core.loss_pct", "topology.link_overrides.<name>.bw_mbps",
                "events[].at_s", "events[].set.loss_pct", "workload.background.load",
                "workload.rpc.rate_per_s", "workload.sizes"):
        assert key in out


def test_jitter_larger_than_delay_and_a_bad_cdf_file_are_refused(tmp_path):
    (msg,) = problems({"topology": {"link_overrides": {"a1>c1": {"jitter_ms": 2}}}})
    assert msg == "jitter_ms: larger than delay_ms on a1>c1; netem varies the delay by " \
                  "±jitter_ms, so set delay_ms >= jitter_ms there"
    missing = tmp_path / "nope.cdf"
    (msg,) = problems({"workload": {"pattern": "poisson", "sizes": str(missing)}})
    assert msg == f"workload.sizes: cannot read {missing}: No such file or " \
                  "directory"
