"""The runner's pure parts: plan sizes of the shipped configs, folder states, resume, files."""

import csv
import json
import os

import pytest

from pathdiv.experiments import runner
from pathdiv.experiments.cluster.planfile import plan_document
from pathdiv.experiments.config.load import load, validate
from pathdiv.experiments.dataplane.select import Choice
from pathdiv.experiments.execute import keeper
from pathdiv.experiments.execute import run as one_run
from pathdiv.experiments.execute.guest_runs import find_run
from pathdiv.experiments.execute.guest_runs import main as guest_main
from pathdiv.experiments.execute.runstate import ResultsError, base_manifest, run_state
from pathdiv.experiments.manifest import parse_sysctls, write_csv_atomic, write_json_atomic
from pathdiv.experiments.plan.runs import expand, parse_only, quick_config, quick_flow_types
from pathdiv.experiments.runner import check_resumable, split_resume
from pathdiv.experiments.running import NetworkError
from pathdiv.experiments.traffic.rounds import COLUMNS
from tests.conftest import REPO

SWITCHING = {"static-tcp", "ecmp-tcp", "ps-tcp", "ecmp-mptcp", "ps-mptcp"}


@pytest.mark.parametrize("name", ["silent", "noisy"])
def test_reference_configs_cross_five_switching_levels_two_hosts_three_flow_types(name):
    cfg = load(REPO / "configs" / f"{name}.yaml")
    runs = expand(cfg)
    # rb acts on the two MPTCP levels only (applies_to): 5 vanilla + 2 rb cells
    reps = cfg.data["repetitions"]  # per flow type
    assert len(runs) == (5 + 2) * sum(reps.values())
    assert {r.factors["switching"] for r in runs if r.factors["host"] == "rb"} == {
        "ecmp-mptcp", "ps-mptcp"}
    assert {r.factors["switching"] for r in runs} == SWITCHING
    assert {r.factors["host"] for r in runs} == {"vanilla", "rb"}
    assert all(r.config.host_kernel == "lab" for r in runs)  # scheduler is the only difference
    assert {r.config.scheduler for r in runs if r.factors["host"] == "rb"} == {"rb"}
    assert cfg.data["workload"]["pattern"] == name
    assert cfg.flow_sizes() == {"query": 128_000 if name == "silent" else 10_000,
                                "short": 500_000, "long": 25_000_000}
    assert (cfg.k, cfg.data["topology"]["links"]["core"]["bw_mbps"], cfg.subflows) == (4, 20, 4)


def test_quick_is_one_repetition_of_query_and_short_with_one_iteration():
    cfg = quick_config(load(REPO / "configs/noisy.yaml"))
    assert cfg.data["workload"]["iterations"] == 1
    runs = expand(cfg, repetitions=1, flow_types=quick_flow_types(cfg),
                  only=parse_only(["switching=ps-mptcp"]))
    assert len(runs) == 1 * 2 * 2
    assert {r.flow_type for r in runs} == {"query", "short"}
    assert quick_flow_types(validate({"workload": {"flow_types": {"a": 1, "b": 2, "c": 3}}})) \
        == ["a", "b"]


def test_only_items_must_be_key_value():
    assert parse_only(["flow_type=query", "host=rb"]) == {"flow_type": "query", "host": "rb"}
    with pytest.raises(ValueError, match="--only 'switching': expected FACTOR=LEVEL"):
        parse_only(["switching"])


def _runs():
    cfg = validate({"seed": 3, "factors": {"switching": {
        "ecmp-tcp": {"switching.mode": "ecmp", "hosts.transport": "tcp"},
        "ps-mptcp": {"switching.mode": "spray", "hosts.transport": "mptcp"}}}})
    return cfg, expand(cfg, repetitions=1, flow_types=["query", "short"])


def _manifest(folder, run, status):
    d = folder / "runs" / run.run_id
    d.mkdir(parents=True, exist_ok=True)
    write_json_atomic(d / "manifest.json", {**base_manifest(run), "status": status})


def test_run_states_and_resume_redo_everything_not_complete(tmp_path):
    _, runs = _runs()
    a, b, c, d = runs
    _manifest(tmp_path, a, "complete")
    _manifest(tmp_path, b, "failed")
    (tmp_path / "runs" / c.run_id / "captures").mkdir(parents=True)  # killed mid-run
    (tmp_path / "runs" / c.run_id / "manifest.json").write_text('{"status": "comp')
    assert [run_state(tmp_path / "runs" / r.run_id) for r in runs] == \
        ["complete", "failed", "partial", "absent"]
    todo, done = split_resume(runs, tmp_path)
    assert done == [a] and todo == [b, c, d]


def test_a_folder_of_another_config_is_not_resumed(tmp_path):
    cfg, _ = _runs()
    check_resumable(tmp_path, cfg)  # empty folder: fine
    (tmp_path / "config.yaml").write_text(cfg.to_yaml())
    check_resumable(tmp_path, cfg)
    other = cfg.with_overrides([("workload.iterations", 1), ("seed", 4)])
    with pytest.raises(ResultsError, match=r"different config \(differs in seed, "
                                           r"workload.iterations\)"):
        check_resumable(tmp_path, other)
    (tmp_path / "config.yaml").unlink()
    (tmp_path / "runs").mkdir()
    with pytest.raises(ResultsError, match=r"runs/ but no config\.yaml"):
        check_resumable(tmp_path, cfg)


def test_lab_skip_reason_names_the_problem_and_the_two_ways_out():
    reason = runner.lab_skip_reason("no /usr/src/linux-source-6.12.tar.xz; run `make setup`")
    assert "no /usr/src/linux-source-6.12.tar.xz" in reason
    assert "resume this folder" in reason and "hosts.kernel: host" in reason


def test_atomic_writes_leave_the_old_file_when_interrupted(tmp_path, monkeypatch):
    path = tmp_path / "manifest.json"
    write_json_atomic(path, {"status": "failed"})

    def boom(*_, **__):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        write_json_atomic(path, {"status": "complete"})
    assert json.loads(path.read_text()) == {"status": "failed"}
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]  # no temp left over


def test_transfers_csv_has_the_columns_analysis_reads(tmp_path):
    assert COLUMNS == ["transfer_id", "group_id", "flow_type", "transport", "client", "server",
                       "client_addr", "server_addr", "server_port", "client_port",
                       "size_bytes", "start_s", "end_s", "ok", "error", "subflows", "cpu_ms",
                       "server_cpu_ms", "placed"]
    row = dict.fromkeys(COLUMNS, 0) | {"ok": False, "error": "refused, twice"}
    write_csv_atomic(tmp_path / "t.csv", COLUMNS, [row])
    back = list(csv.DictReader((tmp_path / "t.csv").open()))
    assert back[0]["error"] == "refused, twice" and back[0]["ok"] == "False"


def test_sysctls_keep_mptcp_and_tcp_keys_only():
    text = ("net.mptcp.enabled = 1\nnet.ipv4.tcp_congestion_control = cubic\n"
            "net.ipv4.tcp_rmem = 4096\t131072\t6291456\nnet.core.somaxconn = 4096\n"
            "sysctl: permission denied on key 'fs.protected_hardlinks'\n")
    assert parse_sysctls(text) == {"net.ipv4.tcp_congestion_control": "cubic",
                                   "net.ipv4.tcp_rmem": "4096 131072 6291456",
                                   "net.mptcp.enabled": "1"}


def test_interrupted_plan_resumes_without_duplicates(tmp_path, monkeypatch):
    cfg, runs = _runs()
    executed: list[str] = []
    interrupt_at = {runs[2].run_id}

    def fake_execute(run, run_dir, on_round=None, keeper=None):
        executed.append(run.run_id)
        manifest = base_manifest(run)
        if run.run_id in interrupt_at:
            interrupt_at.clear()
            write_json_atomic(run_dir / "manifest.json", manifest)  # status failed
            raise KeyboardInterrupt
        (run_dir / "transfers.csv").write_text("x\n")
        manifest["status"] = "complete"
        manifest["transfers"] = {"total": 14, "ok": 14, "failed": 0, "rounds": 1}
        manifest["timings"] = {"build_s": 4.0, "traffic_s": 1.0, "teardown_s": 1.0}
        write_json_atomic(run_dir / "manifest.json", manifest)
        return manifest

    monkeypatch.setattr(one_run, "execute_run", fake_execute)
    folder = runner.prepare_folder(cfg, tmp_path / "out")
    with pytest.raises(KeyboardInterrupt):
        runner.run_plan(cfg, runs, folder, quiet=False)
    plan = json.loads((folder / "plan.json").read_text())
    assert [e["status"] for e in plan["runs"]] == ["complete", "complete", "pending", "pending"]
    assert run_state(folder / "runs" / runs[2].run_id) == "failed"
    outcome = runner.run_plan(cfg, runs, folder, quiet=True)
    assert outcome.count("complete") == 4
    assert executed == [r.run_id for r in runs[:3]] + [r.run_id for r in runs[2:]]
    plan = json.loads((folder / "plan.json").read_text())
    assert sorted(e["run_id"] for e in plan["runs"]) == sorted(r.run_id for r in runs)
    assert {e["status"] for e in plan["runs"]} == {"complete"}
    assert sorted(p.name for p in (folder / "runs").iterdir()) == \
        sorted(r.run_id for r in runs)


def test_a_planned_run_is_found_again_by_id_from_the_folder(tmp_path):
    cfg, runs = _runs()
    folder = runner.prepare_folder(cfg, tmp_path / "out")
    write_json_atomic(folder / "plan.json", plan_document(cfg, runs, {}, None, {}))
    _, run = find_run(folder, runs[3].run_id)
    assert run.to_dict() == runs[3].to_dict()
    assert run.config.data == runs[3].config.data
    with pytest.raises(ResultsError, match="'nope' is not in"):
        find_run(folder, "nope")
    assert guest_main(["execute", str(tmp_path / "elsewhere"), "x"]) == 2


def test_a_network_that_cannot_be_built_fails_its_run_and_the_plan_goes_on(
        tmp_path, monkeypatch):
    class BrokenNetwork:
        def __init__(self, cfg, dp, workdir):
            pass

        def __enter__(self):
            raise NetworkError("e1: `tc qdisc add` failed (exit 2): no such device")

        def __exit__(self, *exc):
            return None

    monkeypatch.setattr(one_run, "preflight", lambda cfg: None)
    monkeypatch.setattr(one_run, "choose", lambda run: Choice("auto", "nftables", "test"))
    monkeypatch.setattr(keeper, "Network", BrokenNetwork)
    cfg, runs = _runs()
    folder = runner.prepare_folder(cfg, tmp_path / "out")
    outcome = runner.run_plan(cfg, runs, folder, quiet=True)
    assert outcome.count("failed") == len(runs)  # every run tried, none aborted the plan
    manifest = json.loads((folder / "runs" / runs[0].run_id / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert manifest["error"] == "NetworkError: e1: `tc qdisc add` failed (exit 2): no such device"
    assert manifest["dataplane"] == {"selected": "nftables: test", "asked": "auto"}
    assert not (folder / "runs" / runs[0].run_id / "transfers.csv").exists()


def test_interface_counters_are_differences_over_the_capture_window():
    from pathdiv.experiments.dataplane.base import PortCounters
    from pathdiv.experiments.manifest import counter_deltas, counter_snapshot

    class FakeLab:
        def __init__(self, n):
            self.n, self.asked = n, []

        def counters(self, switch):
            self.asked.append(switch)
            return {f"{switch}-eth{i}": PortCounters(self.n, 1500 * self.n, 2 * self.n,
                                                     3000 * self.n) for i in range(2)}

    ports = [("e1", "e1-eth0"), ("e1", "e1-eth1"), ("c1", "c1-eth0")]
    net = FakeLab(1)
    before = counter_snapshot(net, ports)
    assert net.asked == ["e1", "c1"] and sorted(before) == ["c1-eth0", "e1-eth0", "e1-eth1"]
    after = counter_snapshot(FakeLab(5), ports)
    assert counter_deltas(before, after)["e1-eth1"] == {
        "rx_packets": 4, "rx_bytes": 6000, "tx_packets": 8, "tx_bytes": 12000}
