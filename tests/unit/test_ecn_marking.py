"""`switching.ecn_threshold_pkts`: the key, the marking qdisc of the nftables plane, bmv2's
egress queues, the hosts' ECN setting and the `ce_pct` metric (pure, no root)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from pathdiv.analysis.capture.pcap import read_pcap
from pathdiv.analysis.metrics.transfer import ce_marks
from pathdiv.experiments.config.load import ConfigError, validate
from pathdiv.experiments.dataplane.p4.entries import EntryError, egress_queue_commands
from pathdiv.experiments.fabric.conditions import (
    change_commands,
    node_commands,
    program_queues,
)
from pathdiv.experiments.fabric.environment import config_problems
from pathdiv.experiments.fabric.hostsetup import HostSpec, host_sysctls
from pathdiv.experiments.fabric.shaping import FRAME_BYTES, tc_commands
from pathdiv.kernels.abilities import KernelAbilities, lab_kernel_abilities
from pathdiv.topologies.model import LinkParams


def problems(raw) -> list[str]:
    with pytest.raises(ConfigError) as info:
        validate(raw)
    return info.value.problems


def test_the_key_is_off_by_default_and_bounded():
    assert validate({}).ecn_threshold_pkts is None
    assert validate({"switching": {"ecn_threshold_pkts": 20}}).ecn_threshold_pkts == 20
    for bad in (0, -3, 5000):
        (msg,) = problems({"switching": {"ecn_threshold_pkts": bad}})
        assert msg.startswith(f"switching.ecn_threshold_pkts: {bad} is not allowed; "
                              "expected null (no marking) or an integer from 1 to 1000")
    (msg,) = problems({"switching": {"ecn_threshold_pkts": "many"}})
    assert msg.startswith("switching.ecn_threshold_pkts: 'many' is a str")


def test_a_threshold_at_or_above_a_queue_is_refused_naming_the_tier():
    (msg,) = problems({"switching": {"ecn_threshold_pkts": 50},
                       "topology": {"links": {"core": {"queue_pkts": 50}}}})
    assert msg.startswith("switching.ecn_threshold_pkts: 50 packets is not below "
                          "topology.links.core.queue_pkts (50)")


def test_marking_leaf_is_red_in_ecn_mode_stepping_at_the_threshold():
    cmds = tc_commands("e1-eth0", LinkParams(bw_mbps=20, queue_pkts=100), 20)
    leaf = cmds[-1]
    assert leaf[:7] == ["tc", "qdisc", "replace", "dev", "e1-eth0", "parent", "1:1"]
    assert leaf[7:10] == ["handle", "10:", "red"] and leaf[-1] == "ecn"
    opts = dict(zip(leaf[10:-1:2], leaf[11:-1:2], strict=True))
    assert opts["min"] == opts["max"] == str(20 * FRAME_BYTES)
    assert opts["limit"] == str(100 * FRAME_BYTES)
    assert opts["burst"] == "20" and opts["probability"] == "1.0"
    assert opts["bandwidth"] == "20mbit"
    assert tc_commands("e1-eth0", LinkParams(bw_mbps=20), None)[-1][9] == "pfifo"


def test_only_switches_mark_and_a_condition_change_keeps_the_marking():
    cfg = validate({})
    topo, conds = cfg.topology(), cfg.link_conditions()
    leaves = [c for c in node_commands(topo, "e1", conds, 20) if "10:" in c]
    assert leaves and all("red" in c for c in leaves)
    host = [c for c in node_commands(topo, "h1", conds, 20) if "10:" in c]
    assert host and all("pfifo" in c and "red" not in c for c in host)
    old = conds[("e1", "a1")]
    new = dataclasses.replace(old, bw_mbps=10.0)
    (cmds,) = change_commands(topo, ("e1", "a1"), old, new, 20).values()
    assert any("red" in c and "10mbit" in c for c in cmds)
    (cmds,) = change_commands(topo, ("h1", "e1"), conds[("h1", "e1")],
                              dataclasses.replace(conds[("h1", "e1")], bw_mbps=10.0),
                              20).values()
    assert not any("red" in c for c in cmds)


def test_bmv2_egress_queues_run_just_below_the_link_rate():
    cfg = validate({})  # every tier 20 Mbit/s, queues of 100 packets
    topo = cfg.topology()
    queues = program_queues(topo, cfg.link_conditions())
    assert set(queues) == set(topo.switches)
    assert len(queues["c1"]) == 4 and len(queues["e1"]) == 4
    port, pps, depth = queues["e1"][0]
    # 20 Mbit/s of 1514-byte frames is 1651 per second; the queue drains at 0.98 of it
    assert pps == int(20e6 * 0.98 / (1514 * 8)) == 1618 and depth == 100
    cmds = egress_queue_commands([(port, pps, depth)])
    assert cmds == [f"set_queue_rate 1618 {port}", f"set_queue_depth 100 {port}"]
    with pytest.raises(EntryError, match="port 3: an egress queue needs"):
        egress_queue_commands([(3, 0, 100)])


def test_hosts_ask_for_ecn_where_switches_mark_or_dctcp_runs():
    def ecn(spec: HostSpec) -> str:
        (value,) = [s for s in host_sysctls("h1-eth0", spec) if "tcp_ecn" in s]
        return value

    assert ecn(HostSpec("tcp", 1, "cubic")) == "net.ipv4.tcp_ecn=2"
    assert ecn(HostSpec("tcp", 1, "cubic", ecn=True)) == "net.ipv4.tcp_ecn=1"
    assert ecn(HostSpec("mptcp", 4, "dctcp")) == "net.ipv4.tcp_ecn=1"


def test_a_kernel_without_red_is_refused_on_the_planes_that_mark_in_qdiscs_only():
    cfg = validate({"dataplane": "kernel", "switching": {"ecn_threshold_pkts": 20}})
    bare = KernelAbilities("this machine's kernel 6.18", frozenset({"cubic"}), frozenset(),
                           True, False, red=False)
    (msg,) = config_problems(cfg, bare)
    assert msg.startswith("switching.ecn_threshold_pkts: 20: the nftables plane marks ECN "
                          "with RED (sch_red) in the switches' egress qdiscs, which this "
                          "machine's kernel 6.18 lacks")
    assert "hosts.kernel: lab" in msg and "dataplane: bmv2" in msg
    on_bmv2 = cfg.with_overrides([("dataplane", "bmv2")])
    assert config_problems(on_bmv2, bare) == []
    on_ebpf = cfg.with_overrides([("dataplane", "p4-ebpf")])
    assert "the p4-ebpf plane marks ECN with RED" in config_problems(on_ebpf, bare)[0]
    # auto: the plane each run gets here decides
    auto = cfg.with_overrides([("dataplane", "auto")])
    assert config_problems(auto, bare, "bmv2") == []
    assert config_problems(auto, bare, "nftables") == [msg]
    lab = lab_kernel_abilities()
    assert lab.red and "dctcp" in lab.ccs


def test_capture_reader_keeps_the_ecn_bits_and_ce_share_counts_them(tmp_path):
    frames = [Ether() / IP(src="10.0.0.2", dst="10.1.0.2", tos=tos) / TCP() / (b"x" * 100)
              for tos in (0, 2, 2, 3, 1)]
    wrpcap(str(tmp_path / "l.pcap"), frames)
    got = read_pcap(tmp_path / "l.pcap")
    assert got["ecn"].tolist() == [0, 2, 2, 3, 1]
    assert ce_marks(got) == (1, 4)
    assert ce_marks(pd.DataFrame({"ecn": [0, 0]})) == (0, 0)
