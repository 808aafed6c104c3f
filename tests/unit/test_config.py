"""Config validation: every error names the key, the bad value and what is allowed."""

from pathlib import Path

import pytest

from pathdiv.experiments.config.checks import parse_size
from pathdiv.experiments.config.load import ConfigError, load, parse_override, validate

REPO = Path(__file__).resolve().parents[2]


def problems(raw) -> list[str]:
    with pytest.raises(ConfigError) as info:
        validate(raw)
    return info.value.problems


def test_defaults_fill_an_empty_config():
    cfg = validate({})
    assert (cfg.k, cfg.mode, cfg.transport, cfg.dataplane) == (4, "ecmp", "tcp", "auto")
    assert cfg.link_params()["core"].bw_mbps == 20
    assert cfg.flow_sizes() == {"query": 128_000, "short": 500_000, "long": 25_000_000}


def test_bad_choice_names_key_value_and_choices():
    assert problems({"switching": {"mode": "sprya"}}) == [
        "switching.mode: 'sprya' is not allowed; choose one of static, ecmp, spray, flowlet"
    ]


def test_unknown_key_lists_the_valid_ones():
    (msg,) = problems({"hosts": {"subflow": 4}})
    assert msg.startswith("hosts.subflow: unknown key; valid keys here are transport, subflows")


def test_wrong_type_and_range():
    msgs = problems({"topology": {"k": 5}, "hosts": {"subflows": "four"}, "seed": True})
    assert "topology.k: 5 is not allowed; expected an even integer 2..16" in msgs
    assert "hosts.subflows: 'four' is a str; expected integer" in msgs
    assert "seed: True is a bool; expected integer" in msgs


def test_all_problems_reported_at_once_and_nothing_started():
    with pytest.raises(ConfigError, match=r"3 problem\(s\), nothing was started"):
        validate({"dataplane": "p4", "seed": "x", "bogus": 1})


def test_factor_levels_are_validated_like_the_file():
    msgs = problems({"factors": {"sw": {"bad": {"switching.mode": "x"},
                                        "typo": {"switching.mdoe": "ecmp"}}}})
    assert "factors.sw.bad: switching.mode: 'x' is not allowed; choose one of static, ecmp, " \
           "spray, flowlet" in msgs
    assert any(m.startswith("factors.sw.typo.switching.mdoe: unknown key") for m in msgs)


def test_flow_sizes_parse_units():
    assert parse_size("10KB") == 10_000
    assert parse_size("25MB") == 25_000_000
    assert parse_size("1MiB") == 1_048_576
    assert parse_size(1500) == 1500
    (msg,) = problems({"workload": {"flow_types": {"query": "ten"}}})
    assert msg.startswith("workload.flow_types.query: 'ten' is not allowed; expected a positive")


def test_set_overrides_are_validated(tmp_path):
    f = tmp_path / "x.yaml"
    f.write_text("switching: {mode: ecmp}\n")
    assert load(f, ["switching.mode=spray", "topology.k=6"]).mode == "spray"
    with pytest.raises(ConfigError, match=r"switching\.mode: .bogus. is not allowed"):
        load(f, ["switching.mode=bogus"])
    with pytest.raises(ConfigError, match=r"--set switching\.mdoe: unknown key"):
        parse_override("switching.mdoe=spray")
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_override("switching.mode")


def test_yaml_errors_and_missing_files(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load(tmp_path / "missing.yaml")


def test_name_defaults_to_file_stem(tmp_path):
    f = tmp_path / "mylab.yaml"
    f.write_text("seed: 3\n")
    assert load(f).name == "mylab"


@pytest.mark.parametrize("path", sorted((REPO / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_validate(path):
    load(path)


def test_topology_comes_from_the_config():
    cfg = validate({"topology": {"k": 6, "links": {"core": {"bw_mbps": 40}}},
                    "hosts": {"transport": "mptcp", "subflows": 3}})
    topo = cfg.topology()
    assert topo.k == 6 and topo.aliases_per_host == 2
    assert topo.link_of_intf("c1-eth0").params.bw_mbps == 40
    assert validate({"hosts": {"subflows": 4}}).topology().aliases_per_host == 0  # TCP
