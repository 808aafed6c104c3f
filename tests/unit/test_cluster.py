"""A plan spread over shards: partition, --shard, plan.json shared by shards, status, sbatch."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pathdiv.experiments import runner
from pathdiv.experiments.cluster import planfile, slurm, status, tracking
from pathdiv.experiments.cluster.shards import Shard, parse_shard, partition, shard_of, shard_runs
from pathdiv.experiments.config.load import load, validate
from pathdiv.experiments.execute import run as one_run
from pathdiv.experiments.execute.runstate import base_manifest, write_status
from pathdiv.experiments.manifest import write_json_atomic
from pathdiv.experiments.plan.estimate import expected_run_s
from pathdiv.experiments.plan.runs import expand
from tests.conftest import REPO


def _plan(name: str = "noisy.yaml", **kw):
    cfg = load(REPO / "configs" / name)
    return cfg, expand(cfg, **kw)


# ---- estimate --------------------------------------------------------------------------
def test_expected_duration_grows_with_payload_and_falls_with_link_rate():
    cfg = load(REPO / "configs" / "class-quick.yaml").with_overrides(
        [("network.reuse", False)])  # every run builds: the fixed part below is whole
    runs = expand(cfg)
    by_flow = {r.flow_type: expected_run_s(r) for r in runs if r.factors["switching"] ==
               "ecmp-tcp"}
    assert by_flow["short"] > by_flow["query"]
    fast = expand(cfg.with_overrides([("topology.links.host.bw_mbps", 100),
                                      ("topology.links.edge.bw_mbps", 100),
                                      ("topology.links.core.bw_mbps", 100)]))
    fast_short = next(r for r in fast if r.run_id == "short_ecmp-tcp_rep1")
    assert expected_run_s(fast_short) < by_flow["short"]
    # noisy short: 3 iterations x 2 requests, each client takes 7 x 500 KB at 0.95 x 20 Mbit/s
    assert by_flow["short"] == pytest.approx(15 + 6 * (7 * 500_000 * 8 / 19e6 + 1.0), abs=1e-3)


def test_virtual_clock_runs_cost_by_payload_and_real_clock_runs_by_link_rate():
    """On the lab kernel's virtual clock the wall time follows the packets, not the
    link rate; on the real clock the traffic takes its simulated time."""
    cfg, _ = _plan("class-quick.yaml")
    rates = [("topology.links.host.bw_mbps", 100), ("topology.links.edge.bw_mbps", 100),
             ("topology.links.core.bw_mbps", 100)]

    def short(c):
        return next(r for r in expand(c) if r.run_id == "short_ecmp-tcp_rep1")

    lab = cfg.with_overrides([("hosts.kernel", "lab")])
    assert expected_run_s(short(lab)) == pytest.approx(
        expected_run_s(short(lab.with_overrides(rates))))
    assert expected_run_s(short(cfg.with_overrides(rates))) < expected_run_s(short(cfg))
    assert expected_run_s(short(lab)) > expected_run_s(
        next(r for r in expand(lab) if r.run_id == "query_ecmp-tcp_rep1"))


# ---- partition -------------------------------------------------------------------------
@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 42, 43])
def test_partition_covers_every_run_exactly_once(count):
    _, runs = _plan()
    shards = partition(runs, count)
    assert len(shards) == count
    ids = [r.run_id for shard in shards for r in shard]
    assert sorted(ids) == sorted(r.run_id for r in runs)
    assert len(ids) == len(set(ids))
    for shard in shards:  # each in plan order
        assert [r.order for r in shard] == sorted(r.order for r in shard)


@pytest.mark.parametrize("count", [2, 3, 4, 5, 8, 13])
def test_partition_balances_expected_duration_within_one_long_run(count):
    cfg, runs = _plan()  # query/short/long: durations differ by two orders of magnitude
    runs += expand(cfg.with_overrides([("hosts.kernel", "host")]), repetitions=3)
    runs = [dataclasses.replace(r, run_id=f"{r.run_id}-{i}", order=i)
            for i, r in enumerate(runs)]
    loads = [sum(expected_run_s(r) for r in shard) for shard in partition(runs, count)]
    longest = max(expected_run_s(r) for r in runs)
    assert max(loads) - min(loads) <= longest
    assert max(loads) - min(loads) < 0.1 * sum(loads) / count  # not just the bound


def test_partition_is_stable_for_an_unchanged_plan():
    _, runs = _plan()
    first = [[r.run_id for r in s] for s in partition(runs, 4)]
    again = [[r.run_id for r in s] for s in partition(expand(load(REPO / "configs/noisy.yaml")),
                                                          4)]
    assert first == again
    assert [[r.run_id for r in s] for s in partition(list(reversed(runs)), 4)] == first
    assert shard_runs(runs, Shard(2, 4)) == partition(runs, 4)[2]
    assert shard_of(runs, 4)[first[3][0]] == 3


def test_equal_runs_are_dealt_round_robin_by_run_id():
    _, runs = _plan()
    shards = partition(runs, 3, cost=lambda r: 1.0)
    assert [len(s) for s in shards] == [56, 56, 56]  # 168 runs: rb on the MPTCP levels only
    ids = sorted(r.run_id for r in runs)
    assert {r.run_id for r in shards[0]} == set(ids[0::3])


# ---- --shard ---------------------------------------------------------------------------
def test_shard_text_is_index_slash_count():
    assert parse_shard("0/1") == Shard(0, 1)
    assert parse_shard(" 2 / 3 ") == Shard(2, 3)
    assert str(Shard(2, 3)) == "2/3" and Shard(2, 3).name == "shard-2-of-3"


@pytest.mark.parametrize(("text", "message"), [
    ("3/3", "--shard 3/3: I must be between 0 and N-1 = 2 (shards count from 0, like "
            "$SLURM_ARRAY_TASK_ID)"),
    ("0/0", "--shard 0/0: N (the number of shards) must be at least 1"),
    ("-1/3", "--shard '-1/3': expected I/N with integers 0 <= I < N, e.g. --shard 0/4 for "
             "the first of four shards"),
    ("1", "--shard '1': expected I/N with integers 0 <= I < N"),
    ("a/b", "--shard 'a/b': expected I/N"),
])
def test_bad_shards_say_what_is_allowed(text, message):
    with pytest.raises(ValueError) as err:
        parse_shard(text)
    assert message in str(err.value)


def test_cli_refuses_a_bad_shard_before_anything_starts(tmp_path, capsys):
    from pathdiv.experiments.cli import main

    assert main(["run", str(REPO / "configs/class-quick.yaml"), "--shard", "3/3",
                 "--out", str(tmp_path / "x")]) == 1
    assert "I must be between 0 and N-1 = 2" in capsys.readouterr().err
    assert main(["run", str(REPO / "configs/class-quick.yaml"), "--shard", "0/3"]) == 1
    assert "--shard 0/3 needs --out DIR" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_check_prints_what_a_shard_would_run(capsys):
    from pathdiv.experiments.cli import main

    assert main(["check", str(REPO / "configs/class-quick.yaml"), "--shard", "1/3"]) == 0
    out = capsys.readouterr().out
    # two runs of a lane: the first builds the network, the second reuses it
    assert "shard 0/3: 2 run(s), ~0.7 min expected" in out
    assert "shard 1/3 runs 2 of them:" in out
    _, runs = _plan("class-quick.yaml")
    mine = shard_runs(runs, Shard(1, 3))
    table = out.split("shard 1/3 runs 2 of them:")[1]
    assert all(r.run_id in table for r in mine)
    assert not any(r.run_id in table for r in runs if r not in mine)


# ---- shards sharing one folder (runs faked) --------------------------------------------
def _small():
    cfg = validate({"seed": 3, "factors": {"switching": {
        "ecmp-tcp": {"switching.mode": "ecmp", "hosts.transport": "tcp"},
        "ps-mptcp": {"switching.mode": "spray", "hosts.transport": "mptcp"}}}})
    return cfg, expand(cfg, repetitions=2, flow_types=["query", "short"])


def _fake_execute(fail: set[str], seen: list[tuple[str, dict]]):
    def execute(run, run_dir, on_round=None, keeper=None):
        marker = json.loads(tracking.marker_path(run_dir.parent.parent, run.run_id)
                            .read_text())
        seen.append((run.run_id, marker))
        manifest = base_manifest(run)
        manifest["status"] = "failed" if run.run_id in fail else "complete"
        manifest["transfers"] = {"total": 1, "ok": 1, "failed": 0, "rounds": 1}
        manifest["timings"] = {"build_s": 1.0, "traffic_s": 1.0, "teardown_s": 1.0}
        write_json_atomic(run_dir / "manifest.json", manifest)
        return manifest
    return execute


def test_shards_fill_one_folder_and_plan_json_keeps_every_shards_statuses(
        tmp_path, monkeypatch):
    cfg, runs = _small()
    shards = partition(runs, 3)
    failing = shards[0][-1].run_id
    seen: list[tuple[str, dict]] = []
    monkeypatch.setattr(one_run, "execute_run", _fake_execute({failing}, seen))
    folder = runner.prepare_folder(cfg, tmp_path / "out")
    options = {"reps": 2, "only": [], "quick": False, "set": [], "shards": 3}
    for i in (2, 0):
        runner.run_plan(cfg, shards[i], folder, quiet=True, options=options, plan_runs=runs,
                        shard=Shard(i, 3))
    plan = json.loads((folder / "plan.json").read_text())
    assert len(plan["runs"]) == len(runs) and plan["options"]["shards"] == 3
    index = shard_of(runs, 3)
    for entry in plan["runs"]:
        assert entry["shard"] == index[entry["run_id"]]
        want = "pending" if entry["shard"] == 1 else \
            "failed" if entry["run_id"] == failing else "complete"
        assert entry["status"] == want, entry
    # each run was marked by this process while it ran, and unmarked after
    assert {m["pid"] for _, m in seen} == {os.getpid()}
    assert {m["host"] for _, m in seen} == {socket.gethostname()}
    # no running marker is left; each shard's plan lock stays, empty once released
    # (removing a lock file another process may hold open would split the lock)
    left = sorted(p.name for p in (folder / "running").iterdir())
    assert left == ["plan-shard-0-of-3.lock", "plan-shard-2-of-3.lock"]
    assert all((folder / "running" / name).stat().st_size == 0 for name in left)
    progress = json.loads((folder / "progress" / "shard-0-of-3.json").read_text())
    assert (progress["state"], progress["runs"], progress["current"]) == \
        ("done", len(shards[0]), "")
    assert progress["complete"] + progress["failed"] == len(shards[0])

    st = status.folder_status(folder)
    assert st.counts(1, all_shards=False)["pending"] == len(shards[1])
    assert st.counts()["complete"] == len(shards[0]) + len(shards[2]) - 1
    # rerunning a shard resumes it: only its failed run is redone
    seen.clear()
    runner.run_plan(cfg, shards[index[failing]], folder, quiet=True, options=options,
                    plan_runs=runs, shard=Shard(index[failing], 3))
    assert [r for r, _ in seen] == [failing]


def test_a_shard_of_another_plan_is_refused(tmp_path, capsys):
    prev = {"options": {"reps": None, "only": [], "quick": True, "set": [], "shards": 3}}
    assert planfile.options_conflict(prev, {**prev["options"]}) == ""
    assert planfile.options_conflict({"options": {"reps": None}}, {"shards": 2}) == ""
    said = planfile.options_conflict(prev, {**prev["options"], "shards": 4})
    assert said.startswith("its plan.json was written by shards of another plan (shards: 3 "
                           "there, 4 here); every shard of a folder needs the same N")
    assert "use --shard I/3" in said
    from pathdiv.experiments.cli import main

    out = tmp_path / "out"
    out.mkdir()
    (out / "plan.json").write_text(json.dumps({"runs": [], **prev}))
    assert main(["run", str(REPO / "configs/class-quick.yaml"), "--quick", "--shard", "0/2",
                 "--out", str(out)]) == 1
    assert "shards: 3 there, 2 here" in capsys.readouterr().err


def test_merged_statuses_keep_other_writers_runs():
    previous = {"runs": [{"run_id": "a", "status": "complete", "reason": "", "wall_s": 41.5},
                         {"run_id": "b", "status": "failed", "reason": "x"},
                         {"run_id": "c", "status": "pending", "reason": ""}]}
    merged = planfile.merged_statuses(previous, {"b", "c"}, {"c": {"status": "complete",
                                                                   "reason": "",
                                                                   "wall_s": 7.0}})
    assert merged == {"a": {"status": "complete", "reason": "", "wall_s": 41.5},
                      "c": {"status": "complete", "reason": "", "wall_s": 7.0}}


def test_concurrent_writers_lose_no_update(tmp_path):
    """Two processes each set 40 statuses of their own, one at a time, under the lock."""
    script = (
        "import sys\nfrom pathlib import Path\n"
        "from pathdiv.experiments.cluster.planfile import update_plan\n"
        "folder, who = Path(sys.argv[1]), sys.argv[2]\n"
        "def add(prev, i):\n"
        "    runs = list((prev or {}).get('runs', []))\n"
        "    runs.append({'run_id': f'{who}{i}', 'status': 'complete'})\n"
        "    return {'runs': runs}\n"
        "for i in range(40):\n"
        "    update_plan(folder, lambda prev: add(prev, i))\n")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), who], cwd=REPO)
             for who in "ab"]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    ids = {e["run_id"] for e in json.loads((tmp_path / "plan.json").read_text())["runs"]}
    assert ids == {f"{w}{i}" for w in "ab" for i in range(40)}


# ---- status ----------------------------------------------------------------------------
def test_classify_tells_running_from_stale_markers():
    marker = {"host": "n1", "pid": 7, "run_started": "t0"}
    assert status.classify("complete", marker, lambda m: True) == ("complete", "")
    assert status.classify("partial", marker, lambda m: True) == \
        ("running", "on n1, pid 7 since t0")
    assert status.classify("absent", marker, lambda m: None)[0] == "running"
    assert "another host" in status.classify("absent", marker, lambda m: None)[1]
    assert status.classify("partial", marker, lambda m: False) == \
        ("pending", "interrupted: n1, pid 7 is gone; resuming the shard redoes it")
    assert status.classify("partial", None, lambda m: True)[0] == "pending"
    assert status.classify("absent", None, lambda m: True) == ("pending", "")


def test_process_alive_checks_pid_and_start_time_on_this_host_only():
    me = tracking.this_process()
    assert tracking.process_alive(me) is True
    assert tracking.process_alive({**me, "proc_start": me["proc_start"] + 1}) is False
    assert tracking.process_alive({**me, "host": "elsewhere"}) is None
    dead = subprocess.Popen(["true"])
    dead.wait()
    assert tracking.process_alive({**me, "pid": dead.pid, "proc_start": None}) is False


def test_status_of_a_planted_folder(tmp_path, capsys):
    cfg, runs = _small()
    folder = tmp_path / "out"
    folder.mkdir()
    index = shard_of(runs, 2)
    doc = planfile.annotate_shards(planfile.plan_document(
        cfg, runs, {}, None, {"shards": 2}), index)
    write_json_atomic(folder / "plan.json", doc)
    by_id = {r.run_id: r for r in runs}
    ids = sorted(by_id)
    write_status(by_id[ids[0]], folder / "runs" / ids[0], "complete", "")
    write_status(by_id[ids[1]], folder / "runs" / ids[1], "failed", "NetworkError: boom")
    write_status(by_id[ids[2]], folder / "runs" / ids[2], "skipped", "no VM")
    (folder / "runs" / ids[3]).mkdir(parents=True)  # live marker: running
    write_json_atomic(tracking.marker_path(folder, ids[3]),
                      {**tracking.this_process(), "run_id": ids[3], "run_started": "t1"})
    (folder / "runs" / ids[4]).mkdir(parents=True)  # dead process: pending
    write_json_atomic(tracking.marker_path(folder, ids[4]),
                      {"pid": 1, "host": socket.gethostname(), "proc_start": -5})
    write_json_atomic(tracking.marker_path(folder, ids[5]),  # another host: running
                      {"pid": 1, "host": "node7", "run_started": "t2"})
    (folder / "runs" / ids[6]).mkdir(parents=True)  # partial, no marker: pending
    write_json_atomic(folder / "progress" / "shard-1-of-2.json",
                      {"shard": "1/2", "host": "node7", "pid": 9, "state": "running",
                       "updated": "t3"})
    st = status.folder_status(folder)
    states = {r.run_id: r.state for r in st.runs}
    assert [states[i] for i in ids] == ["complete", "failed", "skipped", "running",
                                        "pending", "running", "pending", "pending"]
    assert st.counts() == {"complete": 1, "failed": 1, "skipped": 1, "running": 2,
                           "pending": 3}
    assert sum(sum(st.counts(i, all_shards=False).values()) for i in range(2)) == 8

    from pathdiv.experiments.cli import main

    assert main(["status", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{folder}: 8 run(s) in 2 shards: 1 complete, 1 failed, 1 skipped, "
                          "2 running, 3 pending\n")
    assert "running on node7 (pid 9) at t3" in out  # shard 1's progress file
    assert f"  {ids[1]} (shard {index[ids[1]]}/2): NetworkError: boom" in out
    assert f"  {ids[5]} (shard {index[ids[5]]}/2): on node7, pid 1 since t2 (another host" \
        in out
    assert main(["status", str(folder), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["counts"]["running"] == 2 and data["shards"] == 2
    assert {r["run_id"]: r["state"] for r in data["runs"]} == states
    assert sum(data["by_shard"]["0/2"].values()) == \
        sum(1 for r in runs if index[r.run_id] == 0)
    assert main(["status", str(tmp_path / "nope")]) == 1
    assert "has no readable plan.json" in capsys.readouterr().err


def test_status_gives_the_wall_time_so_far_and_the_rest_at_that_pace():
    rs = status.RunStatus

    runs = [rs("q1", 0, "complete", flow_type="query", wall_s=40.0),
            rs("q2", 1, "complete", flow_type="query", wall_s=50.0),
            rs("l1", 0, "complete", flow_type="long", wall_s=180.0),
            rs("q3", 0, "pending", flow_type="query"),
            rs("l2", 1, "running", flow_type="long"),
            rs("l3", 1, "pending", flow_type="long"),
            rs("f1", 1, "failed", flow_type="long", wall_s=3.0)]
    text = status.wall_pace(runs, shards=2)
    assert text.startswith("wall time: 4.5 min for 3 complete run(s) (mean per run: "
                           "long 180 s, query 45 s)")
    # shard 0 has 45 s to go, shard 1 360 s: they run at once
    assert text.endswith("about 6 min to go at that pace (the slowest of 2 shards)")
    unsharded = status.wall_pace([dataclasses.replace(r, shard=None) for r in runs], None)
    assert unsharded.endswith("about 7 min to go at that pace")  # 45 + 2 x 180 s
    no_pace = status.wall_pace([*runs, rs("s1", 0, "pending", flow_type="short")], 2)
    assert no_pace.endswith("no pace yet for short, so no estimate of the rest")
    assert status.wall_pace([rs("q", None, "pending", flow_type="query")], None) == ""


# ---- Slurm scripts ---------------------------------------------------------------------
def _job(**kw):
    base = dict(name="class-quick", command=["/opt/pd/.venv/bin/pathdiv"],
                config=Path("/shared/class-quick.yaml"), out=Path("/shared/results/lq"),
                shards=3, plan_args=["--set", "workload.requests=1", "--quick"])
    return slurm.SlurmJob(**{**base, **kw})


def test_array_script_runs_one_shard_per_task():
    text = slurm.array_script(_job(partition="emu", time_limit="1:00:00"))
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    for want in ("#SBATCH --array=0-2", "#SBATCH --cpus-per-task=2", "#SBATCH --mem=6G",
                 "#SBATCH --nodes=1", "#SBATCH --partition=emu", "#SBATCH --time=1:00:00",
                 "#SBATCH --output=/shared/results/lq/slurm/shard-%a.%A.out"):
        assert want in lines
    assert "#SBATCH --exclusive" in lines
    assert lines[-1] == ("exec /opt/pd/.venv/bin/pathdiv run /shared/class-quick.yaml --out "
                         "/shared/results/lq --set workload.requests=1 --quick --quiet "
                         '--shard "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT"')
    assert "root (or CAP_NET_ADMIN\n# + CAP_SYS_ADMIN)" in text and "a node of its own" in text
    shared = slurm.array_script(_job(exclusive=False, shards=1)).splitlines()
    assert "#SBATCH --array=0-0" in shared
    assert not any(line.startswith("#SBATCH --exclusive") for line in shared)
    assert not any("--partition" in line for line in shared)


def test_analysis_script_analyses_the_shared_folder():
    lines = slurm.analysis_script(_job()).splitlines()
    assert "#SBATCH --output=/shared/results/lq/slurm/analyze.%j.out" in lines
    assert "#SBATCH --cpus-per-task=1" in lines
    assert not any("--array" in line or "--exclusive" in line for line in lines)
    assert lines[-2:] == ["/opt/pd/.venv/bin/pathdiv status /shared/results/lq",
                          "exec /opt/pd/.venv/bin/pathdiv analyze /shared/results/lq"]


def test_submit_chains_the_analysis_after_the_array():
    calls = []

    def fake_run(argv, **kw):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, f"{40 + len(calls)};cluster\n", "")

    assert slurm.submit(Path("a.sbatch"), Path("b.sbatch"), run=fake_run) == ("41", "42")
    assert calls == [["sbatch", "--parsable", "a.sbatch"],
                     ["sbatch", "--parsable", "--dependency=afterok:41",
                      "--kill-on-invalid-dep=yes", "b.sbatch"]]

    def refused(argv, **kw):
        return subprocess.CompletedProcess(argv, 1, "", "sbatch: error: invalid partition\n")

    with pytest.raises(slurm.SlurmError, match=r"sbatch --parsable a.sbatch failed \(exit "
                       r"1\): sbatch: error: invalid partition"):
        slurm.submit(Path("a.sbatch"), Path("b.sbatch"), run=refused)
    with pytest.raises(slurm.SlurmError, match="not a job id"):
        slurm.parse_job_id("Submitted batch job\n")


def test_slurm_dry_run_writes_scripts_and_the_plan(tmp_path, capsys):
    from pathdiv.experiments.cli import main

    out = tmp_path / "lq"
    assert main(["slurm", str(REPO / "configs/class-quick.yaml"), "--out", str(out),
                 "--shards", "3", "--quick", "--mem", "1G", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "plan: 6 run(s) in 3 shard(s)" in printed
    assert (f"sbatch --dependency=afterok:$ARRAY --kill-on-invalid-dep=yes "
            f"{out / 'slurm/analyze.sbatch'}") in printed
    array = (out / "slurm" / "array.sbatch").read_text()
    assert "#SBATCH --mem=1G" in array and "--quick" in array
    assert f"run {REPO / 'configs/class-quick.yaml'} --out {out} --quick --quiet" in array
    plan = json.loads((out / "plan.json").read_text())
    assert plan["options"]["shards"] == 3
    assert {e["status"] for e in plan["runs"]} == {"pending"}
    assert sorted({e["shard"] for e in plan["runs"]}) == [0, 1, 2]
    assert main(["slurm", str(REPO / "configs/class-quick.yaml"), "--out", str(out),
                 "--shards", "7", "--quick", "--dry-run"]) == 1
    assert "--shards 7: expected 1 to 6" in capsys.readouterr().err


def test_shipped_example_scripts_are_what_pathdiv_slurm_writes():
    from pathdiv.experiments.cluster.slurm import analysis_script, array_script

    example = REPO / "scripts" / "slurm"
    job = slurm.SlurmJob(name="class-quick", command=["pathdiv"],
                         config=Path("configs/class-quick.yaml"), out=Path("/shared/class-quick"),
                         shards=3, plan_args=[])
    assert (example / "array.sbatch").read_text() == array_script(job)
    assert (example / "analyze.sbatch").read_text() == analysis_script(job)


def test_shards_booting_lab_kernels_into_one_folder_use_their_own_progress_files():
    from pathdiv.experiments.execute.lab_runs import PROGRESS_FILE, guest_args, progress_file

    assert progress_file(None) == PROGRESS_FILE
    mine = progress_file(Shard(1, 3).name)
    assert mine == Path(".labkernel/progress-shard-1-of-3.json")
    assert progress_file(Shard(2, 3).name) != mine
    argv = guest_args(Path("/r"), ["a", "b"], mine)
    assert argv[argv.index("--progress") + 1] == "/r/.labkernel/progress-shard-1-of-3.json"
