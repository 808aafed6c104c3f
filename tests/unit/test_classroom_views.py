"""The classroom shell's tables and heat map, from made-up counter snapshots."""

from __future__ import annotations

import itertools

import pytest

from pathdiv.experiments.classroom.views import (
    LinkTraffic,
    carried,
    flow_summary,
    format_counters,
    format_paths,
    heat_map,
    link_traffic,
    shade,
    traffic_bytes,
)
from pathdiv.experiments.dataplane.base import PortCounters
from pathdiv.topologies.fattree import FatTree

TOPO = FatTree(4)
ZERO = PortCounters(0, 0, 0, 0)


def zero_snapshot() -> dict[str, PortCounters]:
    return {lk.b.intf: ZERO for lk in TOPO.links}


def along(path: tuple[str, ...], nbytes: int) -> dict[str, PortCounters]:
    """A snapshot where `nbytes` (in 1000-byte packets) went along `path`."""
    snap = zero_snapshot()
    for u, v in itertools.pairwise(path):
        lk = TOPO.link_between(u, v)
        old = snap[lk.b.intf]
        if v == lk.b.node:  # upwards: received by the upper end
            snap[lk.b.intf] = PortCounters(old.rx_packets + nbytes // 1000,
                                           old.rx_bytes + nbytes, old.tx_packets, old.tx_bytes)
        else:
            snap[lk.b.intf] = PortCounters(old.rx_packets, old.rx_bytes,
                                           old.tx_packets + nbytes // 1000,
                                           old.tx_bytes + nbytes)
    return snap


def add(a: dict[str, PortCounters], b: dict[str, PortCounters]) -> dict[str, PortCounters]:
    return {k: PortCounters(*(x + y for x, y in zip(
        (a[k].rx_packets, a[k].rx_bytes, a[k].tx_packets, a[k].tx_bytes),
        (b[k].rx_packets, b[k].rx_bytes, b[k].tx_packets, b[k].tx_bytes), strict=True)))
        for k in a}


PATHS = TOPO.paths("h1", "h16")


def test_one_path_carried_is_the_one_the_counters_show() -> None:
    traffic = link_traffic(TOPO, zero_snapshot(), along(PATHS[2], 2_000_000))
    rows = carried(TOPO, PATHS, traffic)
    assert [used for _, _, used in rows] == [False, False, True, False]
    assert rows[2][1] == 2_000_000


def test_reverse_acks_do_not_count_as_carrying_data() -> None:
    acks = along(tuple(reversed(PATHS[0])), 40_000)  # h16 -> h1 over c1
    data = along(PATHS[3], 2_000_000)
    traffic = link_traffic(TOPO, zero_snapshot(), add(acks, data))
    assert [used for _, _, used in carried(TOPO, PATHS, traffic)] == [False, False, False, True]


def test_paths_lists_all_four_before_traffic_and_marks_carriers_after() -> None:
    before = format_paths(TOPO, "h1", "h16", None)
    assert "4 equal-cost path(s) h1 -> h16" in before
    assert "h1 > e1 > a2 > c4 > a8 > e8 > h16" in before
    traffic = link_traffic(TOPO, zero_snapshot(), along(PATHS[0], 1_000_000))
    after = format_paths(TOPO, "h1", "h16", ("h1", "h16", traffic))
    assert "1 of 4 path(s) carried it" in after
    assert after.count("carried") == 2 and after.count("idle") == 3


def test_counters_table_lists_busy_links_only_busiest_first() -> None:
    snap = add(along(PATHS[0], 2_000_000), along(TOPO.paths("h5", "h6")[0], 500_000))
    text = format_counters(link_traffic(TOPO, zero_snapshot(), snap))
    lines = text.splitlines()
    assert lines[1].startswith("h1-e1") and "2000000" in lines[1]
    assert "h6-e3" in text and "h9-e5" not in text
    assert "8 of 48 links carried traffic" in text


def test_counters_without_traffic_says_so() -> None:
    text = format_counters(link_traffic(TOPO, zero_snapshot(), zero_snapshot()))
    assert text == "no link carried traffic since the last `counters`"


def test_heat_map_marks_the_path_links_and_nothing_else() -> None:
    text = heat_map(TOPO, link_traffic(TOPO, zero_snapshot(), along(PATHS[0], 1_000_000)))
    lines = text.splitlines()
    assert lines[0].split() == ["pod1", "pod2", "pod3", "pod4"]
    assert lines[1].split() == ["core-agg", "@___", "____", "____", "@___"]
    assert lines[2].split() == ["agg-edge", "@___", "____", "____", "__@_"]
    assert lines[3].split() == ["edge-host", "@___", "____", "____", "___@"]
    assert "1.0 MB" in lines[4]


def test_shade_scales_and_keeps_small_traffic_visible() -> None:
    assert shade(0, 100) == "_"
    assert shade(1, 1000) == "."
    assert shade(100, 100) == "@"


def test_snapshot_missing_a_port_names_it() -> None:
    partial = zero_snapshot()
    del partial["c1-eth0"]
    with pytest.raises(ValueError, match=r"no counters for c1-eth0 \(link a1-c1\)"):
        link_traffic(TOPO, partial, zero_snapshot())


def test_flow_summary_reports_fct_goodput_and_cores() -> None:
    spread = along(PATHS[0], 500_000)
    for p in PATHS[1:]:
        spread = add(spread, along(p, 500_000))
    traffic = link_traffic(TOPO, zero_snapshot(), spread)
    result = {"start_s": 10.0, "end_s": 11.0, "received": 2_000_000, "subflows": 1}
    text = flow_summary("h1", "h16", 2_000_000, "tcp", result, TOPO, traffic)
    assert "FCT 1.000 s, goodput 16.00 Mbit/s" in text
    assert "paths used: 4 of 4; cores c1 c2 c3 c4" in text


def test_traffic_bytes_names_each_direction_by_its_ends():
    topo = FatTree(4)
    link = topo.link_between("e1", "a1")  # a = e1 (lower), b = a1 (upper)
    got = traffic_bytes([LinkTraffic(link, up_bytes=700, up_packets=7, down_bytes=30,
                                     down_packets=1)])
    assert got == {("e1", "a1"): 700, ("a1", "e1"): 30}
