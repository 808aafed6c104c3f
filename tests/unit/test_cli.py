"""The command line as a user meets it: check, keys, errors with exit codes, analyze."""

from __future__ import annotations

import re

from pathdiv.experiments.cli import main
from tests.conftest import REPO
from tests.support.study_data import synthetic_metrics


def test_check_prints_the_topology_and_plan(capsys):
    assert main(["check", str(REPO / "configs/class-probe.yaml")]) == 0
    out = capsys.readouterr().out
    assert "valid. k=4 fat tree: 20 switches, 16 hosts, 48 links" in out
    assert "plan: 3 run(s)" in out  # no factors: one run per flow type


def test_check_says_which_plane_each_run_uses_and_its_wall_time(capsys, tmp_path,
                                                                 monkeypatch):
    bindir = tmp_path / "p4" / "bin"  # stand-in p4lang tools: bmv2's, not p4-ebpf's
    bindir.mkdir(parents=True)
    for name in ("simple_switch", "simple_switch_CLI", "p4c-bm2-ss"):
        (bindir / name).write_text("#!/bin/sh\necho fake 1.0\n")
        (bindir / name).chmod(0o755)
    monkeypatch.setenv("P4_PREFIX", str(tmp_path / "p4"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    cfg = str(REPO / "configs/noisy.yaml")
    assert main(["check", cfg, "--set", "dataplane=bmv2"]) == 0
    out = capsys.readouterr().out
    runs = re.search(r"plan: (\d+) run\(s\)", out)
    assert runs, out
    n = int(runs.group(1))
    assert re.search(rf"data plane: {n} run\(s\) on bmv2 \(as configured; expected "
                     r"[\d.]+-[\d.]+x the nftables plane's time per run, [\d.]+(-[\d.]+)?x per "
                     r"cell\); "
                     r"found simple_switch", out), out
    assert f"{n} in the lab kernel, whose P4 programs the host compiles before it boots" in out
    assert "  for P4 at the nftables plane's pace: p4c's eBPF back end" in out
    wall = next(line for line in out.splitlines() if line.startswith("expected wall time"))
    assert "on the bmv2 data plane" in wall and "on the nftables plane)" in wall
    assert main(["check", cfg]) == 0  # auto: bmv2 is found but far too dear here
    out = capsys.readouterr().out
    assert "nftables (auto)" in out  # the plan's dataplane column
    assert re.search(rf"data plane: {n} run\(s\) on nftables \(auto: no P4 plane here "
                     r"carries it within the bound \(p4-ebpf: p4c-ebpf, clang, llc not "
                     r"found on .*bmv2: above auto's bound of 1.5x the nftables plane's "
                     r"time\); bmv2 would take \d+(-\d+)?x per cell\)", out), out
    assert "scripts/install-p4.sh" in out


def test_check_with_override_and_bad_value(capsys):
    cfg = str(REPO / "configs/class-probe.yaml")
    assert main(["check", cfg, "--set", "topology.k=6"]) == 0
    assert "k=6 fat tree: 45 switches, 54 hosts" in capsys.readouterr().out
    assert main(["check", cfg, "--set", "switching.mode=sprya"]) == 2
    err = capsys.readouterr().err
    assert "switching.mode: 'sprya' is not allowed; choose one of static, ecmp, spray" in err
    assert "nothing was started" in err


def test_keys_documents_every_key(capsys):
    assert main(["keys"]) == 0
    out = capsys.readouterr().out
    for key in ("topology.links.core.bw_mbps", "switching.spray", "hosts.subflows",
                "workload.flow_types.<name>", "analysis.dvs", "hosts.juggler_ooo_timeout_us",
                "hosts.juggler_inseq_timeout_us", "hosts.juggler_flows"):
        assert key in out
    assert "[default | tuned | gro | juggler]" in out  # hosts.reordering's levels


def test_analyze_stats_only_needs_metrics(tmp_path, capsys):
    assert main(["analyze", str(tmp_path), "--stats-only"]) == 1
    assert "has no metrics.csv" in capsys.readouterr().err
    assert main(["analyze", str(tmp_path)]) == 1
    assert "use `pathdiv analyze --stats-only`" in capsys.readouterr().err


def test_analyze_stats_only_writes_the_report(tmp_path, capsys):
    frame = synthetic_metrics(seed=1, conditions=["noisy"], flow_types=["short"])
    frame.to_csv(tmp_path / "metrics.csv", index=False)
    assert main(["analyze", str(tmp_path), "--stats-only"]) == 0
    assert f"report: {tmp_path / 'report.html'}" in capsys.readouterr().out
    assert (tmp_path / "stats.json").is_file() and (tmp_path / "report.md").is_file()


def test_clean_reads_every_named_namespace_from_the_listing():
    from pathdiv.experiments.fabric.clean import namespace_names

    listing = "pdlab-s (id: 3)\npd4h0\nblue (id: 1)\npdx\npd7sw (id: 2)\n"
    assert namespace_names(listing) == ["pdlab-s", "pd4h0", "blue", "pdx", "pd7sw"]


def test_verbose_logs_each_phase_even_after_mininet_took_over_loggers(capsys):
    """Importing Mininet makes later loggers Mininet's; -v must still print phases."""
    import logging

    import mininet.log  # noqa: F401  (sets Mininet's logger class, as the network does)

    from pathdiv.experiments import cli

    cli._setup_logging(logging.INFO)
    logging.getLogger("pathdiv").info("network up: test")
    assert "pathdiv: network up: test" in capsys.readouterr().err
    cli._setup_logging(logging.WARNING)
    logging.getLogger("pathdiv").info("quiet")
    assert "quiet" not in capsys.readouterr().err
