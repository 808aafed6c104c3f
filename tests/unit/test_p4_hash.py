"""The Python model of ecmp.p4's member choice (bmv2 itself is tested in integration)."""

from __future__ import annotations

import pytest

from pathdiv.experiments.dataplane.p4.hashing import ecmp_member, flow_hash
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.forwarding import forwarding_tables

TCP = 6


def flows(n: int) -> list[tuple[str, str, int, int, int]]:
    return [("10.0.0.2", "10.3.1.3", TCP, 40000 + i, 5001) for i in range(n)]


def test_flow_hash_is_crc32_of_the_five_tuple_bytes() -> None:
    # zlib CRC-32 of 0a000002 0a030103 06 9c40 1389, computed independently
    import binascii

    data = bytes.fromhex("0a000002" "0a030103" "06" "9c40" "1389")
    assert flow_hash("10.0.0.2", "10.3.1.3", TCP, 40000, 5001) == binascii.crc32(data)


def test_members_are_in_range_and_all_used() -> None:
    picks = [ecmp_member(*f, seed=12345, members=3) for f in flows(300)]
    assert set(picks) == {0, 1, 2}
    assert min(picks.count(m) for m in range(3)) > 60


def test_edge_and_aggregation_do_not_polarise() -> None:
    """Flows an edge sends to one uplink must still split at the aggregation switch."""
    tables = forwarding_tables(FatTree(4), run_seed=7)
    edge, agg = tables["e1"].seed, tables["a1"].seed
    on_member0 = [f for f in flows(400) if ecmp_member(*f, seed=edge, members=2) == 0]
    at_agg = [ecmp_member(*f, seed=agg, members=2) for f in on_member0]
    share = at_agg.count(0) / len(at_agg)
    assert 0.35 < share < 0.65, share


def test_empty_group_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one member, got 0"):
        ecmp_member("10.0.0.2", "10.0.0.3", TCP, 1, 2, seed=0, members=0)
