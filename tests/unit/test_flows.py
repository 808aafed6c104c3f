"""Packets → subflows → MPTCP connections → transfers, on scapy-crafted runs."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from pathdiv.analysis.capture.flows import (
    CaptureSetError,
    capture_files,
    group_connections,
    match_transfers,
    read_link_captures,
    split_subflows,
)
from pathdiv.topologies.fattree import FatTree
from tests.support.pcap_synth import CaptureBuilder, add_transfer, spec_between

TOPO = FatTree(4, aliases_per_host=3)


def build(tmp_path: Path, specs: list) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    b = CaptureBuilder(TOPO)
    rows = [add_transfer(b, s) for s in specs]
    b.write(tmp_path / "captures")
    pk, table = split_subflows(read_link_captures(tmp_path / "captures", TOPO))
    return pk, group_connections(table), pd.DataFrame(rows)


def test_rotated_parts_are_listed_in_rotation_order(tmp_path: Path) -> None:
    for name in ("e1-eth0.pcap2", "e1-eth0.pcap", "e1-eth0.pcap10", "e1-eth0.pcap1", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    assert capture_files(tmp_path) == {
        "e1-eth0": [tmp_path / f"e1-eth0.pcap{n}" for n in ("", "1", "2", "10")]
    }


def test_rotated_parts_read_as_one_capture(tmp_path: Path) -> None:
    b = CaptureBuilder(TOPO)
    add_transfer(b, spec_between(TOPO, 1, "h1", "h16", size_bytes=6000, t0=1000.0))
    b.write(tmp_path / "one")
    whole = read_link_captures(tmp_path / "one", TOPO)
    # Split every link's frames in two parts as tcpdump -C would.
    for intf, frames in list(b.frames.items()):
        half = len(frames) // 2
        b.frames = {intf: frames[:half]}
        b.write(tmp_path / "tmp1")
        b.frames = {intf: frames[half:]}
        b.write(tmp_path / "tmp2")
        (tmp_path / "two").mkdir(exist_ok=True)
        (tmp_path / "tmp1" / f"{intf}.pcap").rename(tmp_path / "two" / f"{intf}.pcap")
        (tmp_path / "tmp2" / f"{intf}.pcap").rename(tmp_path / "two" / f"{intf}.pcap1")
    parts = read_link_captures(tmp_path / "two", TOPO)
    pd.testing.assert_frame_equal(parts, whole)


def test_a_capture_of_an_unknown_interface_names_the_fix(tmp_path: Path) -> None:
    (tmp_path / "s9-eth7.pcap").write_bytes(b"")
    with pytest.raises(CaptureSetError, match=r"no interface 's9-eth7'.*topology.k"):
        read_link_captures(tmp_path, TOPO)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CaptureSetError, match=r"no capture files .*was capture enabled"):
        read_link_captures(tmp_path / "empty", TOPO)


def test_each_packet_counted_once_per_link_it_crossed(tmp_path: Path) -> None:
    pk, table, _ = build(tmp_path, [spec_between(TOPO, 1, "h1", "h16", size_bytes=3000, t0=1.0)])
    assert len(table) == 1
    # 6-hop path: every packet appears on 6 links, on each exactly once.
    per_link = pk.groupby("link").size()
    assert len(per_link) == 6 and per_link.nunique() == 1


def test_port_reuse_with_a_new_isn_starts_a_new_subflow(tmp_path: Path) -> None:
    specs = [
        spec_between(TOPO, 1, "h1", "h16", size_bytes=3000, t0=1000.0, isn=1000),
        spec_between(TOPO, 2, "h1", "h16", size_bytes=5000, t0=1010.0, isn=7000),
    ]
    pk, table, transfers = build(tmp_path, specs)
    assert len(table) == 2
    assert set(table["mp"]) == {""}
    members = match_transfers(transfers, table, TOPO)
    client_link = TOPO.links.index(TOPO.links_of("h1")[0])
    at_client = pk[(pk["link"] == client_link) & ~pk["from_init"]]
    payload = at_client.groupby("subflow")["payload"].sum()
    assert payload[members[1][0]] == 3000 and payload[members[2][0]] == 5000


def test_syn_retransmission_stays_in_its_subflow(tmp_path: Path) -> None:
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    b = CaptureBuilder(TOPO)
    spec = spec_between(TOPO, 1, "h1", "h16", size_bytes=2000, t0=1000.0)
    syn = Ether() / IP(src="10.0.0.2", dst="10.3.1.3") / TCP(sport=40000, dport=80, flags="S",
                                                              seq=spec.isn)
    b.transmit(999.0, spec.subflows[0].path, syn, lost_after=2)  # first SYN lost
    add_transfer(b, spec)
    b.write(tmp_path / "captures")
    _, table = split_subflows(read_link_captures(tmp_path / "captures", TOPO))
    assert len(table) == 1 and table["first_ts"].iloc[0] < 999.1


def test_mptcp_subflows_join_their_connection_by_token(tmp_path: Path) -> None:
    specs = [
        spec_between(TOPO, 1, "h1", "h16", paths=(0, 1, 2, 3), mptcp=True, size_bytes=8000,
                     t0=1000.0, key_server=0xAAAA, key_client=0xBBBB),
        spec_between(TOPO, 2, "h1", "h16", paths=(3, 2), mptcp=True, size_bytes=4000,
                     t0=1000.001, key_server=0xCCCC, key_client=0xDDDD, client_port=41000),
    ]
    _, table, transfers = build(tmp_path, specs)
    assert table["token_resolved"].all()
    assert sorted(table.groupby("conn").size()) == [2, 4]
    members = match_transfers(transfers, table, TOPO)
    assert len(members[1]) == 4 and len(members[2]) == 2
    assert set(members[1]).isdisjoint(members[2])
    assert list(table.loc[members[1], "mp"]) == ["capable", "join", "join", "join"]


def test_joins_without_visible_keys_fall_back_to_addresses_and_ports(tmp_path: Path) -> None:
    spec = spec_between(TOPO, 1, "h1", "h16", paths=(0, 1, 2, 3), mptcp=True, size_bytes=8000,
                        t0=1000.0, keys_visible=False)
    other = spec_between(TOPO, 2, "h2", "h16", size_bytes=1000, t0=1000.0)  # plain TCP
    _, table, transfers = build(tmp_path, [spec, other])
    assert not table["token_resolved"].all()
    members = match_transfers(transfers, table, TOPO)
    assert len(members[1]) == 4 and len(members[2]) == 1


def test_tcp_transfers_map_one_to_one(tmp_path: Path) -> None:
    specs = [
        spec_between(TOPO, i, "h1", "h5", size_bytes=1000 * i, t0=1000.0, client_port=40000 + i)
        for i in (1, 2, 3)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, table, transfers = build(tmp_path, specs)
    members = match_transfers(transfers, table, TOPO)
    assert all(len(m) == 1 for m in members.values())
    assert len({m[0] for m in members.values()}) == 3


def test_a_link_captured_at_both_ends_counts_once(tmp_path: Path) -> None:
    b = CaptureBuilder(TOPO)
    add_transfer(b, spec_between(TOPO, 1, "h1", "h16", size_bytes=2000, t0=1000.0))
    b.write(tmp_path / "captures")
    once = read_link_captures(tmp_path / "captures", TOPO)
    link = TOPO.links_of("h1")[0]  # h1-eth0 is its lower end, e1-eth0 its upper end
    shutil.copy(tmp_path / "captures" / f"{link.b.intf}.pcap",
                tmp_path / "captures" / f"{link.a.intf}.pcap")
    with pytest.warns(UserWarning, match=rf"link {link.name} captured at both ends; using "
                      rf"{link.b.intf} only"):
        twice = read_link_captures(tmp_path / "captures", TOPO)
    pd.testing.assert_frame_equal(twice, once)
