"""Every config mistake is reported at `pathdiv check`, naming the key, the value and the fix."""

from __future__ import annotations

import pytest

from pathdiv.experiments.cli import main
from pathdiv.experiments.config.load import ConfigError, load, validate
from pathdiv.experiments.config.names import resolve_config
from pathdiv.experiments.fabric.environment import plan_problems
from pathdiv.experiments.plan.runs import expand
from pathdiv.kernels.abilities import (
    KernelAbilities,
    fragment_ccs,
    lab_kernel_abilities,
    patch_ccs,
    patch_schedulers,
)
from tests.conftest import REPO

FACTORS = {"switching": {"ecmp": {"switching.mode": "ecmp"}, "spray": {"switching.mode": "spray"}}}
STOCK = KernelAbilities("this machine's kernel 6.18", frozenset({"reno", "cubic"}),
                        frozenset({"default"}), mptcp=True, netem=False)


def write(tmp_path, text: str | bytes, name: str = "c.yaml"):
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_an_unknown_dependent_variable_lists_the_metrics_csv_columns():
    with pytest.raises(ConfigError, match=r"analysis\.dvs: 'nonexistent_metric' is not a "
                       r"metrics\.csv column; choose from fct_s, throughput_mbps, "):
        validate({"factors": FACTORS, "analysis": {"dvs": ["nonexistent_metric"]}})


def test_an_independent_variable_that_is_no_factor_lists_the_factors():
    with pytest.raises(ConfigError, match=r"analysis\.ivs: 'nofactor' is not a factor of "
                       r"this config; factors: switching$"):
        validate({"factors": FACTORS, "analysis": {"ivs": ["nofactor"]}})


def test_ivs_default_to_the_configs_factors():
    cfg = validate({"factors": FACTORS})
    assert cfg.data["analysis"]["ivs"] == ["switching"]


def test_an_unknown_congestion_control_is_refused_with_the_choices():
    with pytest.raises(ConfigError, match=r"hosts\.cc: 'notacc' is not allowed; choose one "
                       r"of reno, cubic, bbr, dctcp"):
        validate({"hosts": {"cc": "notacc"}})


def test_a_cc_the_runs_kernel_lacks_is_a_plan_problem():
    runs = expand(validate({"hosts": {"cc": "bbr"}}), flow_types=["query"])
    assert plan_problems(runs, host=STOCK) == [
        "hosts.cc: 'bbr' is not in this machine's kernel 6.18 (available: cubic, reno) "
        "[runs of every run]"]


def test_the_rb_scheduler_on_the_host_kernel_names_the_levels_and_the_fix():
    cfg = validate({"hosts": {"transport": "mptcp", "scheduler": "rb"}, "factors": FACTORS})
    problems = plan_problems(expand(cfg, flow_types=["query"]), host=STOCK)
    assert problems == [
        "hosts.scheduler: 'rb' is not in this machine's kernel 6.18 (available: default); "
        "the pathdiv lab kernel has it: set hosts.kernel: lab "
        "[runs of switching=ecmp; switching=spray]"]
    lab = validate({"hosts": {"transport": "mptcp", "scheduler": "rb", "kernel": "lab"}})
    assert plan_problems(expand(lab, flow_types=["query"])) == []


def test_rbstrict_is_a_lab_scheduler_refused_on_the_host_kernel_as_rb_is():
    cfg = validate({"hosts": {"transport": "mptcp", "scheduler": "rbstrict"}})
    assert plan_problems(expand(cfg, flow_types=["query"]), host=STOCK) == [
        "hosts.scheduler: 'rbstrict' is not in this machine's kernel 6.18 (available: "
        "default); the pathdiv lab kernel has it: set hosts.kernel: lab [runs of every run]"]
    lab = validate({"hosts": {"transport": "mptcp", "scheduler": "rbstrict", "kernel": "lab"}})
    assert plan_problems(expand(lab, flow_types=["query"])) == []
    with pytest.raises(ConfigError, match=r"hosts\.scheduler: 'rb-strict' is not allowed; "
                       r"choose one of default, rb, .*rbstrict"):
        validate({"hosts": {"scheduler": "rb-strict"}})


def test_the_lab_kernels_abilities_come_from_its_recipe():
    assert fragment_ccs("CONFIG_TCP_CONG_ADVANCED=y\nCONFIG_TCP_CONG_BBR=y\n"
                        "# CONFIG_TCP_CONG_VEGAS is not set\n") == {"reno", "bbr"}
    sched = ('+++ b/net/mptcp/sched_x.c\n+static struct mptcp_sched_ops x = {\n'
             '+\t.name\t\t= "rb",\n .name = "old",\n')
    cc = '+++ b/net/mptcp/cc_x.c\n+static struct tcp_congestion_ops y __read_mostly = {\n' \
         '+\t.name\t\t= "lia",\n'
    assert patch_schedulers([sched + cc]) == {"default", "rb"}
    assert patch_ccs([sched + cc]) == {"lia"}
    lab = lab_kernel_abilities()
    assert {"default", "rb", "rbstrict", "roundrobin", "arp", "ar", "redundant",
            "minrtt"} <= lab.schedulers
    assert "lia" not in lab.schedulers
    assert {"cubic", "bbr", "dctcp", "lia", "olia", "coupled-bbr"} <= lab.ccs
    assert lab.netem and lab.mptcp


def test_lia_is_for_lab_runs_only():
    cfg = validate({"hosts": {"transport": "mptcp", "cc": "lia"}})
    assert plan_problems(expand(cfg, flow_types=["query"]), host=STOCK) == [
        "hosts.cc: 'lia' is not in this machine's kernel 6.18 (available: cubic, reno); "
        "the pathdiv lab kernel has it: set hosts.kernel: lab [runs of every run]"]
    lab = validate({"hosts": {"transport": "mptcp", "cc": "lia", "kernel": "lab"}})
    assert plan_problems(expand(lab, flow_types=["query"])) == []


def test_the_reorder_hold_is_for_lab_runs_only():
    cfg = validate({"hosts": {"reordering": "gro"}})
    assert plan_problems(expand(cfg, flow_types=["query"]), host=STOCK) == [
        "hosts.reordering: 'gro' needs the reorder hold, which this machine's kernel 6.18 "
        "lacks; the pathdiv lab kernel has it: set hosts.kernel: lab [runs of every run]"]
    lab = validate({"hosts": {"reordering": "gro", "kernel": "lab"}})
    assert plan_problems(expand(lab, flow_types=["query"])) == []
    assert lab_kernel_abilities().reorder_hold


def test_juggler_is_for_lab_runs_only():
    cfg = validate({"hosts": {"reordering": "juggler"}})
    assert plan_problems(expand(cfg, flow_types=["query"]), host=STOCK) == [
        "hosts.reordering: 'juggler' needs Juggler in GRO (net.core.juggler), which this "
        "machine's kernel 6.18 lacks; the pathdiv lab kernel has it: set hosts.kernel: lab "
        "[runs of every run]"]
    lab = validate({"hosts": {"reordering": "juggler", "kernel": "lab"}})
    assert plan_problems(expand(lab, flow_types=["query"])) == []
    assert lab_kernel_abilities().juggler


def test_an_unknown_reordering_level_names_the_levels():
    with pytest.raises(ConfigError, match=r"hosts\.reordering.*'juggle'.*default.*tuned.*gro"
                       r".*juggler"):
        validate({"hosts": {"reordering": "juggle"}})


@pytest.mark.parametrize(("key", "value", "allowed"), [
    ("juggler_ooo_timeout_us", 2_000_000, "0 to 1000000 \\(µs\\)"),
    ("juggler_inseq_timeout_us", -1, "0 to 1000000 \\(µs\\)"),
    ("juggler_flows", 0, "1 to 64 \\(flows\\)"),
    ("juggler_flows", 65, "1 to 64 \\(flows\\)"),
])
def test_juggler_settings_out_of_range_are_refused(key, value, allowed):
    with pytest.raises(ConfigError, match=rf"hosts\.{key}.*{value}.*{allowed}"):
        validate({"hosts": {"reordering": "juggler", "kernel": "lab", key: value}})


def test_a_file_that_is_not_utf8_is_named_with_the_bad_byte(tmp_path):
    path = write(tmp_path, b"name: caf\xe9\n")
    with pytest.raises(ConfigError, match=r"c\.yaml is not UTF-8 text \(byte 9 is 0xe9\); "
                       r"save it as UTF-8"):
        load(path)


def test_two_factors_setting_one_key_are_refused():
    factors = {**FACTORS, "transport": {"tcp": {"switching.mode": "static",
                                                "hosts.transport": "tcp"}}}
    with pytest.raises(ConfigError, match=r"factors\.transport\.tcp\.switching\.mode: factor "
                       r"'switching' sets switching\.mode too; a key belongs to one factor"):
        validate({"factors": factors})


def test_a_set_that_factor_levels_override_is_refused():
    with pytest.raises(ConfigError, match=r"--set hosts\.kernel: the factor level\(s\) "
                       r"host=vanilla, host=rb set hosts\.kernel themselves, so this override "
                       r"would change no run of theirs"):
        load(REPO / "configs/noisy.yaml", ["hosts.kernel=host"])
    assert load(REPO / "configs/noisy.yaml", ["repetitions=1"]).data["repetitions"] == 1


def test_a_config_name_resolves_against_configs(tmp_path):
    assert resolve_config("noisy.yaml", cwd=tmp_path) == REPO / "configs/noisy.yaml"
    assert resolve_config("noisy", cwd=tmp_path) == REPO / "configs/noisy.yaml"
    own = write(tmp_path / "configs", "name: mine\n", "noisy.yaml") if (
        (tmp_path / "configs").mkdir() or True) else None
    assert resolve_config("noisy", cwd=tmp_path) == own  # the user's folder first
    with pytest.raises(ConfigError, match=r"no config 'nosuch': it is not a file, nor a "
                       r"config in .*; configs there: .*class-quick, .*noisy, .*silent"):
        resolve_config("nosuch", cwd=tmp_path)


def test_pathdiv_check_finds_configs_noisy_yaml_from_anywhere(tmp_path, monkeypatch, capsys):
    """What `make experiment CONFIG=noisy.yaml` hands to `pathdiv run` resolves the same."""
    monkeypatch.chdir(tmp_path)
    assert main(["check", "noisy.yaml"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{REPO / 'configs/noisy.yaml'}: valid.")
    assert "plan: 168 run(s)" in out  # rb acts on the two MPTCP levels only: 7 x 24
