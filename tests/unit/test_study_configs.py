"""The study's own design as configs: Table III's factors, Table II's flow sizes per
condition, four subflows on one interface, and its TCP control experiment beside it."""

import pytest

from pathdiv.experiments.cli import main
from pathdiv.experiments.config.load import load
from pathdiv.experiments.plan.runs import expand
from tests.conftest import REPO

TABLE_II = {"silent": {"query": 128_000, "short": 500_000, "long": 25_000_000},
            "noisy": {"query": 10_000, "short": 500_000, "long": 25_000_000}}


@pytest.mark.parametrize("condition", ["silent", "noisy"])
@pytest.mark.parametrize("control", [False, True])
def test_study_configs_rebuild_table_iii(condition, control, capsys):
    name = f"study001-{'control-' if control else ''}{condition}"
    path = REPO / "configs" / f"{name}.yaml"
    assert main(["check", str(path)]) == 0
    assert "plan: " in capsys.readouterr().out
    cfg = load(path)
    assert cfg.data["workload"]["pattern"] == condition
    assert cfg.flow_sizes() == TABLE_II[condition]
    assert cfg.data["hosts"]["subflows"] == 4 and cfg.k == 4
    assert cfg.data["analysis"]["reference"] == "seed001"
    factors = cfg.data["factors"]
    switching = ["ecmp-mptcp", "ps-mptcp"]
    if control:
        switching = ["static-tcp", "ps-tcp", *switching]
    assert sorted(factors["switching"]) == sorted(switching)
    assert list(factors["host"]) == ["vanilla", "reorder-resilient", "juggler"]
    runs = expand(cfg)
    holds = {r.factors["host"]: r.config.reordering for r in runs}
    assert holds == {"vanilla": "default", "reorder-resilient": "gro", "juggler": "juggler"}
    assert {r.config.host_kernel for r in runs} == {"lab"}
    # Juggler waits for a hole as long as the hold holds SACKs
    assert {r.config.juggler[1] for r in runs} == {r.config.reorder_hold_us for r in runs}
    # the repetitions the power check asks per flow type: query and short 10, long 4
    # on the noisy network and 2 on the silent one; three host levels
    long = 4 if condition == "noisy" else 2
    assert len(runs) == 3 * len(switching) * (10 + 10 + long)
