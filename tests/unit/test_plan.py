"""The run plan: crossed factors, blocks in seeded order, ids stable under reordering."""

import pytest

from pathdiv.experiments.config.load import validate
from pathdiv.experiments.config.plan import expand

FACTORS = {
    "switching": {
        "static-tcp": {"switching.mode": "static", "hosts.transport": "tcp"},
        "ecmp-mptcp": {"switching.mode": "ecmp", "hosts.transport": "mptcp"},
        "ps-mptcp": {"switching.mode": "spray", "hosts.transport": "mptcp"},
    },
    "host": {"vanilla": {"hosts.scheduler": "default"}, "rr": {"hosts.scheduler": "roundrobin"}},
}


def cfg(**extra):
    return validate({"seed": 5, "repetitions": 2, "factors": FACTORS, **extra})


def test_cells_times_flow_types_times_repetitions():
    runs = expand(cfg())
    assert len(runs) == 3 * 2 * 3 * 2
    assert len({r.run_id for r in runs}) == len(runs)
    for rep in (1, 2):  # each block holds every cell once
        block = [(r.flow_type, tuple(r.factors.values())) for r in runs if r.repetition == rep]
        assert len(set(block)) == 18


def test_levels_apply_their_overrides():
    run = next(r for r in expand(cfg()) if r.factors["switching"] == "ps-mptcp")
    assert (run.config.mode, run.config.transport) == ("spray", "mptcp")


def test_order_is_seeded_and_ids_do_not_depend_on_order():
    a, b, c = expand(cfg()), expand(cfg()), expand(cfg(seed=6))
    assert [r.run_id for r in a] == [r.run_id for r in b]
    assert [r.run_id for r in a] != [r.run_id for r in c]
    seeds_a = {r.run_id: r.seed for r in a}
    assert all(seeds_a[r.run_id] != r.seed for r in c)  # master seed feeds run seeds
    assert sorted(r.run_id for r in a) == sorted(r.run_id for r in c)


def test_only_and_flow_types_filter_the_plan():
    runs = expand(cfg(), repetitions=1, flow_types=["query", "short"],
                  only={"switching": "ecmp-mptcp"})
    assert len(runs) == 1 * 2 * 2
    assert {r.factors["switching"] for r in runs} == {"ecmp-mptcp"}
    with pytest.raises(ValueError, match="no such factor level"):
        expand(cfg(), only={"switching": "nope"})
    with pytest.raises(ValueError, match=r"not in workload\.flow_types"):
        expand(cfg(), flow_types=["huge"])
