"""The plan's ETA: weighed by expected traffic, lane by lane, calibrated from this
machine's history of runs (planted here), honest from the first second."""

from __future__ import annotations

import json
import random

import pytest

from pathdiv.experiments.config.load import load
from pathdiv.experiments.plan import history
from pathdiv.experiments.plan.estimate import (
    BACKGROUND_LEAD_S,
    BOOT_S,
    MIN_CONFIG_RUNS,
    Estimator,
    PlanClock,
    boot_of,
    calibrate,
    expected_run_s,
    fit_scales,
    format_duration,
    key_of,
    parts,
    phases_s,
    record_key,
    record_work,
    run_work,
)
from pathdiv.experiments.plan.lanes import (
    boots,
    deal,
    default_jobs,
    jobs_problem,
    phases,
)
from pathdiv.experiments.plan.runs import expand
from pathdiv.experiments.traffic.paths_run import BACKGROUND_WARMUP_S
from tests.conftest import REPO

# The plans below build a network for every run (network.reuse false), the model's
# plain case; reuse's own arithmetic is test_with_network_reuse_a_lane_pays_...
FRESH = ("network.reuse", False)


def host_plan():
    cfg = load(REPO / "configs/noisy.yaml").with_overrides(
        [("factors.host", {"host": {"hosts.kernel": "host"}}), FRESH])
    return expand(cfg, repetitions=1)


def lab_plan(name="noisy", reps=2):
    return expand(load(REPO / f"configs/{name}.yaml").with_overrides([FRESH]),
                  repetitions=reps)


def one_lane(runs):
    return [[runs]]


def test_a_long_run_is_expected_to_take_longer_than_a_query_run():
    runs = host_plan()
    by_flow = {r.flow_type: expected_run_s(r) for r in runs}
    # 7 servers x 25 MB into one 20 Mbit/s host link is ~75 s per round
    assert by_flow["long"] > 5 * by_flow["query"] > 5 * 15
    assert by_flow["short"] > by_flow["query"]


def test_a_runs_work_counts_its_payload_rounds_and_nodes():
    run = next(r for r in lab_plan() if r.flow_type == "long")
    work = run_work(run.config, run.flow_type, run.workload_seed)
    # noisy, k=4, 2 iterations: 2 groups x 7 servers x 25 MB per iteration
    assert work.payload_mb == pytest.approx(2 * 2 * 7 * 25)
    assert (work.nodes, work.rounds) == (36, 2)
    assert work.sim_s == pytest.approx(2 * 7 * 25e6 * 8 / 20e6)


def test_a_parallel_paths_run_is_one_measured_fetch_not_the_patterns_rounds():
    # seed003's Fig. 8 at the paper's settings: 2 x 100 Mbit/s, 2 background downloads
    # per path, 800 MB asked, the fetch cut at 60 s. Its first ETA read 11 h 34 min for
    # 30 runs that take about 90 min: the silent pattern's 24 rounds of 800 MB among the
    # six hosts, background hosts included.
    cfg = load(REPO / "configs/seed003-fig8-paper.yaml")
    run = expand(cfg, repetitions=1)[0]
    work = run_work(run.config, run.flow_type, run.workload_seed)
    assert work.rounds == 1
    assert work.sim_s == pytest.approx(BACKGROUND_LEAD_S + 60)
    # both bottlenecks full for that time, each packet over three links
    assert work.payload_mb == pytest.approx(2 * 100e6 * 62 / 8 / 1e6)
    assert work.link_mb == pytest.approx(3 * work.payload_mb)
    assert BACKGROUND_LEAD_S == BACKGROUND_WARMUP_S


def test_a_parallel_paths_fetch_without_a_cut_lasts_its_share_of_the_paths():
    cfg = load(REPO / "configs/seed003-fig8-paper.yaml").with_overrides(
        [("workload.measure_s", 0), ("workload.flow_types", {"long": "100MB"})])
    run = expand(cfg, repetitions=1)[0]
    work = run_work(run.config, run.flow_type, run.workload_seed)
    # a third of each 100 Mbit/s path beside its two background downloads
    assert work.sim_s == pytest.approx(BACKGROUND_LEAD_S + 100e6 * 8 / (2 * 100e6 / 3))
    slow = load(REPO / "configs/seed003-fig8-paper.yaml").with_overrides(
        [("workload.measure_s", 0), ("workload.timeout_s", 5)])
    run = expand(slow, repetitions=1)[0]
    assert run_work(run.config, run.flow_type, run.workload_seed).sim_s == \
        pytest.approx(BACKGROUND_LEAD_S + 5)


def test_the_eta_of_a_plan_with_its_long_runs_left_is_not_a_count():
    runs = host_plan()
    short_first = sorted(runs, key=lambda r: r.flow_type != "query")  # queries first
    expected = {r.run_id: expected_run_s(r) for r in runs}
    clock = PlanClock(one_lane(short_first), expected)
    total = clock.remaining_s()
    assert total == pytest.approx(sum(expected.values()))
    for run in short_first[:5]:  # the five query runs end, each as expected
        clock.finished(run.run_id, expected[run.run_id])
    left = clock.remaining_s()
    # counted by runs, 2/3 of the plan would be left; by expected traffic, nearly all of it
    assert left > 0.85 * total > 0.67 * total
    assert clock.text().startswith(f"~{format_duration(left)} left")


def test_a_run_past_its_estimate_is_said_to_be_so_not_about_to_end():
    runs = host_plan()[:2]
    expected = {r.run_id: expected_run_s(r) for r in runs}
    clock = PlanClock(one_lane(runs), expected, source="from default costs")
    first = runs[0]
    clock.started(first.run_id, 0.0)
    on_time = clock.text(now=expected[first.run_id] / 2)
    assert "past its estimate" not in on_time
    late_by = 600.0
    now = expected[first.run_id] + late_by
    # the ETA still counts the run under way as ending now, and says how late it is
    assert clock.remaining_s(now) == pytest.approx(expected[runs[1].run_id])
    assert clock.overdue_s(now) == pytest.approx(late_by)
    assert f"a run under way is {format_duration(late_by)} past its estimate" in clock.text(now)


def test_slower_runs_stretch_the_eta_but_one_run_does_not_swing_it():
    runs = host_plan()[:6]
    expected = {r.run_id: expected_run_s(r) for r in runs}
    clock = PlanClock(one_lane(runs), expected, source="from default costs")
    assert clock.text().endswith("left (from default costs)")
    first = runs[0]
    clock.finished(first.run_id, 2 * expected[first.run_id])  # twice as slow as expected
    assert 1.0 < clock.scale() < 2.0  # weighed against three runs' worth of the estimate
    assert "x1." in clock.text()
    for run in runs[1:4]:
        clock.finished(run.run_id, 2 * expected[run.run_id])
    assert clock.scale() > 1.5  # the pace wins as the evidence grows
    scale = clock.scale()
    clock.finished(runs[4].run_id, None)  # a failed run: left out of the ratio
    assert clock.scale() == scale
    rest = expected[runs[5].run_id]
    assert clock.remaining_s() == pytest.approx(rest * scale)


def test_lanes_at_once_take_as_long_as_the_slowest_and_the_run_in_progress_counts():
    runs = lab_plan(reps=1)
    expected = {r.run_id: expected_run_s(r) for r in runs}
    lanes = deal(runs, 2, lambda r: expected[r.run_id])
    clock = PlanClock([lanes], expected, boot=boot_of)
    # a boot per lane, and one more before each run larger than lab.own_boot_above_kb
    per_lane = [sum(expected[r.run_id] for r in lane) + BOOT_S * len(boots(lane))
                for lane in lanes]
    assert sum(len(boots(lane)) for lane in lanes) > len(lanes)
    assert clock.remaining_s() == pytest.approx(max(per_lane))
    assert max(per_lane) < 0.6 * sum(per_lane)  # two lanes: about half the serial time
    first = lanes[0][0]
    clock.started(first.run_id, now=100.0)
    assert clock.remaining_s(now=110.0) <= max(per_lane)
    assert clock.remaining_s(now=110.0) >= max(per_lane) - 10.0


def test_phases_run_host_runs_then_one_lab_phase_per_clock():
    lab = lab_plan(reps=1)
    real = [r for r in expand(load(REPO / "configs/noisy.yaml").with_overrides(
        [("lab.clock", "real")]), repetitions=1)]
    host = host_plan()
    out = phases(host + lab, 2, expected_run_s)
    assert [what for what, _ in out] == ["host", "virtual"]
    assert len(out[0][1]) == 1 and len(out[1][1]) == 2
    assert sorted(r.run_id for lane in out[1][1] for r in lane) == sorted(
        r.run_id for r in lab)
    only_real = phases(real, 4, expected_run_s)
    assert [(what, len(lanes)) for what, lanes in only_real] == [("real", 1)]
    one = phases(lab, 1, expected_run_s)
    total_one = phases_s([lanes for _, lanes in one], expected_run_s, boot_of)
    total_two = phases_s([lanes for _, lanes in phases(lab, 2, expected_run_s)],
                         expected_run_s, boot_of)
    (lane,) = one[0][1]
    assert total_one == pytest.approx(sum(map(expected_run_s, lab)) + BOOT_S * len(boots(lane)))
    assert total_two < 0.6 * total_one


def test_jobs_default_to_one_lab_kernel_per_core_as_ram_allows():
    runs = lab_plan(reps=1)  # lab.memory_mb 1536: 1600 MB a lab kernel
    assert default_jobs(runs, cores=2, ram_mb=24_000) == 2
    assert default_jobs(runs, cores=8, ram_mb=4_300) == 2  # (4300 - 1024) // 1600
    assert default_jobs(runs, cores=8, ram_mb=2_000) == 1
    assert default_jobs(runs[:1], cores=8, ram_mb=24_000) == 1  # one run, one lane
    assert default_jobs(host_plan(), cores=8, ram_mb=24_000) == 1


@pytest.mark.parametrize("jobs, words", [
    (0, "from 1 to 64"), (65, "from 1 to 64"), (20, "use --jobs 2 or lower lab.memory_mb"),
])
def test_a_jobs_count_this_machine_cannot_hold_is_refused_saying_what_would(jobs, words):
    problem = jobs_problem(jobs, lab_plan(reps=1), cores=2, ram_mb=4_300)
    assert words in problem and f"--jobs {jobs}" in problem
    assert jobs_problem(2, lab_plan(reps=1), cores=2, ram_mb=24_000) == ""


# ---- calibration from planted histories -------------------------------------------------
def machine(run, fixed=40.0, per_mb=0.05, noise=0.0, rng=None):
    """A planted machine: a run costs `fixed` s per 36 nodes and `per_mb` s per MB."""
    work = run_work(run.config, run.flow_type, run.workload_seed)
    wall = fixed * work.nodes / 36 + per_mb * work.payload_mb
    return wall * (1 + (rng.uniform(-noise, noise) if rng else 0.0))


def planted(runs, **kw):
    return [history.record(r, machine(r, **kw), "kernel", 2, 1.0, host="lab1")
            for r in runs]


def test_calibrated_from_other_plans_the_eta_at_zero_is_within_a_quarter():
    """History from silent runs predicts a noisy plan on a machine unlike the defaults
    (a fixed cost 1.5x and a per-MB cost half the defaults'), with 10 % noise."""
    rng = random.Random(3)
    recorded = planted(lab_plan("silent", reps=2), noise=0.1, rng=rng)
    est = Estimator(calibrate(recorded))
    plan = lab_plan("noisy", reps=2)
    actual = sum(machine(r) for r in plan)
    predicted = sum(est.run_s(r) for r in plan)
    assert abs(predicted / actual - 1) < 0.25
    by_default = sum(expected_run_s(r) for r in plan)
    assert abs(by_default / actual - 1) > abs(predicted / actual - 1)
    assert "recorded on this machine" in est.source([key_of(plan[0])])


def test_the_clock_at_zero_runs_says_what_the_check_says():
    plan = lab_plan(reps=1)
    est = Estimator(calibrate(planted(plan)))
    lanes = [lanes for _, lanes in phases(plan, 2, est.run_s)]
    clock = PlanClock(lanes, {r.run_id: est.run_s(r) for r in plan},
                      est.short_source([key_of(plan[0])]), boot=boot_of)
    assert clock.remaining_s() == pytest.approx(phases_s(lanes, est.run_s, boot_of))
    assert clock.text().endswith(f"(from {len(plan)} recorded runs)")


def test_only_the_newest_runs_of_a_key_count():
    plan = lab_plan(reps=2)
    old = planted(plan * 3, fixed=80.0)  # before a speed-up
    new = planted(plan * 3, fixed=20.0)
    fits = calibrate(old + new, recent=len(plan) * 3)
    est = Estimator(fits)
    run = next(r for r in plan if r.flow_type == "query")
    assert est.run_s(run) == pytest.approx(machine(run, fixed=20.0), rel=0.05)


def test_a_config_run_recently_is_estimated_from_its_own_runs_not_another_configs():
    """The newest 60 runs of the key are another config's, which the model makes look
    4x dearer per part: the noisy plan is still estimated from its own recorded runs."""
    noisy, silent = lab_plan("noisy", reps=2), lab_plan("silent", reps=2)
    records = planted(noisy, fixed=20.0) + planted(silent * 2, fixed=80.0, per_mb=0.2)
    actual = sum(machine(r, fixed=20.0) for r in noisy)
    by_key = sum(Estimator(calibrate(records)).run_s(r) for r in noisy)
    est = Estimator.from_records(records)
    assert abs(sum(est.run_s(r) for r in noisy) / actual - 1) < 0.05
    assert by_key / actual > 2  # what the newest runs of the key alone would have said
    assert est.source([key_of(noisy[0])], "noisy") == \
        f"{len(noisy)} run(s) of noisy recorded on this machine"
    assert all(est.record_s(rec) == pytest.approx(est.run_s(r), rel=1e-3)
               for rec, r in zip(records, noisy, strict=False))


def test_a_config_with_few_recorded_runs_takes_its_keys_pace():
    noisy, silent = lab_plan("noisy", reps=2), lab_plan("silent", reps=2)
    records = planted(noisy[:MIN_CONFIG_RUNS - 1], fixed=20.0) + planted(silent, fixed=80.0)
    est = Estimator.from_records(records)
    key_only = Estimator(calibrate(records))
    assert [est.run_s(r) for r in noisy] == [key_only.run_s(r) for r in noisy]
    assert "of noisy" not in est.source([key_of(noisy[0])], "noisy")


def test_a_fit_needs_spread_and_never_goes_negative():
    same = fit_scales([(10.0, 1.0, 20.0)] * 5)  # every run alike: one scale
    assert same.fixed_scale == same.traffic_scale == pytest.approx(20 / 11)
    few = fit_scales([(10.0, 1.0, 20.0), (10.0, 50.0, 70.0)])
    assert few.fixed_scale == few.traffic_scale
    fit = fit_scales([(10.0, 0.0, 30.0), (10.0, 10.0, 35.0), (10.0, 100.0, 80.0)])
    assert fit.fixed_scale == pytest.approx(3.0, rel=0.05)
    assert fit.traffic_scale == pytest.approx(0.5, rel=0.05)
    wild = fit_scales([(1.0, 0.0, 1e6)] * 3)
    assert wild.fixed_scale <= 20.0


def test_history_keeps_this_hosts_whole_records(tmp_path):
    path = tmp_path / "history" / "runs.jsonl"
    run = lab_plan(reps=1)[0]
    rec = history.record(run, 31.5, "kernel", 2, 1.2, git="abc", host="lab1")
    assert rec["kernel"] == "lab" and rec["clock"] == "virtual" and rec["nodes"] == 36
    history.append(rec, path)
    with path.open("a") as f:
        f.write("{broken\n")
        f.write(json.dumps({**rec, "host": "elsewhere"}) + "\n")
    assert history.read(path, host="lab1") == [json.loads(json.dumps(rec))]
    assert history.read(tmp_path / "missing.jsonl", host="lab1") == []


def test_history_is_cut_to_its_newest_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(history, "KEEP", 5)
    path = tmp_path / "runs.jsonl"
    run = lab_plan(reps=1)[0]
    for i in range(11):
        history.append(history.record(run, 10.0 + i, None, 1, None, host="h"), path)
    walls = [r["wall_s"] for r in history.read(path, host="h")]
    assert len(walls) <= 10 and walls[-1] == 20.0


def test_durations_read_as_people_say_them():
    assert [format_duration(s) for s in (45, 720, 7500)] == ["45 s", "12 min", "2 h 05 min"]


def test_a_plane_costs_what_it_pays_per_switch_and_per_packet_not_one_factor():
    """bmv2 on the lab kernel: a query run mostly builds, a long run mostly forwards, so
    their costs against the nftables plane differ several times over (measured: 11x and
    64x, docs/p4.md); p4-ebpf stays near the nftables plane on both."""
    runs = {r.flow_type: r for r in lab_plan(reps=1)
            if r.factors == {"switching": "ps-mptcp", "host": "vanilla"}}

    def factor(flow, plane):
        return expected_run_s(runs[flow], plane) / expected_run_s(runs[flow])

    assert expected_run_s(runs["query"], "kernel") == expected_run_s(runs["query"])  # alias
    assert factor("long", "bmv2") > 3 * factor("query", "bmv2") > 3 * 1.5
    assert 1.0 < factor("query", "p4-ebpf") < 1.5 and 1.0 < factor("long", "p4-ebpf") < 1.5
    work = run_work(runs["long"].config, "long", runs["long"].workload_seed)
    assert work.switches == 20 and 3 * work.payload_mb < work.switch_mb < 5 * work.payload_mb
    # on the host kernel's real clock the traffic takes its link time on every plane:
    # only the switches' start-up differs
    host = next(r for r in host_plan() if r.flow_type == "long")
    extra = expected_run_s(host, "bmv2") - expected_run_s(host)
    assert 0 < extra < 0.1 * expected_run_s(host)


def recorded(name):
    """(run, host wall time) of a reference reproduction (docs/reproduction/NAME/plan.json:
    two lab kernels at once on the 2-core reference VM)."""
    folder = REPO / "docs" / "reproduction" / name
    cfg = load(folder / "config.yaml").with_overrides([FRESH])  # then the default
    plan = json.loads((folder / "plan.json").read_text())
    runs = {r.run_id: r for r in expand(cfg, repetitions=max(
        e["repetition"] for e in plan["runs"]))}
    return [(runs[e["run_id"]], e["wall_s"]) for e in plan["runs"]
            if e.get("wall_s") and e["run_id"] in runs]


@pytest.mark.parametrize("history_of, plan_of", [
    ("silent", "noisy"),                            # 2026-11-23, a quiet machine
    ("study001-silent-qs", "study001-noisy-qs"),    # 2026-11-25, a busier one, 2x slower
])
def test_recorded_runs_of_one_plan_predict_the_next_within_a_quarter(history_of, plan_of):
    """Real wall times: calibrated on the runs recorded just before, the estimate of the
    next plan (another pattern, other flow types) is within 25 % of what it took."""
    recs = [history.record(r, w, "kernel", 2, None, host="vm")
            for r, w in recorded(history_of)]
    est = Estimator(calibrate(recs))
    runs = recorded(plan_of)
    actual = sum(w for _, w in runs)
    assert abs(sum(est.run_s(r) for r, _ in runs) / actual - 1) < 0.25


def test_with_network_reuse_a_lane_pays_one_build_and_its_runs_a_reset():
    def plan_with(reuse: bool):
        cfg = load(REPO / "configs/noisy.yaml").with_overrides([("network.reuse", reuse)])
        return [r for r in expand(cfg, repetitions=1) if r.flow_type == "query"]

    fresh, kept = plan_with(False), plan_with(True)
    assert len(fresh) == len(kept) > 2
    build = boot_of(kept[0]) - BOOT_S
    assert build > 0 and boot_of(fresh[0]) == BOOT_S
    for a, b in zip(fresh, kept, strict=True):  # every fresh run builds, a reused one not
        assert expected_run_s(a) == pytest.approx(expected_run_s(b) + build, abs=1e-3)
    one = lambda runs: phases_s([[runs]], expected_run_s, boot_of)  # noqa: E731
    assert one(fresh) - one(kept) == pytest.approx(build * (len(kept) - 1), abs=1e-2)


def test_calibration_reads_which_recorded_runs_built_their_network():
    runs = [r for r in lab_plan(reps=1) if r.flow_type == "query"]
    recs = []
    for i, run in enumerate(runs * 3):
        built = i % 3 == 0
        rec = history.record(run, 0.0, None, 1, 0.0, host="h", built=built)
        fixed, _ = parts(record_work(rec), record_key(rec), built)
        rec["wall_s"] = 0.5 * fixed  # the machine is twice as fast as the defaults
        recs.append(rec)
    fit = calibrate(recs)[key_of(runs[0])]
    assert fit.fixed_scale == pytest.approx(0.5, rel=0.05)



def test_every_plane_runs_at_one_calibrations_pace_so_check_agrees_with_its_ratio():
    """noisy's own runs were recorded on p4-ebpf on a quiet machine, the nftables plane's
    (another config's) on a busy one, 4x dearer per part: check's two wall times still
    differ by the per-run ratio auto states (the planes' costs), not by the two loads;
    both follow noisy's own pace, and the source says so."""
    from types import SimpleNamespace

    from pathdiv.experiments.api.plans import expected_time
    from pathdiv.experiments.dataplane.select import ratio

    noisy, silent = lab_plan("noisy", reps=2), lab_plan("silent", reps=2)
    quiet = [history.record(r, machine(r, fixed=20.0), "p4-ebpf", 2, 1.0, host="lab1")
             for r in noisy]
    busy = [history.record(r, machine(r, fixed=80.0, per_mb=0.2), "nftables", 2, 1.0,
                           host="lab1") for r in silent * 2]
    est = Estimator.from_records(quiet + busy)
    for run in noisy:
        assert est.run_s(run, "p4-ebpf") == pytest.approx(
            machine(run, fixed=20.0), rel=0.05)  # noisy's own pace on its own plane
        assert est.run_s(run, "p4-ebpf") / est.run_s(run) == pytest.approx(
            ratio(run, "p4-ebpf"), rel=1e-3)
    t = expected_time(noisy, 2, est, {r.run_id: SimpleNamespace(plane="p4-ebpf")
                                      for r in noisy})
    ratios = [ratio(r, "p4-ebpf") for r in noisy]
    assert min(ratios) <= t.seconds / t.nftables_seconds <= max(ratios)
    assert t.source == (f"{len(noisy)} run(s) of noisy on the p4-ebpf plane recorded on "
                        "this machine; nftables from it by each run's cost ratio to the "
                        "p4-ebpf plane (the planes' costs, as auto judges them)")
