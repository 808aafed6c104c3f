"""Every config pathdiv ships passes its own `pathdiv check`, and so does every shard of
the reference configs (the ones that reproduce a published study)."""

from __future__ import annotations

import re

import pytest

from pathdiv.experiments.cli import main
from pathdiv.experiments.cluster.shards import partition
from pathdiv.experiments.config.load import load
from pathdiv.experiments.dataplane.bmv2.tools import find_p4_tools
from pathdiv.experiments.plan.runs import expand
from tests.conftest import REPO

CONFIGS = sorted((REPO / "configs").glob("*.yaml"))
REFERENCE = [p for p in CONFIGS if load(p).data["analysis"]["reference"]]


def check_argv(config) -> list[str]:
    """`check CONFIG`; for a config that asks for bmv2 on a machine without p4lang's tools
    (which check refuses, naming them) the rest of it is checked on the nftables plane."""
    if load(config).data.get("dataplane") == "bmv2" and find_p4_tools()[0] is None:
        return ["check", str(config), "--set", "dataplane=nftables"]
    return ["check", str(config)]


def test_the_shipped_configs_include_the_reference_ones():
    assert len(CONFIGS) >= 10
    assert {p.name for p in REFERENCE} >= {"noisy.yaml", "silent.yaml"}


@pytest.mark.parametrize("config", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_shipped_config_passes_check(config, capsys):
    code = main(check_argv(config))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"{config}: valid." in out
    assert re.search(r"^plan: \d+ run\(s\)$", out, re.M)


@pytest.mark.parametrize("config", REFERENCE, ids=[p.stem for p in REFERENCE])
def test_every_shard_of_a_reference_config_passes_check(config, capsys):
    runs = expand(load(config))
    for count in (2, 3):
        seen: list[str] = []
        for index in range(count):
            assert main([*check_argv(config), "--shard", f"{index}/{count}"]) == 0, \
                capsys.readouterr().err
            out = capsys.readouterr().out
            said = re.search(rf"^shard {index}/{count} runs (\d+) of them:$", out, re.M)
            assert said, out
            seen += [r.run_id for r in partition(runs, count)[index]]
            assert int(said.group(1)) == len(partition(runs, count)[index])
        assert sorted(seen) == sorted(r.run_id for r in runs)
