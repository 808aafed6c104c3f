"""The fidelity verdict on planted samples, the sample parsers on fixture text, the
repeat of invalid runs and the report's exclusion of them."""

import json
import os
import struct
import subprocess
import sys
import time

import pandas as pd
import pytest

from pathdiv.analysis.report.fidelity import split, verdict_counts
from pathdiv.experiments.config.load import ConfigError, validate
from pathdiv.experiments.dataplane.base import parse_proc_net_dev
from pathdiv.experiments.execute import run as one_run
from pathdiv.experiments.execute import runstate
from pathdiv.experiments.fidelity import attempts, runhooks
from pathdiv.experiments.fidelity.monitor import (
    Monitor,
    ProcessCpu,
    core_shares,
    group_by_namespace,
    parse_pid_cpu_ticks,
    parse_pressure,
    parse_proc_stat,
    parse_softnet_drops,
    switch_losses,
)
from pathdiv.experiments.fidelity.qdiscs import (
    SLACK_BYTES,
    EgressTrack,
    QdiscStat,
    parse_qdisc_dump,
    parse_tc_json,
)
from pathdiv.experiments.fidelity.record import build_record, egress_rates, machine_clock
from pathdiv.experiments.fidelity.verdict import (
    VIRTUAL_REASON,
    CoreShare,
    LinkShare,
    Samples,
    Thresholds,
    judge,
    judge_captures,
)
from pathdiv.experiments.manifest import parse_netstat, write_json_atomic
from pathdiv.experiments.plan.runs import expand
from tests.conftest import REPO

DATA = REPO / "tests" / "data" / "fidelity"
RATE = 20e6
TH = Thresholds.from_config(validate({}).data["fidelity"])


def cores(steal: float, busy: float = 0.5) -> list[CoreShare]:
    return [CoreShare("cpu0", busy, 0.1, steal), CoreShare("cpu1", busy, 0.1, steal)]


def link(name: str, ratio: float, seconds: float = 4.0, drops: int = 0) -> LinkShare:
    return LinkShare(name, RATE, int(ratio * RATE / 8 * seconds), seconds, drops, 100)


def healthy(**kw) -> Samples:
    base = {"duration_s": 10.0, "cores": cores(0.002),
            "links": [link("a1:a1-eth3", 0.99), link("e1:e1-eth0", 0.97)], "rtos": {}}
    return Samples(**{**base, **kw})


# ---- the verdict ---------------------------------------------------------------------
def test_a_healthy_run_is_ok_without_reasons():
    v = judge(healthy(), TH)
    assert (v.verdict, v.reasons) == ("ok", [])
    assert v.figures["worst_link"] == "e1:e1-eth0" and v.figures["worst_link_ratio"] == 0.97


@pytest.mark.parametrize(("steal", "verdict"), [(0.02, "ok"), (0.05, "degraded"),
                                                (0.12, "invalid")])
def test_steal_during_traffic_degrades_then_invalidates(steal, verdict):
    v = judge(healthy(cores=cores(steal)), TH)
    assert v.verdict == verdict
    if verdict != "ok":
        assert v.reasons == [f"steal {100 * steal:.1f} % during traffic"]


def test_a_slow_bottleneck_is_named_with_its_share_of_the_rate():
    v = judge(healthy(links=[link("a1:a1-eth3", 0.99), link("a1:a1-c1", 0.82)]), TH)
    assert v.verdict == "degraded"
    assert v.reasons == ["bottleneck link a1:a1-c1 at 0.82 of its rate while backlogged"]
    assert judge(healthy(links=[link("a1:a1-c1", 0.6)]), TH).verdict == "invalid"


def test_a_link_backlogged_too_briefly_or_unshaped_is_not_judged():
    short = link("a1:a1-c1", 0.3, seconds=0.4)
    unshaped = LinkShare("e1:e1-eth0", None, 10**6, 5.0)
    v = judge(healthy(links=[short, unshaped]), TH)
    assert (v.verdict, v.figures["links_judged"]) == ("ok", 0)


def test_steal_and_a_slow_link_are_both_reported_and_the_worst_decides():
    v = judge(healthy(cores=cores(0.10), links=[link("a1:a1-c1", 0.82)]), TH)
    assert v.verdict == "invalid"
    assert v.summary == ("invalid (steal 10.0 % during traffic; bottleneck link a1:a1-c1 "
                         "at 0.82 of its rate while backlogged)")


def test_rto_bursts_beyond_queue_drops_degrade_or_invalidate():
    burst = judge(healthy(rtos={"h1": 4, "h2": 1}), TH)
    assert burst.verdict == "degraded"
    assert burst.reasons == ["5 TCP timeout(s) beyond the 0 queue drop(s) (most on h1: 4)"]
    assert judge(healthy(rtos={"h1": 30}), TH).verdict == "invalid"
    # incast: the emulated queues dropped, the timeouts are the network's, not the host's
    explained = healthy(rtos={"h1": 30}, links=[link("e1:e1-eth0", 0.98, drops=40)])
    assert judge(explained, TH).verdict == "ok"


def test_kernel_backlog_drops_degrade():
    v = judge(healthy(backlog_drops=3), TH)
    assert v.verdict == "degraded" and "input backlog" in v.reasons[0]


def test_captures_that_lost_packets_degrade_the_run_on_either_clock(tmp_path):
    for clock in ("real", "virtual"):
        record = build_record(healthy(), None, {}, clock)
        manifest: dict = {}
        runhooks.captures(record, {"dropped_by_kernel": 0, "files_full": []}, manifest)
        assert manifest["fidelity"]["verdict"] == "ok"
        assert manifest["fidelity"]["figures"]["capture_dropped"] == 0
        runhooks.captures(record, {"dropped_by_kernel": 12, "files_full": ["e1-eth0"]},
                          manifest)
        runhooks.save(record, tmp_path)
        saved = json.loads((tmp_path / "fidelity.json").read_text())
        assert manifest["fidelity"]["verdict"] == saved["verdict"] == "degraded"
        assert saved["figures"]["capture_dropped"] == 12
        assert any("lost 12 packet(s)" in r for r in saved["reasons"])
        assert any("e1-eth0" in r and "packet cap" in r for r in saved["reasons"])
    worse, _ = judge_captures("invalid", ["slow"], 5, [])
    assert worse == "invalid"  # a loss never makes a run better
    runhooks.captures(None, {"dropped_by_kernel": 5}, manifest := {})
    assert manifest == {}  # no monitor, nothing to judge into
    runhooks.save(None, tmp_path / "unmonitored")
    assert not (tmp_path / "unmonitored").exists()


def test_the_virtual_clock_is_ok_whatever_the_host_did():
    awful = healthy(cores=cores(0.4), links=[link("a1:a1-c1", 0.3)], rtos={"h1": 99})
    v = judge(awful, TH, clock="virtual")
    assert (v.verdict, v.reasons) == ("ok", [VIRTUAL_REASON])
    assert v.figures["steal_pct"] == 40.0  # still recorded
    with pytest.raises(ValueError, match="clock 'wall': expected one of real, virtual"):
        judge(awful, TH, clock="wall")


def test_clock_of_a_uml_time_travel_kernel_is_virtual():
    assert machine_clock("mem=1G time-travel=inf-cpu root=/dev/ubda") == "virtual"
    assert machine_clock("console=ttyS0 quiet") == "real"


def test_thresholds_are_config_keys_validated_like_the_rest():
    cfg = validate({"fidelity": {"steal_invalid_pct": 20, "max_repeats": 0}})
    assert Thresholds.from_config(cfg.data["fidelity"]).steal_invalid_pct == 20
    with pytest.raises(ConfigError) as err:
        validate({"fidelity": {"link_rate_invalid": 1.5, "max_repeats": -1, "nope": 1}})
    text = str(err.value)
    assert "fidelity.link_rate_invalid: 1.5 is not allowed; expected a fraction" in text
    assert ("fidelity.max_repeats: -1 is not allowed; expected an integer >= 0 and <= 10"
            in text)
    assert "fidelity.nope: unknown key" in text
    with pytest.raises(ConfigError, match=r"fidelity.steal_degraded_pct: 12 is not allowed; "
                       r"expected at most fidelity.steal_invalid_pct \(10\)"):
        validate({"fidelity": {"steal_degraded_pct": 12}})


# ---- parsers -------------------------------------------------------------------------
def test_proc_stat_gives_per_core_busy_softirq_and_steal_fractions():
    before = parse_proc_stat((DATA / "proc_stat.txt").read_text())
    after = parse_proc_stat((DATA / "proc_stat_after.txt").read_text())
    assert set(before) == {"cpu0", "cpu1"}  # the summary line is not a core
    assert before["cpu0"] == (1000, 0, 500, 8000, 100, 0, 100, 300)
    c0, c1 = core_shares(before, after)
    # cpu0: +100 user +50 system +250 idle +50 softirq +50 steal = 500 ticks
    assert (c0.core, c0.busy, c0.softirq, c0.steal) == ("cpu0", 0.4, 0.1, 0.1)
    # cpu1: +300 user +100 system +50 idle +10 irq +100 softirq +30 steal = 590
    assert c1.busy == pytest.approx(510 / 590) and c1.steal == pytest.approx(30 / 590)


def test_netstat_gives_tcp_timeouts_of_the_tcpext_section():
    fields = parse_netstat((DATA / "netstat.txt").read_text())
    assert fields["TCPTimeouts"] == 17 and "MPTCPTimeouts" not in fields
    assert parse_netstat("") == {}


def test_softnet_and_pressure_files():
    assert parse_softnet_drops((DATA / "softnet_stat.txt").read_text()) == 0x1A
    assert parse_pressure((DATA / "pressure_cpu.txt").read_text()) == 131346943
    assert parse_pressure("") is None


def test_proc_net_dev_of_a_namespace():
    counters = parse_proc_net_dev((DATA / "proc_net_dev.txt").read_text())
    assert counters["a1-eth2"].tx_bytes == 1514000 and counters["a1-eth2"].rx_packets == 40


def test_tc_json_keeps_each_interfaces_root_qdisc():
    stats = parse_tc_json((DATA / "tc_qdisc.json").read_text())
    assert stats == {"a1-eth2": QdiscStat(1514000, 1000, 12, 340, 90840, 60),
                     "lo": QdiscStat(0, 0, 0, 0, 0, 0)}


def _nlattr(kind: int, payload: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(payload), kind) + payload
    return raw + bytes(-len(raw) % 4)


def test_netlink_qdisc_dump_is_read_like_tc():
    stats2 = _nlattr(1, struct.pack("=QI", 1514000, 1000) + bytes(4)) \
        + _nlattr(3, struct.pack("=IIIII", 60, 90840, 12, 0, 340))
    attrs = _nlattr(1, b"htb\0") + _nlattr(7, stats2)
    tcmsg = struct.pack("=BBHiIII", 0, 0, 0, 5, 0x10000, 0xFFFFFFFF, 0)
    msg = struct.pack("=IHHII", 16 + len(tcmsg) + len(attrs), 36, 2, 1, 0) + tcmsg + attrs
    child = struct.pack("=BBHiIII", 0, 0, 0, 5, 0x100000, 0x10001, 0)
    msg2 = struct.pack("=IHHII", 16 + len(child), 36, 2, 1, 0) + child
    stats, done = parse_qdisc_dump(msg + msg2)
    assert (stats, done) == ({5: QdiscStat(1514000, 1000, 12, 340, 90840, 60)}, False)
    assert parse_qdisc_dump(struct.pack("=IHHII", 20, 3, 2, 1, 0) + bytes(4)) == ({}, True)


def _stat(sent: float, queued: float) -> QdiscStat:
    """An egress's root qdisc having sent `sent` and holding `queued` bytes."""
    return QdiscStat(round(sent), 0, 0, 0, round(queued), 1 if queued else 0)


def test_a_working_egress_is_judged_on_what_it_surely_had_to_send():
    per_s = RATE / 8  # 2.5 MB/s
    track = EgressTrack(RATE)
    track.add(0.0, _stat(0, 0))                  # idle: nothing to judge
    track.add(0.05, _stat(0, 150_000))           # a deep queue forms
    track.add(0.10, _stat(per_s * 0.05, 140_000))  # it sent at its rate: 125 kB
    track.add(0.15, _stat(per_s * 0.10, 20_000))
    track.add(0.20, _stat(per_s * 0.10 + 20_000, 0))  # drained what it held, then idle
    share = track.share("a1:a1-eth1", RATE)
    cap = per_s * 0.05 - SLACK_BYTES
    assert share.backlogged_s == pytest.approx(round(2 * cap / per_s + (20_000 - SLACK_BYTES)
                                                     / per_s, 4))
    assert share.ratio == pytest.approx(1.0, abs=1e-3)


def test_an_egress_fed_in_bursts_but_limited_further_on_is_not_a_false_alarm():
    # seed 004 on the real clock (2026-11): a 20 Mbit/s access link whose traffic was held
    # to 10 Mbit/s further on held a burst at every sample and was empty in between; the
    # old rule (queue non-empty at both ends: the whole interval) judged it at 0.52
    per_s = RATE / 8
    track = EgressTrack(RATE)
    for i in range(41):
        track.add(i * 0.2, _stat(i * per_s * 0.2 / 2, 30_000))  # half its rate
    share = track.share("h1:h1-eth0", RATE)
    assert share.ratio == pytest.approx(1.0, abs=1e-3)
    assert share.backlogged_s == pytest.approx(40 * (30_000 - SLACK_BYTES) / per_s, abs=1e-3)


def test_a_slow_egress_with_a_standing_queue_shows_its_share_of_the_rate():
    per_s = RATE / 8
    track = EgressTrack(RATE)
    for i in range(41):  # 40 % of its rate with 150 kB always queued, sampled at 50 ms
        track.add(i * 0.05, _stat(i * per_s * 0.05 * 0.4, 150_000))
    share = track.share("e1:e1-eth0", RATE)
    cap = per_s * 0.05 - SLACK_BYTES
    assert share.ratio == pytest.approx(per_s * 0.05 * 0.4 / cap, rel=1e-3)
    assert 0.4 < share.ratio < 0.42 and share.backlogged_s == pytest.approx(
        40 * cap / per_s, abs=1e-3)
    assert EgressTrack(None).share("x:y", None).ratio is None  # unshaped: never judged


def test_every_link_end_gets_its_configured_rate():
    topo = validate({"topology": {"links": {"core": {"bw_mbps": 40}}}}).topology()
    rates = egress_rates(topo)
    assert len(rates) == 2 * len(topo.links)
    core = next(lk for lk in topo.links if lk.b.node.startswith("c"))
    assert rates[f"{core.a.node}:{core.a.intf}"] == rates[f"{core.b.node}:{core.b.intf}"] == 40e6


# ---- repeating invalid runs ----------------------------------------------------------
def _fake_execute(verdicts: list[str], executed: list[str]):
    def fake(run, run_dir, on_round=None, keeper=None):
        n = len(executed)
        executed.append(run.run_id)
        (run_dir / "transfers.csv").write_text(f"attempt {n + 1}\n")
        manifest = {**runstate.base_manifest(run), "status": "complete",
                    "transfers": {"total": 1, "ok": 1, "failed": 0, "rounds": 1},
                    "timings": {"build_s": 1.0, "traffic_s": 1.0, "teardown_s": 1.0},
                    "fidelity": {"verdict": verdicts[n], "reasons": [f"reason {n + 1}"]}}
        write_json_atomic(run_dir / "manifest.json", manifest)
        return manifest
    return fake


def test_an_invalid_run_is_repeated_and_every_attempt_kept(tmp_path, monkeypatch):
    cfg = validate({"fidelity": {"max_repeats": 2}})
    run = expand(cfg, repetitions=1, flow_types=["query"])[0]
    executed: list[str] = []
    monkeypatch.setattr(one_run, "execute_run", _fake_execute(["invalid", "invalid", "ok"],
                                                             executed))
    said: list[str] = []
    run_dir = tmp_path / "runs" / run.run_id
    run_dir.mkdir(parents=True)
    manifest = one_run.execute_attempts(run, run_dir, say=said.append)
    assert len(executed) == 3
    assert [(a["attempt"], a["folder"], a["verdict"], a["reasons"])
            for a in manifest["attempts"]] == [
        (1, "attempt-1", "invalid", ["reason 1"]), (2, "attempt-2", "invalid", ["reason 2"]),
        (3, ".", "ok", ["reason 3"])]
    assert json.loads((run_dir / "manifest.json").read_text())["attempts"] == \
        manifest["attempts"]
    assert (run_dir / "attempt-1" / "transfers.csv").read_text() == "attempt 1\n"
    assert (run_dir / "attempt-2" / "manifest.json").is_file()
    assert (run_dir / "transfers.csv").read_text() == "attempt 3\n"
    assert "attempt 1 invalid (reason 1)" in said[0] and "repeating (attempt 2 of at most 3)" \
        in said[0]
    assert runstate.run_state(run_dir) == "complete"


def test_repeats_are_bounded_and_other_verdicts_are_not_repeated(tmp_path, monkeypatch):
    cfg = validate({"fidelity": {"max_repeats": 1}})
    run = expand(cfg, repetitions=1, flow_types=["query"])[0]
    for verdicts, runs in ((["invalid"] * 3, 2), (["degraded"], 1)):
        executed: list[str] = []
        monkeypatch.setattr(one_run, "execute_run", _fake_execute(verdicts, executed))
        run_dir = tmp_path / verdicts[0] / run.run_id
        run_dir.mkdir(parents=True)
        manifest = one_run.execute_attempts(run, run_dir)
        assert len(executed) == runs == len(manifest["attempts"])
        assert manifest["fidelity"]["verdict"] == verdicts[0]


def test_a_repeat_that_fails_still_lists_the_kept_attempt(tmp_path, monkeypatch):
    cfg = validate({"fidelity": {"max_repeats": 1}})
    run = expand(cfg, repetitions=1, flow_types=["query"])[0]
    executed: list[str] = []
    invalid_first = _fake_execute(["invalid"], executed)

    def fake(run, run_dir, on_round=None, keeper=None):
        if executed:  # the repeat: the network broke
            manifest = {**runstate.base_manifest(run), "error": "NetworkError: broken"}
            write_json_atomic(run_dir / "manifest.json", manifest)
            return manifest
        return invalid_first(run, run_dir, on_round)

    monkeypatch.setattr(one_run, "execute_run", fake)
    run_dir = tmp_path / run.run_id
    run_dir.mkdir()
    manifest = one_run.execute_attempts(run, run_dir)
    assert [(a["folder"], a["status"], a["verdict"]) for a in manifest["attempts"]] == [
        ("attempt-1", "complete", "invalid"), (".", "failed", "unknown")]
    assert runstate.run_state(run_dir) == "failed"  # resume redoes it from scratch


def test_an_earlier_attempt_is_never_overwritten(tmp_path):
    (tmp_path / "attempt-1").mkdir()
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(FileExistsError, match="never overwritten"):
        attempts.shelve(tmp_path, 1)


# ---- the report leaves invalid runs out ----------------------------------------------
def _metrics() -> pd.DataFrame:
    rows = []
    for run, (ft, verdict, groups) in {"r1": ("query", "ok", 3), "r2": ("query", "invalid", 3),
                                       "r3": ("short", "degraded", 2),
                                       "r4": ("short", "invalid", 2),
                                       "r5": ("short", "ok", 2)}.items():
        rows += [{"run_id": run, "flow_type": ft, "condition": "noisy", "fidelity": verdict,
                  "group_id": g, "fct_s": 1.0} for g in range(groups)]
    return pd.DataFrame(rows)


def test_invalid_runs_are_left_out_and_counted():
    metrics = _metrics()
    chosen = split(metrics)
    assert (len(chosen.kept), chosen.rows_left_out, chosen.runs_left_out) == (7, 5, ["r2", "r4"])
    assert set(chosen.kept["fidelity"]) == {"ok", "degraded"}
    assert chosen.note().startswith("5 observation(s) of 2 run(s) judged invalid")
    everything = split(metrics, include_invalid=True)
    assert (len(everything.kept), everything.rows_left_out) == (12, 0)
    assert "--include-invalid" in everything.note()


def test_verdict_counts_count_runs_per_cluster():
    table = verdict_counts(_metrics(), ["condition", "flow_type"])
    assert table.to_dict("records") == [
        {"condition": "noisy", "flow_type": "query", "ok": 1, "degraded": 0, "invalid": 1},
        {"condition": "noisy", "flow_type": "short", "ok": 1, "degraded": 1, "invalid": 1}]


def test_metrics_without_a_fidelity_column_are_all_kept():
    metrics = _metrics().drop(columns="fidelity")
    chosen = split(metrics)
    assert (len(chosen.kept), chosen.note()) == (12, None)


def test_the_report_says_how_many_invalid_runs_it_left_out(tmp_path):
    from pathdiv.analysis.report.analyze import write_report
    from tests.support.study_data import synthetic_metrics

    metrics = synthetic_metrics(3, repetitions=4, conditions=["noisy"], flow_types=["long"])
    runs = sorted(set(metrics["run_id"]))
    bad = runs[:2]
    metrics["fidelity"] = ["invalid" if r in bad else "ok" for r in metrics["run_id"]]
    metrics.to_csv(tmp_path / "metrics.csv", index=False)
    run_dir = tmp_path / "runs" / bad[0]
    run_dir.mkdir(parents=True)
    (run_dir / "manifest.json").write_text(json.dumps({
        "run_id": bad[0], "status": "complete",
        "fidelity": {"verdict": "invalid", "reasons": ["steal 14.0 % during traffic"]}}))
    left_out = int(metrics["run_id"].isin(bad).sum())
    write_report(tmp_path)
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["n_observations"] == len(metrics) - left_out
    md = (tmp_path / "report.md").read_text()
    assert f"{left_out} observation(s) of 2 run(s) judged invalid" in md
    assert "## Fidelity" in md and "steal 14.0 % during traffic" in md
    write_report(tmp_path, include_invalid=True)
    assert json.loads((tmp_path / "stats.json").read_text())["n_observations"] == len(metrics)


def test_each_runs_fidelity_figures_land_beside_metrics_csv(tmp_path):
    from pathdiv.analysis.report.analyze import write_report
    from tests.support.study_data import synthetic_metrics

    metrics = synthetic_metrics(2, repetitions=4, conditions=["noisy"], flow_types=["long"])
    metrics["fidelity"] = "ok"
    metrics.to_csv(tmp_path / "metrics.csv", index=False)
    run = str(metrics["run_id"].iloc[0])
    (tmp_path / "runs" / run).mkdir(parents=True)
    (tmp_path / "runs" / run / "manifest.json").write_text(json.dumps({
        "run_id": run, "flow_type": "long", "factors": {"switching": "static-tcp"},
        "repetition": 1, "status": "complete", "clock": "real",
        "dataplane": {"dataplane": "bmv2"},
        "fidelity": {"verdict": "degraded", "clock": "real", "reasons": ["steal 4.0 %"],
                     "figures": {"steal_pct": 4.0, "switch_cpu_s": 31.5,
                                 "switch_lost_packets": 120, "qdisc_drops": 7}}}))
    write_report(tmp_path)
    table = pd.read_csv(tmp_path / "fidelity.csv")
    assert table.to_dict("records") == [{
        "run_id": run, "flow_type": "long", "switching": "static-tcp", "repetition": 1,
        "dataplane": "bmv2", "clock": "real", "verdict": "degraded", "steal_pct": 4.0,
        "switch_cpu_s": 31.5,
        "switch_lost_packets": 120, "qdisc_drops": 7, "reasons": "steal 4.0 %"}]
    (tmp_path / "fidelity.csv").unlink()
    write_report(tmp_path, stats_only=True)  # no manifests read: no table
    assert not (tmp_path / "fidelity.csv").exists()


def test_a_config_that_disturbs_links_on_purpose_is_judged_on_steal_only():
    from pathdiv.experiments.fidelity.verdict import (
        CoreShare,
        LinkShare,
        Samples,
        Thresholds,
        judge,
        planned_disturbance,
    )

    assert planned_disturbance({"topology": {"links": {"host": {"loss_pct": 0}}}}) is None
    planned = planned_disturbance({"events": [{"at_s": 1, "link": "a1-c1", "action": "down"}],
                                   "topology": {"links": {"host": {"loss_pct": 1}}}})
    assert planned == "1 link event(s) and loss_pct"
    slow = Samples(10.0, [CoreShare("cpu0", 0.5, 0.1, 0.0)],
                   [LinkShare("a1:a1-eth2", 20e6, 5_000_000, 10.0)], {"h1": 400})
    assert judge(slow, Thresholds()).verdict == "invalid"
    verdict = judge(slow, Thresholds(), planned=planned)
    assert verdict.verdict == "ok"
    assert verdict.reasons == ["link rates and timeouts not judged: the config disturbs the "
                               "network on purpose (1 link event(s) and loss_pct)"]
    stolen = Samples(10.0, [CoreShare("cpu0", 0.5, 0.1, 0.2)], [], {})
    assert judge(stolen, Thresholds(), planned=planned).verdict == "invalid"


# ---- software switches: CPU, packets lost outside the emulated queues, retransmissions --
def test_a_process_cpu_is_read_past_a_command_name_with_spaces_and_parentheses():
    stat = ("4242 (simple switch) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 "
            "731 269 0 0 20 0 5 0 123 456 78 18446744073709551615")
    assert parse_pid_cpu_ticks(stat) == 731 + 269
    assert parse_pid_cpu_ticks("") == 0


def test_processes_are_grouped_by_the_namespace_of_each_node():
    namespace_of = {10: "net:[1]", 11: "net:[1]", 12: "net:[2]", 20: "net:[2]",
                    30: "net:[3]", 40: "net:[9]"}
    groups = group_by_namespace(namespace_of, {"e1": 10, "a1": 20, "c1": 99})
    assert groups == {"e1": [10, 11], "a1": [12, 20], "c1": []}


def _track(*stats: QdiscStat) -> EgressTrack:
    track = EgressTrack()
    for t, stat in enumerate(stats):
        track.add(float(t), stat)
    return track


def test_a_switch_loses_what_it_received_but_neither_sent_dropped_nor_queued():
    # e1 received 1000 + 500 packets; its egresses sent 1390, dropped 20, hold 10 more
    tracks = {"e1:e1-eth0": _track(QdiscStat(0, 100, 0, 0, 0, 0),
                                   QdiscStat(0, 1000, 5, 0, 15140, 10)),
              "e1:e1-eth1": _track(QdiscStat(0, 0, 0, 0, 0, 0),
                                   QdiscStat(0, 490, 15, 0, 0, 0)),
              "a1:a1-eth0": _track(QdiscStat(0, 0, 0, 0, 0, 0),
                                   QdiscStat(0, 7, 0, 0, 0, 0))}
    first = {"e1": {"e1-eth0": 100, "e1-eth1": 0}, "a1": {"a1-eth0": 0}}
    last = {"e1": {"e1-eth0": 1100, "e1-eth1": 500}, "a1": {"a1-eth0": 7}}
    assert switch_losses(first, last, tracks) == {"e1": 1500 - 1390 - 20 - 10, "a1": 0}


def test_switch_cpu_losses_and_retransmissions_are_figures_not_verdicts():
    samples = Samples(10.0, [CoreShare("cpu0", 1.0, 0.1, 0.0)], [link("e1:e1-eth0", 0.97)],
                      retrans={"h1": 40, "h2": 2}, switch_cpu_s={"e1": 6.0, "a1": 9.0},
                      switch_lost={"e1": 80, "a1": 0}, capture_cpu_s=1.5)
    v = judge(samples, TH)
    assert v.verdict == "ok"
    assert (v.figures["retrans_segs"], v.figures["switch_cpu_s"],
            v.figures["switch_cpu_cores"], v.figures["switch_lost_packets"],
            v.figures["capture_cpu_s"]) == (42, 15.0, 1.5, 80, 1.5)
    plain = judge(Samples(10.0), TH).figures
    assert (plain["switch_cpu_s"], plain["switch_lost_packets"]) == (None, None)


def test_the_monitor_reads_switch_processes_and_ports_from_proc():
    """This process's own namespace stands in for a switch's: its processes are found,
    their CPU counted, its ports' received packets read at the first and last sample.
    Beside it a spawner starts and ends processes that burn CPU (a compiler on a busy CI
    machine): the switch's CPU is what its processes spent meanwhile, never less than
    this test's own spinning, however many of them exit before the last sample."""
    me = os.getpid()
    spawner = subprocess.Popen([sys.executable, "-c", SPAWNER])
    try:
        time.sleep(0.3)  # children already running at the first sample, some exit later
        monitor = Monitor({"s1": me}, {}, [], 0.05, switches=["s1"])
        monitor.start()
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            pass
        samples = monitor.stop()
    finally:
        spawner.kill()
        spawner.wait()
    assert samples.switch_cpu_s["s1"] >= 1.0  # at least this test's own spinning
    assert set(samples.switch_lost) == {"s1"}
    assert not monitor.errors


# Starts a child burning CPU for 0.05-0.4 s every 20 ms, a dozen alive at a time
SPAWNER = """
import random, subprocess, sys, time
burn = ("import sys, time\nend = time.monotonic() + float(sys.argv[1])\n"
        "while time.monotonic() < end: pass")
kids = []
while True:
    kids = [k for k in kids if k.poll() is None]
    if len(kids) < 12:
        kids.append(subprocess.Popen([sys.executable, "-S", "-c", burn,
                                      str(random.uniform(0.05, 0.4))]))
    time.sleep(0.02)
"""


def test_process_cpu_counts_each_process_between_the_samples_it_was_seen_in():
    cpu = ProcessCpu()
    cpu.add({(10, 1): 100, (11, 1): 50})           # at the first sample
    cpu.add({(10, 1): 130, (12, 7): 20})           # 11 exited; 12 is new: from zero
    cpu.add({(10, 1): 150, (11, 9): 5})            # pid 11 reused: another process
    assert cpu.total() == (150 - 100) + 0 + 20 + 5  # 11 spent nothing after the first
    gone = ProcessCpu()  # a sum over the processes present at each sample: -500
    gone.add({(1, 1): 500})
    gone.add({})
    assert gone.total() == 0
