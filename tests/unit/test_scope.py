"""Factor levels that act on some levels of another factor only (applies_to): the plan
runs no configuration twice, the analysis tests each factor where it acts, and
`pathdiv check` says so."""

import pandas as pd
import pytest
import yaml

from pathdiv.analysis.report.analyze import spec_from_config
from pathdiv.analysis.stats.scope import analysis_tests
from pathdiv.analysis.stats.study import analyze_metrics
from pathdiv.experiments.cli import main
from pathdiv.experiments.config.load import ConfigError, validate
from pathdiv.experiments.plan.runs import expand
from tests.conftest import REPO
from tests.support.study_data import synthetic_metrics

MPTCP = ["ecmp-mptcp", "ps-mptcp"]
SWITCHING = {
    "static-tcp": {"switching.mode": "static", "hosts.transport": "tcp"},
    "ecmp-tcp": {"switching.mode": "ecmp", "hosts.transport": "tcp"},
    "ps-tcp": {"switching.mode": "spray", "hosts.transport": "tcp"},
    "ecmp-mptcp": {"switching.mode": "ecmp", "hosts.transport": "mptcp"},
    "ps-mptcp": {"switching.mode": "spray", "hosts.transport": "mptcp"},
}
HOST = {"vanilla": {"hosts.kernel": "lab", "hosts.scheduler": "default"},
        "rb": {"hosts.kernel": "lab", "hosts.scheduler": "rb",
               "applies_to": {"switching": MPTCP}}}


def config(host=None):
    return {"name": "scoped", "seed": 3, "repetitions": 2,
            "factors": {"switching": SWITCHING, "host": host or HOST}}


def _resolved(run):
    data = dict(run.config.data)
    return yaml.safe_dump({k: v for k, v in data.items() if k != "factors"}, sort_keys=True)


def test_the_plan_runs_no_configuration_twice():
    runs = expand(validate(config()))
    cells = {(r.flow_type, *r.factors.values()) for r in runs}
    assert len(cells) == 3 * (5 + 2)  # flow types x (5 vanilla + 2 rb)
    assert not any(r.factors["host"] == "rb" and r.factors["switching"] not in MPTCP
                   for r in runs)
    per_rep = [r for r in runs if r.repetition == 1]
    assert len({(r.flow_type, _resolved(r)) for r in per_rep}) == len(per_rep)
    # without applies_to the TCP x rb cells repeat the TCP x vanilla configurations
    plain = expand(validate(config({"vanilla": HOST["vanilla"],
                                    "rb": {"hosts.kernel": "lab",
                                           "hosts.scheduler": "rb"}})))
    assert len(plain) == 2 * 3 * 10
    rb = next(r for r in plain if r.factors == {"switching": "static-tcp", "host": "rb"})
    twin = next(r for r in plain if r.factors == {"switching": "static-tcp",
                                                  "host": "vanilla"}
                and r.flow_type == rb.flow_type and r.repetition == rb.repetition)
    assert rb.config.transport == twin.config.transport == "tcp"


def test_the_tests_do_not_depend_on_the_order_of_the_factors():
    levels = {"host": list(HOST), "switching": list(SWITCHING)}
    tests = analysis_tests(levels, ["host", "switching"],
                           {"host": {"rb": {"switching": tuple(MPTCP)}}})
    by_effect = {e: t for t in tests for e in t.effects}
    assert set(by_effect) == {"host", "switching", "host:switching"}
    assert by_effect["host"].levels["switching"] == tuple(MPTCP)
    assert by_effect["switching"].levels["host"] == ("vanilla",)


def test_each_factor_is_tested_where_it_acts():
    levels = {"switching": list(SWITCHING), "host": list(HOST)}
    switching, host = analysis_tests(levels, ["switching", "host"],
                                     {"host": {"rb": {"switching": tuple(MPTCP)}}})
    assert switching.ivs == ("switching",) and switching.effects == ("switching",)
    assert switching.levels == {"switching": tuple(SWITCHING), "host": ("vanilla",)}
    assert host.ivs == ("switching", "host")
    assert host.effects == ("host", "switching:host")
    assert host.levels == {"switching": tuple(MPTCP), "host": ("vanilla", "rb")}
    (full,) = analysis_tests(levels, ["switching", "host"], {})
    assert full.levels == {"switching": tuple(SWITCHING), "host": ("vanilla", "rb")}


def test_check_prints_a_plan_without_duplicates_and_the_levels_of_each_test(
        tmp_path, capsys):
    path = tmp_path / "scoped.yaml"
    path.write_text(yaml.safe_dump(config(), sort_keys=False))
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "plan: 42 run(s)" in out  # 2 repetitions x 3 flow types x 7 cells, not 60
    assert ("one-way MANOVA, test of switching on switching in {static-tcp, ecmp-tcp, "
            "ps-tcp, ecmp-mptcp, ps-mptcp}; host in {vanilla}") in out
    assert ("two-way MANOVA, test of host, switching:host on switching in "
            "{ecmp-mptcp, ps-mptcp}; host in {vanilla, rb}") in out
    assert "static-tcp_rb" not in out and "static-tcp_vanilla" in out


@pytest.mark.parametrize("name", ["noisy", "silent"])
def test_the_reference_configs_scope_rb_to_the_mptcp_levels(name, capsys):
    assert main(["check", str(REPO / f"configs/{name}.yaml")]) == 0
    out = capsys.readouterr().out
    # 7 cells (rb on the MPTCP levels only, not 10) x 10 + 10 + 4 or 2 repetitions
    assert f"plan: {168 if name == 'noisy' else 154} run(s)" in out
    assert "test of host, switching:host on switching in {ecmp-mptcp, ps-mptcp}" in out


def test_bad_applies_to_names_the_key():
    bad = {"vanilla": {}, "rb": {"hosts.scheduler": "rb",
                                 "applies_to": {"switching": ["ecmp-mtpcp"]}}}
    with pytest.raises(ConfigError, match=r"factors.host.rb.applies_to.switching"):
        validate(config(bad))
    own = {"vanilla": {}, "rb": {"applies_to": {"host": ["vanilla"]}}}
    with pytest.raises(ConfigError, match="not another factor"):
        validate(config(own))
    every = {"vanilla": {"applies_to": {"switching": MPTCP}},
             "rb": {"applies_to": {"switching": MPTCP}}}
    with pytest.raises(ConfigError, match="at least one level must apply everywhere"):
        validate(config(every))


def test_the_analysis_uses_the_levels_where_each_factor_acts():
    # rb lowers FCT on the MPTCP levels only; the old folders also hold TCP x rb rows
    metrics = synthetic_metrics(4, repetitions=8, effects={"host": {"rb": {}}})
    mptcp_rb = (metrics.host == "rb") & metrics.switching.isin(MPTCP)
    metrics.loc[mptcp_rb, "fct_s"] -= 0.4
    spec = spec_from_config({**config(), "analysis": {"clusters": ["condition",
                                                                   "flow_type"]}})
    results = analyze_metrics(metrics, spec)
    assert any("static-tcp/rb" in n and "not used" in n for n in results.notes)
    assert len(results.clusters) == 2 * 6  # two tests per cluster
    host_tests = [c for c in results.clusters if "host" in c.effects]
    assert all(c.scope == {"switching": MPTCP, "host": ["rb", "vanilla"]}
               or c.scope == {"switching": MPTCP, "host": ["vanilla", "rb"]}
               for c in host_tests)
    assert all((c.manova_p("host") or 1) < 0.05 for c in host_tests)
    switching_tests = [c for c in results.clusters if c.effects == ["switching"]]
    assert all(c.ivs == ["switching"] and c.n == 5 * 8 for c in switching_tests)
    assert "test of host, switching:host on switching in {ecmp-mptcp, ps-mptcp}" in \
        host_tests[0].label
    assert isinstance(results.table("manova"), pd.DataFrame)


def test_the_committed_noisy_run_reanalysed_with_the_scoped_design():
    """The committed folder ran before applies_to (TCP x rb cells included): with the
    noisy config's design the host test uses the MPTCP levels and finds RB's effect on
    short and long flows that the five-level test diluted (p = .17 and .31)."""
    folder = REPO / "docs" / "reproduction" / "noisy"
    metrics = pd.read_csv(folder / "metrics.csv")
    spec = spec_from_config(yaml.safe_load((REPO / "configs" / "noisy.yaml").read_text()))
    results = analyze_metrics(metrics, spec)
    host = {c.key["flow_type"]: c.manova_p("host") for c in results.clusters
            if "host" in c.effects}
    assert host["short"] == pytest.approx(0.029, abs=0.001)
    assert host["long"] == pytest.approx(0.024, abs=0.001)
    assert host["query"] > 0.05
    assert any("72 observation(s)" in n for n in results.notes)
    old = yaml.safe_load((folder / "config.yaml").read_text())
    assert "applies_to" not in str(old)  # as run; its own design still analyses
    plain = analyze_metrics(metrics, spec_from_config(old))
    assert len(plain.clusters) == 3 and all(not c.scope for c in plain.clusters)
