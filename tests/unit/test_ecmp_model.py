"""The hash model predicts each switch's ECMP choice (kernel nft jhash and ecmp.p4).

The kernel expectations below were read from nftables on Linux 6.18 (a `jhash ... mod
4 seed S offset 1` rule in a namespace, one mark counter per member); the integration
test `tests/integration/test_subflow_paths.py` re-checks the model on a running fat tree.
"""

from __future__ import annotations

import binascii
import random
import struct

import pytest

from pathdiv.experiments.dataplane.ecmp_model import FiveTuple, ModelError, PathModel
from pathdiv.experiments.dataplane.nftables.hashing import jhash, nft_key, nft_member
from pathdiv.experiments.dataplane.p4.hashing import p4_member
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.forwarding import forwarding_tables


def test_jhash_matches_lookup3_published_values() -> None:
    # Bob Jenkins' lookup3.c driver5: hashlittle("", 0, 0) and the "Four score" vectors
    assert jhash(b"", 0) == 0xDEADBEEF
    assert jhash(b"Four score and seven years ago", 0) == 0x17770551
    assert jhash(b"Four score and seven years ago", 1) == 0xCD628161


def test_nft_key_pads_every_field_to_a_register() -> None:
    t = FiveTuple("10.0.0.2", "10.3.1.3", 6, 40000, 8080)
    assert nft_key(t) == bytes.fromhex("0a000002" "0a030103" "06000000" "9c400000" "1f900000")


@pytest.mark.parametrize(("t", "seed", "n2", "n4"), [
    (FiveTuple("10.0.0.2", "10.3.1.3", 6, 40000, 8080), 0x1234ABCD, 0, 1),
    (FiveTuple("10.3.1.3", "10.0.0.34", 6, 8080, 22044), 0xDEADBEEF, 1, 3),
    (FiveTuple("10.1.0.2", "10.2.1.2", 17, 5353, 53), 7, 0, 0),
])
def test_nft_member_is_the_marks_nft_set(t: FiveTuple, seed: int, n2: int, n4: int) -> None:
    assert nft_member(t, seed, 2) == n2
    assert nft_member(t, seed, 4) == n4


def test_nft_member_is_reciprocal_scale_of_the_hash() -> None:
    t = FiveTuple("10.0.0.2", "10.3.1.3", 6, 40000, 8080)
    assert jhash(nft_key(t), 0x1234ABCD) == 0x7D4DE98B
    assert nft_member(t, 0x1234ABCD, 4) == (0x7D4DE98B * 4) >> 32


def _ecmp_p4(t: FiveTuple, seed: int, members: int) -> int:
    """ecmp.p4 written out again from the P4 source: crc32 over the 13 packed bytes,
    XOR seed, times 0x9E3779B1 (mod 2^32), bits 31..16, mod members."""
    data = struct.pack("!4s4sBHH", bytes(map(int, t.src.split("."))),
                       bytes(map(int, t.dst.split("."))), t.proto, t.sport, t.dport)
    mixed = ((binascii.crc32(data) ^ seed) * 0x9E3779B1) & 0xFFFFFFFF
    return (mixed >> 16) % members


def test_p4_member_follows_the_p4_program_on_sample_tuples() -> None:
    rng = random.Random(4)
    for _ in range(200):
        t = FiveTuple(f"10.{rng.randrange(4)}.{rng.randrange(2)}.{rng.randrange(2, 4)}",
                      f"10.{rng.randrange(4)}.{rng.randrange(2)}.{rng.randrange(2, 4)}", 6,
                      rng.randrange(1, 65536), rng.randrange(1, 65536))
        seed = rng.getrandbits(32)
        assert p4_member(t, seed, 2) == _ecmp_p4(t, seed, 2)


@pytest.mark.parametrize("plane", ["nftables", "bmv2", "p4-ebpf"])
def test_predicted_paths_are_shortest_paths_with_each_switch_choice(plane: str) -> None:
    topo = FatTree(4, aliases_per_host=3)
    tables = forwarding_tables(topo, run_seed=7)
    model = PathModel(topo, tables, plane)
    member = nft_member if plane == "nftables" else p4_member
    rng = random.Random(1)
    cores = set()
    for _ in range(300):
        src, dst = rng.sample(topo.hosts, 2)
        t = FiveTuple(rng.choice(topo.host_addresses(src)), topo.nodes[dst].address, 6,
                      rng.randrange(20000, 60000), 8080)
        path = model.path(t)
        assert path in topo.paths(src, dst)
        edge = path[1]
        if topo.edge_of(dst) != edge:  # the edge's choice is the model's member
            up = tables[edge].up[member(t, tables[edge].seed, 2)].node
            assert path[2] == up
        cores.add(model.core(t))
    assert cores >= set(topo.cores)


def test_unknown_addresses_and_planes_are_named() -> None:
    topo = FatTree(4)
    with pytest.raises(ModelError, match=r"10\.9\.9\.9 is no host address"):
        PathModel(topo, forwarding_tables(topo)).path(FiveTuple("10.9.9.9", "10.0.0.2", 6, 1, 2))
    with pytest.raises(ModelError, match=r"no hash model: data plane .ovs. is not one of nftables"):
        PathModel(topo, {}, "ovs")
