"""`hosts.reordering`: the per-namespace settings a host gets (pure)."""

from __future__ import annotations

from pathdiv.experiments.config.load import validate
from pathdiv.experiments.fabric.hostsetup import (
    REORDERING,
    HostSpec,
    host_commands,
    receive_commands,
)
from pathdiv.topologies.fattree import FatTree


def sysctls(spec: HostSpec) -> list[str]:
    first = host_commands(FatTree(4), "h1", spec)[0]
    assert first[:2] == ["sysctl", "-qw"]
    return first[2:]


def test_default_leaves_the_kernels_reordering_settings():
    assert validate({}).reordering == "default"
    got = sysctls(HostSpec("tcp", 1, "cubic"))
    assert not [s for s in got if "reordering" in s or "tcp_recovery" in s]


def test_tuned_raises_the_reordering_degree_and_drops_the_dupack_threshold():
    got = dict(s.split("=") for s in sysctls(HostSpec("mptcp", 4, "cubic", reordering="tuned")))
    assert int(got["net.ipv4.tcp_reordering"]) > 3
    assert int(got["net.ipv4.tcp_max_reordering"]) >= int(got["net.ipv4.tcp_reordering"])
    recovery = int(got["net.ipv4.tcp_recovery"])
    assert recovery & 0x1 and recovery & 0x4 and not recovery & 0x2  # RACK, no dupthresh,
    assert got["net.ipv4.tcp_dsack"] == "1"                           # DSACK-adaptive window
    assert got["net.ipv4.tcp_congestion_control"] == "cubic"


def test_every_level_the_schema_allows_has_settings():
    from pathdiv.experiments.config.schema import SCHEMA

    assert set(SCHEMA.fields["hosts"].fields["reordering"].choices) == set(REORDERING)


def test_gro_adds_only_the_reorder_hold():
    default = sysctls(HostSpec("tcp", 1, "cubic"))
    gro = sysctls(HostSpec("tcp", 1, "cubic", reordering="gro", reorder_hold_us=4000))
    assert [s for s in gro if s not in default] == ["net.ipv4.tcp_reorder_hold_us=4000"]
    assert validate({"hosts": {"reordering": "gro"}}).reorder_hold_us == 1000


def test_a_hold_out_of_range_is_refused():
    import pytest

    from pathdiv.experiments.config.load import ConfigError

    with pytest.raises(ConfigError, match=r"hosts\.reorder_hold_us.*1 to 1000000"):
        validate({"hosts": {"reordering": "gro", "reorder_hold_us": 0}})


def test_juggler_switches_it_on_with_its_settings_and_nothing_else():
    default = sysctls(HostSpec("mptcp", 4, "cubic"))
    cfg = validate({"hosts": {"reordering": "juggler", "kernel": "lab",
                              "juggler_ooo_timeout_us": 20000, "juggler_flows": 32}})
    assert cfg.juggler == (0, 20000, 32)
    juggler = sysctls(HostSpec("mptcp", 4, "cubic", reordering="juggler", juggler=cfg.juggler))
    assert [s for s in juggler if s not in default] == [
        "net.core.juggler_inseq_timeout_us=0", "net.core.juggler_ooo_timeout_us=20000",
        "net.core.juggler_flows=32", "net.core.juggler=1"]
    # the defaults: out-of-order segments wait 1 ms, eight flows per receive queue
    assert validate({"hosts": {"reordering": "juggler"}}).juggler == (0, 1000, 8)


def test_only_a_juggler_host_receives_through_gro():
    topo = FatTree(4)
    spec = HostSpec("mptcp", 4, "cubic", reordering="juggler")
    intf = topo.links_of("h1")[0].port_of("h1").intf
    # after the link's commands, which turn every offload off (fabric/shaping.py)
    assert receive_commands(topo, "h1", spec) == [["ethtool", "-K", intf, "gro", "on"]]
    for level in ("default", "tuned", "gro"):
        assert receive_commands(topo, "h1", HostSpec("mptcp", 4, "cubic",
                                                     reordering=level)) == []
