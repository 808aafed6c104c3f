"""Workload designations: seeded, fixed per iteration, covering every host as the study asks."""

from collections import Counter

import pytest

from pathdiv.experiments.plan.designations import WorkloadError, rounds, transfer_count
from pathdiv.experiments.traffic.rounds import (
    Traffic,
    TransferRow,
    fetch_argv,
    merge_fetch_output,
    plan_rows,
)
from pathdiv.topologies.fattree import FatTree

HOSTS = FatTree(4).hosts  # 16 hosts


def test_silent_is_one_transfer_at_a_time_and_every_host_serves_and_fetches():
    plan = rounds("silent", HOSTS, seed=11, iterations=3, requests=2)
    assert all(len(rnd) == 1 and len(rnd[0].servers) == 1 for rnd in plan)
    assert len(plan) == 3 * 2 * 16
    for it in range(3):
        reqs = [rnd[0] for rnd in plan if rnd[0].iteration == it]
        pairs = {(r.client, r.servers[0]) for r in reqs}
        assert len(pairs) == 16  # designations fixed within the iteration
        assert sorted(c for c, _ in pairs) == sorted(HOSTS)
        assert sorted(s for _, s in pairs) == sorted(HOSTS)
        assert all(c != s for c, s in pairs)
        assert Counter(r.client for r in reqs) == dict.fromkeys(HOSTS, 2)
    assert len({rnd[0].group_id for rnd in plan}) == len(plan)  # each transfer its own group


def test_designations_are_reproducible_from_the_seed_and_change_with_it():
    a = rounds("silent", HOSTS, seed=11, iterations=2, requests=1)
    assert a == rounds("silent", list(reversed(HOSTS)), seed=11, iterations=2, requests=1)
    assert a != rounds("silent", HOSTS, seed=12, iterations=2, requests=1)
    pairs = [{(r.client, r.servers) for rnd in a for r in rnd if r.iteration == i}
             for i in (0, 1)]
    assert pairs[0] != pairs[1]  # a new draw each iteration


def test_noisy_splits_into_two_disjoint_groups_of_eight_with_one_client_each():
    plan = rounds("noisy", HOSTS, seed=3, iterations=4, requests=2)
    assert len(plan) == 4 * 2
    seen_splits = set()
    for rnd in plan:
        assert len(rnd) == 2  # both groups at once
        members = [{r.client, *r.servers} for r in rnd]
        assert all(len(m) == 8 and len(r.servers) == 7 for m, r in zip(members, rnd, strict=True))
        assert members[0].isdisjoint(members[1])
        assert members[0] | members[1] == set(HOSTS)
        assert all(r.client not in r.servers for r in rnd)
        seen_splits.add(frozenset(map(frozenset, members)))
    assert len(seen_splits) == 4  # fixed per iteration, redrawn between iterations
    assert transfer_count(plan) == 4 * 2 * 2 * 7
    assert [r.group_id for rnd in plan for r in rnd] == list(range(16))


def test_noisy_groups_scale_with_k():
    plan = rounds("noisy", FatTree(6).hosts, seed=1, iterations=1, requests=1)
    assert [len(r.servers) for r in plan[0]] == [26, 26]  # 54 hosts -> 2 x 27


def test_incast_and_permutation_reuse_the_designations():
    incast = rounds("incast", HOSTS, seed=2, iterations=2, requests=1)
    assert [len(rnd) for rnd in incast] == [1, 1]
    assert all(len(rnd[0].servers) == 15 for rnd in incast)
    perm = rounds("permutation", HOSTS, seed=2, iterations=1, requests=1)
    assert len(perm) == 1 and len(perm[0]) == 16
    assert {r.servers[0] for r in perm[0]} == set(HOSTS)


def test_impossible_workloads_name_the_problem():
    with pytest.raises(WorkloadError, match=r"2 hosts cannot be split \(use topology.k >= 4\)"):
        rounds("noisy", FatTree(2).hosts, seed=1, iterations=1, requests=1)
    with pytest.raises(WorkloadError, match="'fanout' is not known; choose one of silent"):
        rounds("fanout", HOSTS, seed=1, iterations=1, requests=1)


TRAFFIC = Traffic("query", 10_000, "mptcp", 8080, 30.0)


def test_rows_and_fetch_command_of_a_noisy_round():
    topo = FatTree(4)
    plan = rounds("noisy", topo.hosts, seed=3, iterations=1, requests=1)
    rows = plan_rows(topo, plan, TRAFFIC)
    assert [len(r) for r in rows] == [7, 7]
    assert [r.transfer_id for rs in rows for r in rs] == list(range(14))
    assert {r.group_id for r in rows[0]} == {0} and {r.group_id for r in rows[1]} == {1}
    first = rows[0][0]
    assert first.client_addr == topo.nodes[first.client].address
    argv = fetch_argv(rows[0], TRAFFIC)
    assert argv[0] == "fetch" and argv[-1] == "--mptcp"
    assert argv[1] == f"{first.server_addr}:8080:10000"
    assert "--mptcp" not in fetch_argv(rows[0], Traffic("query", 10_000, "tcp", 8080, 30.0))
    # hosts.join_before_data: the fetch asks for its subflows before data (MPTCP only)
    assert "--join-first" not in argv
    joined = fetch_argv(rows[0], Traffic("query", 10_000, "mptcp", 8080, 30.0, join_first=4))
    assert joined[joined.index("--join-first") + 1] == "4"
    assert "--join-first" not in fetch_argv(
        rows[0], Traffic("query", 10_000, "tcp", 8080, 30.0, join_first=4))


def _row(server_addr: str) -> TransferRow:
    return TransferRow(0, 0, "query", "tcp", "h1", "h2", "10.0.0.2", server_addr, 8080,
                       size_bytes=10_000, error="not run")


def test_fetch_results_fill_rows_and_failures_keep_their_reason():
    rows = [_row("10.0.0.3"), _row("10.1.0.2"), _row("10.2.0.2")]
    out = "\n".join([
        '{"server_addr": "10.0.0.3", "server_port": 8080, "size_bytes": 10000, '
        '"client_port": 40001, "start_s": 1.5, "end_s": 1.6, "received": 10000, "ok": true, '
        '"error": "", "subflows": 4}',
        '{"server_addr": "10.1.0.2", "server_port": 8080, "size_bytes": 10000, '
        '"client_port": 40002, "start_s": 1.5, "end_s": 2.0, "received": 0, "ok": false, '
        '"error": "ConnectionRefusedError: [Errno 111] Connection refused", "subflows": 0}',
    ])
    merge_fetch_output(rows, out, "fetch exited 1")
    assert (rows[0].ok, rows[0].client_port, rows[0].subflows, rows[0].error) == \
        (True, 40001, 4, "")
    assert not rows[1].ok and "Connection refused" in rows[1].error
    assert not rows[2].ok and rows[2].error == "fetch exited 1"
