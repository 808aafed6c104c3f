"""The run plan: crossed factors, blocks in seeded order, ids stable under reordering."""

import pytest

from pathdiv.experiments.config.load import validate
from pathdiv.experiments.config.workloads import PATTERNS
from pathdiv.experiments.plan.designations import WorkloadError, rounds, transfer_count
from pathdiv.experiments.plan.runs import expand

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


def test_repetitions_per_flow_type_keep_the_ids_and_seeds_of_a_single_number():
    per_flow = expand(cfg(repetitions={"query": 3, "short": 2}))  # long: not named, 1
    counts = {f: len({r.repetition for r in per_flow if r.flow_type == f})
              for f in ("query", "short", "long")}
    assert counts == {"query": 3, "short": 2, "long": 1}
    assert len(per_flow) == 6 * (3 + 2 + 1)
    same = {r.run_id: r.seed for r in expand(cfg(repetitions=3))}
    assert all(same[r.run_id] == r.seed for r in per_flow)  # a run is the same run
    assert len(expand(cfg(repetitions={"query": 3}), repetitions=2)) == 6 * 3 * 2  # --reps
    with pytest.raises(Exception, match=r"repetitions\.huge: 'huge' is not a flow type; "
                                        r"choose from query, short, long"):
        cfg(repetitions={"huge": 2})


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


def test_per_repetition_designations_pair_the_levels_of_a_repetition():
    from pathdiv.experiments.plan.designations import rounds

    paired = expand(cfg(workload={"designations": "per_repetition", "iterations": 2}))
    hosts = paired[0].config.topology().hosts
    for rep in (1, 2):
        for flow in ("query", "long"):
            block = [r for r in paired if r.repetition == rep and r.flow_type == flow]
            draws = {tuple(rounds("silent", hosts, r.workload_seed, 2, 1)) for r in block}
            assert len(block) == 6 and len(draws) == 1  # every level meets the same draws
    assert len({r.workload_seed for r in paired}) == 2 * 3  # repetitions x flow types
    assert all(r.seed != r.workload_seed for r in paired)  # ECMP seeds stay per run
    unpaired = expand(cfg())
    assert all(r.workload_seed == r.seed for r in unpaired)
    assert len({r.workload_seed for r in unpaired}) == len(unpaired)


def test_designations_take_per_run_or_per_repetition_only():
    from pathdiv.experiments.config.load import ConfigError

    with pytest.raises(ConfigError, match=r"workload.designations: 'paired' is not allowed; "
                       r"choose one of per_run, per_repetition"):
        cfg(workload={"designations": "paired"})


def test_observations_per_cell_against_what_the_manova_needs():
    from pathdiv.experiments.config.load import load
    from pathdiv.experiments.plan.design import design_problems, observations_per_cell

    noisy = expand(load("configs/noisy.yaml"))
    cells = observations_per_cell(noisy)
    assert len(cells) == 3 * (5 + 2)  # rb only on the two MPTCP levels (applies_to)
    # 2 iterations x 2 partition-aggregate groups per repetition: 10 repetitions of the
    # query and short cells, 4 of the long ones (configs/noisy.yaml), > 4 dvs + 1
    assert {f: n for (f, *_), n in cells.items()} == {"query": 40, "short": 40, "long": 16}
    assert design_problems(noisy) == []
    assert design_problems(expand(load("configs/silent.yaml"))) == []
    (few,) = design_problems(expand(cfg(repetitions=1, workload={"pattern": "noisy",
                                                                 "iterations": 1})))
    assert few.startswith("18 cell(s)") and "get only 2 observation(s)" in few
    assert "needs more than 5 per cell: raise repetitions" in few


@pytest.mark.parametrize("pattern", ["silent", "noisy", "incast", "permutation"])
@pytest.mark.parametrize("n", [2, 4, 6, 16, 128])
def test_a_patterns_closed_form_counts_are_its_drawn_designations(pattern, n):
    """`check` bounds a run by the registry's closed forms before drawing anything: they
    must be what the designations draw, for every host count a topology may have."""
    entry = PATTERNS[pattern]
    hosts = [f"h{i}" for i in range(1, n + 1)]
    if entry.hosts_problem(n):
        with pytest.raises(WorkloadError):
            rounds(pattern, hosts, 7, 3, 2)
        return
    drawn = rounds(pattern, hosts, 7, 3, 2)
    assert len(drawn) == 3 * 2 * entry.rounds(n)
    assert transfer_count(drawn) == 3 * 2 * entry.transfers(n)
    assert {max(len(r.servers) for r in rnd) for rnd in drawn} == {entry.busiest(n)}
