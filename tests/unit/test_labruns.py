"""Lab-kernel runs of a plan in one boot, with User-Mode Linux replaced by a fake guest.

The fake `run_in_uml` does what the guest does to the results folder (writes manifests,
the progress file, its heartbeat) and calls `poll` as the real one does, so these tests
check the host's side: one boot per clock for all lab runs, plan.json and progress as
runs finish, and what a run gets when the guest dies, is interrupted, stalls or freezes.
"""

import json
from pathlib import Path

import pytest

from pathdiv.experiments import runner
from pathdiv.experiments.config.load import validate
from pathdiv.experiments.execute import boot
from pathdiv.experiments.execute import lab_runs as labruns
from pathdiv.experiments.execute import run as one_run
from pathdiv.experiments.execute.runstate import base_manifest
from pathdiv.experiments.fabric import environment
from pathdiv.experiments.fabric.environment import EnvironmentProblem, preflight
from pathdiv.experiments.manifest import write_json_atomic
from pathdiv.experiments.plan.estimate import expected_run_s
from pathdiv.experiments.plan.lanes import phases
from pathdiv.experiments.plan.runs import expand
from pathdiv.kernels import uml
from pathdiv.kernels.build import LabKernelError

IMAGE_RELEASE = "6.12.117-pathdiv"


def _lab_plan(tmp_path):
    cfg = validate({"seed": 5, "hosts": {"transport": "mptcp", "kernel": "lab"},
                    "factors": {"host": {
                        "vanilla": {"hosts.kernel": "lab", "hosts.scheduler": "default"},
                        "rb": {"hosts.kernel": "lab", "hosts.scheduler": "rb"},
                        "hostk": {"hosts.kernel": "host", "hosts.scheduler": "default"}}}})
    runs = expand(cfg, repetitions=1, flow_types=["query"])
    folder = runner.prepare_folder(cfg, tmp_path / "out")
    return cfg, runs, folder


class FakeGuest:
    """Stands in for uml.run_in_uml; `script` says what the guest does, step by step.
    Each step moves the guest's clock by `step_s` (its heartbeat), unless `frozen`."""

    def __init__(self, script, step_s=1.0, frozen=False, wall_step_s=0.0):
        self.script = script
        self.calls = []
        self.step_s, self.frozen, self.guest_s = step_s, frozen, 100.0
        self.wall_s, self.wall_step_s = 1000.0, wall_step_s  # the host's clock, if faked

    def __call__(self, argv, share, kernel, timeout_s, **kw):
        self.calls.append({"argv": argv, "share": share, "kernel": kernel, **kw})
        folder = Path(argv[argv.index("--progress") + 2])
        run_ids = argv[argv.index("--progress") + 3:]
        desc = json.loads(kw["env"][boot.GUEST_ENV])
        for step in self.script:
            kind, index = step[0], step[1] if len(step) > 1 else None
            run_dir = folder / "runs" / run_ids[index] if index is not None else None
            if not self.frozen:
                self.guest_s += self.step_s
                write_json_atomic(folder / labruns.heartbeat_path(labruns.PROGRESS_FILE),
                                  {"guest_s": self.guest_s, "run_id": run_ids[index or 0]})
            if kind == "start":
                run_dir.mkdir(parents=True, exist_ok=True)
                write_json_atomic(folder / labruns.PROGRESS_FILE,
                                  {"run_id": run_ids[index], "round": 1, "rounds": 2})
            elif kind in ("complete", "failed"):
                run_dir.mkdir(parents=True, exist_ok=True)
                write_json_atomic(run_dir / "manifest.json", {
                    "status": kind, "error": "" if kind == "complete" else "NetworkError: x",
                    "kernel_release": IMAGE_RELEASE, "lab_kernel": desc,
                    "transfers": {"ok": 1, "total": 1},
                    "timings": {"build_s": 1.0, "traffic_s": 1.0, "teardown_s": 1.0}})
            elif kind == "write":  # a busy guest: its clock stands, its files grow
                nodes = run_dir / "lab" / "nodes"
                nodes.mkdir(parents=True, exist_ok=True)
                (nodes / f"step{len(list(nodes.iterdir()))}.sh").write_text("ip link\n")
            elif kind == "step":  # a node script ends a step: one line more in its state
                state = run_dir / "network" / "nodes" / "e1.setup.state"
                state.parent.mkdir(parents=True, exist_ok=True)
                with state.open("a") as f:
                    f.write("step 1 of 3\n")
            elif kind == "crash":
                raise LabKernelError("UML ended without running the command to its end")
            elif kind == "interrupt":
                raise KeyboardInterrupt
            self.wall_s += self.wall_step_s
            kw["poll"]()
        return uml.UMLResult(0, "", "", kw["clock"], IMAGE_RELEASE, 1.0)


@pytest.fixture
def fake_machine(monkeypatch, tmp_path):
    """A built lab kernel image and host-kernel runs that 'complete' instantly."""
    image = tmp_path / "cache" / "0123456789abcdef" / "linux"
    image.parent.mkdir(parents=True)
    image.write_bytes(b"kernel")
    (image.parent / "kernel.release").write_text(IMAGE_RELEASE + "\n")
    monkeypatch.setattr(runner, "lab_kernel_image", lambda log: image)

    def host_run(run, run_dir, on_round=None, keeper=None):
        manifest = base_manifest(run)
        manifest.update(status="complete", kernel_release="host",
                        transfers={"ok": 1, "total": 1},
                        timings={"build_s": 1.0, "traffic_s": 1.0, "teardown_s": 1.0})
        write_json_atomic(run_dir / "manifest.json", manifest)
        return manifest

    monkeypatch.setattr(one_run, "execute_run", host_run)
    return image


def _plan_statuses(folder):
    plan = json.loads((folder / "plan.json").read_text())
    return {e["run_id"]: (e["host_kernel"], e["status"], e["reason"]) for e in plan["runs"]}


def test_all_lab_runs_execute_in_one_boot_and_record_the_kernel(tmp_path, monkeypatch,
                                                            fake_machine):
    cfg, runs, folder = _lab_plan(tmp_path)
    vm = FakeGuest([("start", 0), ("complete", 0), ("start", 1), ("complete", 1)])
    monkeypatch.setattr(uml, "run_in_uml", vm)
    outcome = runner.run_plan(cfg, runs, folder, quiet=True)
    assert outcome.count("complete") == 3
    assert len(vm.calls) == 1  # one boot for both lab runs
    lab_ids = [r.run_id for r in runs if r.config.host_kernel == "lab"]
    argv = vm.calls[0]["argv"]
    assert argv[argv.index("execute"):] == ["execute", "--progress",
                                            str((folder / labruns.PROGRESS_FILE).resolve()),
                                            str(folder.resolve()), *lab_ids]
    assert vm.calls[0]["kernel"] == fake_machine and vm.calls[0]["share"] == folder
    statuses = _plan_statuses(folder)
    assert {k: s for k, s, _ in statuses.values()} == {"lab": "complete", "host": "complete"}
    manifest = json.loads((folder / "runs" / lab_ids[0] / "manifest.json").read_text())
    assert manifest["kernel_release"] == IMAGE_RELEASE
    assert manifest["lab_kernel"]["runner"] == "uml"
    assert manifest["lab_kernel"]["clock"] == "virtual" == vm.calls[0]["clock"]
    assert manifest["lab_kernel"]["recipe_digest"] == "0123456789abcdef"


def test_runs_left_when_the_guest_dies_are_failed_with_the_reason(tmp_path, monkeypatch,
                                                               fake_machine):
    cfg, runs, folder = _lab_plan(tmp_path)
    monkeypatch.setattr(uml, "run_in_uml",
                        FakeGuest([("start", 0), ("complete", 0), ("start", 1), ("crash",)]))
    outcome = runner.run_plan(cfg, runs, folder, quiet=True)
    assert outcome.count("complete") == 2 and outcome.count("failed") == 1
    lab_ids = [r.run_id for r in runs if r.config.host_kernel == "lab"]
    kernel, status, reason = _plan_statuses(folder)[lab_ids[1]]
    assert (kernel, status) == ("lab", "failed")
    assert reason.startswith("the lab kernel stopped before this run finished: UML ended")
    manifest = json.loads((folder / "runs" / lab_ids[1] / "manifest.json").read_text())
    assert manifest["config"]["hosts"]["scheduler"] == "rb"  # never relabelled
    assert manifest["kernel_release"] == IMAGE_RELEASE
    assert manifest["lab_kernel"]["clock"] == "virtual"
    # resuming redoes only that run, in a new boot
    vm = FakeGuest([("start", 0), ("complete", 0)])
    monkeypatch.setattr(uml, "run_in_uml", vm)
    again = runner.run_plan(cfg, runs, folder, quiet=True)
    assert again.count("complete") == 3
    assert vm.calls[0]["argv"][-1] == lab_ids[1]


def test_ctrl_c_fails_the_run_in_progress_and_leaves_later_ones_pending(tmp_path, monkeypatch,
                                                                       fake_machine):
    cfg, runs, folder = _lab_plan(tmp_path)
    monkeypatch.setattr(uml, "run_in_uml", FakeGuest([("start", 0), ("interrupt",)]))
    with pytest.raises(KeyboardInterrupt):
        runner.run_plan(cfg, runs, folder, quiet=True)
    lab_ids = [r.run_id for r in runs if r.config.host_kernel == "lab"]
    statuses = _plan_statuses(folder)
    assert statuses[lab_ids[0]][1] == "failed" and "interrupted" in statuses[lab_ids[0]][2]
    assert statuses[lab_ids[1]][1] == "pending"
    assert not (folder / "runs" / lab_ids[1]).exists()


def test_a_run_that_outlasts_its_bound_in_guest_time_is_stopped(tmp_path, monkeypatch,
                                                                 fake_machine):
    cfg, runs, folder = _lab_plan(tmp_path)
    monkeypatch.setattr(labruns, "run_bound_s", lambda cfg, rounds: 5.0)
    monkeypatch.setattr(uml, "run_in_uml", FakeGuest(
        [("start", 0), ("complete", 0), ("start", 1), ("start", 1), ("start", 1)], step_s=3))
    runner.run_plan(cfg, runs, folder, quiet=True)
    lab_ids = [r.run_id for r in runs if r.config.host_kernel == "lab"]
    assert _plan_statuses(folder)[lab_ids[0]][1] == "complete"
    reason = _plan_statuses(folder)[lab_ids[1]][2]
    assert f"{lab_ids[1]} did not finish in 6 s of guest time" in reason


def test_a_guest_whose_clock_stands_still_is_stopped(tmp_path, monkeypatch, fake_machine):
    cfg, runs, folder = _lab_plan(tmp_path)
    monkeypatch.setattr(labruns, "FROZEN_WALL_S", -1.0)
    monkeypatch.setattr(uml, "run_in_uml", FakeGuest([("start", 0), ("start", 0)],
                                                     frozen=True))
    runner.run_plan(cfg, runs, folder, quiet=True)
    lab_ids = [r.run_id for r in runs if r.config.host_kernel == "lab"]
    reason = _plan_statuses(folder)[lab_ids[0]][2]
    assert "the lab kernel showed no sign of life" in reason
    assert "its clock stood still" in reason and "polls the clock without sleeping" in reason


def _host_clock_of(guest, monkeypatch):
    """The watchdog's wall clock is the fake guest's: each step takes wall_step_s."""
    class Clock:
        @staticmethod
        def monotonic():
            return guest.wall_s
    monkeypatch.setattr(labruns, "time", Clock)


def test_a_busy_guest_that_writes_is_not_taken_for_frozen(tmp_path, monkeypatch,
                                                          fake_machine):
    """The clock stands still for 4 x 400 s (CPU work costs no guest time) while the run's
    network build writes its node scripts, or for 6 x 400 s while they run and end their
    steps: alive; the same steps without writes: frozen."""
    cfg, runs, folder = _lab_plan(tmp_path)
    lab_ids = [r.run_id for r in runs if r.config.host_kernel == "lab"]
    busy = FakeGuest([("start", 0), *[("write", 0)] * 4, ("complete", 0), ("start", 1),
                      ("complete", 1)], frozen=True, wall_step_s=400.0)
    _host_clock_of(busy, monkeypatch)
    monkeypatch.setattr(uml, "run_in_uml", busy)
    runner.run_plan(cfg, runs, folder, quiet=True)
    assert _plan_statuses(folder)[lab_ids[0]][1:] == ("complete", "")

    # a k=16 build after its last script is written: only the scripts' state files grow
    cfg, runs, folder = _lab_plan(tmp_path / "steps")
    steps = FakeGuest([("start", 0), ("write", 0), *[("step", 0)] * 6, ("complete", 0),
                       ("start", 1), ("complete", 1)], frozen=True, wall_step_s=400.0)
    _host_clock_of(steps, monkeypatch)
    monkeypatch.setattr(uml, "run_in_uml", steps)
    runner.run_plan(cfg, runs, folder, quiet=True)
    assert _plan_statuses(folder)[lab_ids[0]][1:] == ("complete", "")

    cfg, runs, folder = _lab_plan(tmp_path / "again")
    stuck = FakeGuest([("start", 0), *[("start", 0)] * 4, ("complete", 0)], frozen=True,
                      wall_step_s=400.0)
    _host_clock_of(stuck, monkeypatch)
    monkeypatch.setattr(uml, "run_in_uml", stuck)
    runner.run_plan(cfg, runs, folder, quiet=True)
    status, reason = _plan_statuses(folder)[lab_ids[0]][1:]
    assert status == "failed"
    assert "no sign of life for 800 s of wall time" in reason
    assert "The bound is 600 s: set PATHDIV_FROZEN_S=SECONDS" in reason

    monkeypatch.setenv(labruns.FROZEN_ENV, "900")  # a host loaded past 600 s
    cfg, runs, folder = _lab_plan(tmp_path / "longer")
    stuck = FakeGuest([("start", 0), *[("start", 0)] * 4, ("complete", 0)], frozen=True,
                      wall_step_s=400.0)
    _host_clock_of(stuck, monkeypatch)
    monkeypatch.setattr(uml, "run_in_uml", stuck)
    runner.run_plan(cfg, runs, folder, quiet=True)
    reason = _plan_statuses(folder)[lab_ids[0]][2]
    assert "no sign of life for 1200 s" in reason and "The bound is 900 s" in reason


def test_the_frozen_bound_is_one_for_every_network_and_set_by_its_variable():
    """The bound does not grow with the network (a k=16 build shows life through its
    node scripts' steps); PATHDIV_FROZEN_S sets it, a bad value is named with what is
    allowed, and the plan's lab runs fail with that reason before anything boots."""
    assert labruns.frozen_bound_s({}) == labruns.FROZEN_WALL_S == 600.0
    assert labruns.frozen_bound_s({labruns.FROZEN_ENV: " 1800 "}) == 1800.0
    for bad in ("soon", "5", "1e9", "nan"):
        with pytest.raises(LabKernelError, match=f"PATHDIV_FROZEN_S='{bad}' is not allowed: "
                                                 "wall seconds from 10 to 86400"):
            labruns.frozen_bound_s({labruns.FROZEN_ENV: bad})


def test_a_frozen_bound_that_is_not_allowed_fails_the_runs_before_booting(
        tmp_path, monkeypatch, fake_machine):
    cfg, runs, folder = _lab_plan(tmp_path)
    monkeypatch.setenv(labruns.FROZEN_ENV, "-1")
    guest = FakeGuest([("start", 0), ("complete", 0)])
    monkeypatch.setattr(uml, "run_in_uml", guest)
    runner.run_plan(cfg, runs, folder, quiet=True)
    lab_ids = [r.run_id for r in runs if r.config.host_kernel == "lab"]
    assert guest.calls == []
    for run_id in lab_ids:
        status, reason = _plan_statuses(folder)[run_id][1:]
        assert status == "failed" and "PATHDIV_FROZEN_S='-1' is not allowed" in reason


def test_any_sign_of_life_counts_and_only_a_change_does():
    """Clock, progress or the run's folder (a node script's state file growing by one
    step) each show life; the same signs at the next poll do not."""
    beat, prog = {"guest_s": 5.12, "run_id": "r"}, {"run_id": "r", "round": 0, "rounds": 0}
    first = labruns.Signs(beat, prog, (10, 900, 7))
    assert first.alive_since(None)
    assert not labruns.Signs(dict(beat), dict(prog), (10, 900, 7)).alive_since(first)
    assert labruns.Signs({**beat, "guest_s": 7.68}, prog, (10, 900, 7)).alive_since(first)
    assert labruns.Signs(beat, {**prog, "round": 1}, (10, 900, 7)).alive_since(first)
    assert labruns.Signs(beat, prog, (10, 912, 8)).alive_since(first)  # "step 2 of 3"
    assert labruns.stall(beat, 5.0, 1e9, 599.0, "r") is None
    frozen = labruns.stall(beat, 5.0, 1e9, 601.0, "r")
    assert frozen is not None and "no sign of life for 601 s of wall time during r" in frozen


def test_plan_json_records_each_runs_wall_time_and_a_resume_keeps_it(tmp_path, monkeypatch,
                                                                       fake_machine):
    """A lab run's manifest holds guest time; plan.json holds what it took on the host,
    the boot counted towards the first lab run."""
    cfg, runs, folder = _lab_plan(tmp_path)
    guest = FakeGuest([("start", 0), ("complete", 0), ("start", 1), ("start", 1),
                       ("complete", 1)], wall_step_s=20.0)
    _host_clock_of(guest, monkeypatch)
    monkeypatch.setattr(runner, "time", labruns.time)
    monkeypatch.setattr(uml, "run_in_uml", guest)
    runner.run_plan(cfg, runs, folder, quiet=True)
    lab_ids = [r.run_id for r in runs if r.config.host_kernel == "lab"]
    walls = {e["run_id"]: e["wall_s"] for e in
             json.loads((folder / "plan.json").read_text())["runs"]}
    assert [walls[i] for i in lab_ids] == [40.0, 60.0]
    host_id = next(r.run_id for r in runs if r.config.host_kernel == "host")
    assert walls[host_id] == 0.0  # the stand-in host run takes no time on this clock
    runner.run_plan(cfg, runs, folder, quiet=True)  # everything complete: nothing to do
    again = {e["run_id"]: e.get("wall_s") for e in
             json.loads((folder / "plan.json").read_text())["runs"]}
    assert again == walls


def test_folder_activity_counts_what_was_written(tmp_path):
    assert labruns.folder_activity(tmp_path / "missing") == (0, 0, 0)
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "a.sh").write_text("abc")
    files, size, newest = labruns.folder_activity(tmp_path)
    assert (files, size) == (1, 3) and newest > 0
    (tmp_path / "lab" / "a.sh").write_text("abcdef")
    assert labruns.folder_activity(tmp_path)[:2] == (1, 6)


def test_stall_tells_slow_from_frozen():
    beat = {"guest_s": 150.0, "run_id": "r"}
    assert labruns.stall(beat, 100.0, 60.0, 10.0, "r") is None
    assert "did not finish in 50 s of guest time" in labruns.stall(beat, 100.0, 40.0, 10.0,
                                                                   "r")
    frozen = labruns.stall(None, None, 40.0, labruns.FROZEN_WALL_S + 1, "r")
    assert "stood still" in frozen and "before its first heartbeat" in frozen


def test_runs_on_both_clocks_boot_once_per_clock(tmp_path, monkeypatch, fake_machine):
    cfg = validate({"seed": 5, "hosts": {"transport": "mptcp", "kernel": "lab"},
                    "factors": {"clock": {"v": {"lab.clock": "virtual"},
                                          "r": {"lab.clock": "real"}}}})
    runs = expand(cfg, repetitions=1, flow_types=["query"])
    folder = runner.prepare_folder(cfg, tmp_path / "out")
    guest = FakeGuest([("start", 0), ("complete", 0)])
    monkeypatch.setattr(uml, "run_in_uml", guest)
    assert runner.run_plan(cfg, runs, folder, quiet=True).count("complete") == 2
    assert sorted(call["clock"] for call in guest.calls) == ["real", "virtual"]


def test_the_watchdog_spares_a_long_run_whose_rounds_all_end_in_time():
    """A silent long run of the reference config: 16 rounds of 25 MB at 20 Mbit/s take
    about 11 s of guest time each; the bound must leave that alone and still give up on
    a run whose rounds all ran into their timeout."""
    from pathdiv.experiments.config.load import load
    from pathdiv.experiments.plan.designations import rounds
    from tests.conftest import REPO

    cfg = load(REPO / "configs/silent.yaml")
    w = cfg.data["workload"]
    n = len(rounds(w["pattern"], cfg.topology().hosts, 1, int(w["iterations"]),
                   int(w["requests"])))
    bound = labruns.run_bound_s(cfg, n)
    assert bound > n * 11 * 2
    assert bound >= n * float(w["timeout_s"])


def test_progress_names_the_run_and_round():
    assert labruns.format_progress({"run_id": "query_rb_rep1", "round": 3, "rounds": 16}) == \
        "query_rb_rep1 round 3/16 in the lab kernel"
    assert labruns.format_progress({"run_id": "q", "round": 0, "rounds": 0}) == \
        "q building the network in the lab kernel"


def test_a_long_build_says_how_many_node_scripts_have_ended(tmp_path):
    # a k=16 build runs its 1,664 node scripts for 40-80 min: the bar said "building the
    # network" all along; now it counts the state files the scripts keep
    from pathdiv.experiments.fabric.nodescript import render

    network = tmp_path / "network"
    (network / "nodes").mkdir(parents=True)
    (network / "switches").mkdir()
    assert labruns.build_tally(network) is None  # nothing written yet
    script = render([["ip", "link", "set", "lo", "up"], ["sysctl", "-w", "a.b=1"]], "x")
    assert "step 2 of 2" in script.script
    (network / "nodes" / "h1.setup.state").write_text("started\nstep 1 of 2\nstep 2 of 2\n")
    (network / "nodes" / "h2.setup.state").write_text("started\nstep 1 of 2\n")
    (network / "nodes" / "h3.setup.state").write_text("started\n")
    (network / "switches" / "e1.start.state").write_text("started\n" + "".join(
        f"step {n} of 18\n" for n in range(1, 19)))
    (network / "nodes" / "h1.setup.sh").write_text("# not a state file\n")
    # the guest writes this folder: a link is not followed, even to an ended state file
    outside = tmp_path / "outside.state"
    outside.write_text("step 1 of 1\n")
    (network / "nodes" / "h4.setup.state").symlink_to(outside)
    assert labruns.build_tally(network) == (2, 4)
    text = labruns.format_progress({"run_id": "q", "round": 0, "rounds": 0}, (2, 4))
    assert text == "q building the network (2 of 4 node scripts ended) in the lab kernel"
    # once the traffic runs, rounds say how far it is
    assert "node scripts" not in labruns.format_progress(
        {"run_id": "q", "round": 1, "rounds": 3}, (4, 4))


def test_the_guest_reads_the_kernel_description_only_from_its_environment(monkeypatch):
    monkeypatch.delenv(boot.GUEST_ENV, raising=False)
    assert boot.guest_kernel_description() is None
    desc = boot.kernel_description("virtual", Path("/x/linux"), "d", "rel", 1536)
    monkeypatch.setenv(boot.GUEST_ENV, json.dumps(desc))
    assert boot.guest_kernel_description() == desc


def test_preflight_refuses_a_lab_run_outside_the_lab_kernel_and_a_host_run_inside(monkeypatch):
    monkeypatch.setattr(environment.os, "geteuid", lambda: 0)
    monkeypatch.setattr(environment.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.delenv(boot.GUEST_ENV, raising=False)
    lab_cfg = validate({"hosts": {"kernel": "lab", "transport": "mptcp", "scheduler": "rb"}})
    with pytest.raises(EnvironmentProblem, match=r"hosts\.kernel: lab, but this is kernel"):
        preflight(lab_cfg)
    monkeypatch.setenv(boot.GUEST_ENV, "{}")
    with pytest.raises(EnvironmentProblem, match=r"hosts\.kernel: host, but this is the pathdiv"):
        preflight(validate({}))


class LaneGuest:
    """A fake guest per lab kernel (threads call it at once): each run starts (its
    folder), waits for `go`, then completes. `hold` run ids stay in progress, polling,
    until the host stops the guest; `interrupt_when` (a count of started runs) sends
    SIGINT to the main thread, as Ctrl-C would."""

    def __init__(self, hold=(), interrupt_when=None):
        import threading
        self.calls, self.hold, self.interrupt_when = [], set(hold), interrupt_when
        self.lock, self.started = threading.Lock(), 0

    def __call__(self, argv, share, kernel, timeout_s, **kw):
        import signal
        import threading
        import time
        i = argv.index("--progress")
        folder, run_ids = Path(argv[i + 2]), argv[i + 3:]
        desc = json.loads(kw["env"][boot.GUEST_ENV])
        with self.lock:
            self.calls.append(run_ids)
        for run_id in run_ids:
            run_dir = folder / "runs" / run_id
            run_dir.mkdir(parents=True, exist_ok=True)
            with self.lock:
                self.started += 1
                if self.started == self.interrupt_when:
                    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            while run_id in self.hold:  # until the host stops this guest (poll raises)
                time.sleep(0.01)
                kw["poll"]()
            write_json_atomic(run_dir / "manifest.json", {
                "status": "complete", "error": "", "kernel_release": IMAGE_RELEASE,
                "lab_kernel": desc, "transfers": {"ok": 1, "total": 1},
                "timings": {"build_s": 1.0, "traffic_s": 1.0, "teardown_s": 1.0}})
            kw["poll"]()
        return uml.UMLResult(0, "", "", kw["clock"], IMAGE_RELEASE, 1.0)


def _lane_plan(tmp_path):
    cfg = validate({"seed": 5, "hosts": {"transport": "mptcp", "kernel": "lab"}})
    runs = expand(cfg, repetitions=3, flow_types=["query", "short"])
    return cfg, runs, runner.prepare_folder(cfg, tmp_path / "out")


def test_jobs_spread_virtual_clock_runs_over_lab_kernels_with_one_plan(tmp_path, monkeypatch,
                                                                      fake_machine):
    cfg, runs, folder = _lane_plan(tmp_path)
    guest = LaneGuest()
    monkeypatch.setattr(uml, "run_in_uml", guest)
    seen = []
    outcome = runner.run_plan(cfg, runs, folder, quiet=True, jobs=2, progress=seen.append)
    assert outcome.count("complete") == len(runs) == 6
    assert sorted(r for call in guest.calls for r in call) == sorted(r.run_id for r in runs)
    # two lanes; in each the query runs share a boot and every short run (500 KB, above
    # lab.own_boot_above_kb) has one to itself
    shorts = [r.run_id for r in runs if r.flow_type == "short"]
    assert len(guest.calls) == len(shorts) + 2
    assert all(len(call) == 1 for call in guest.calls if set(call) & set(shorts))
    assert [p.done for p in seen] == list(range(1, 7))  # one count, whoever finished
    plan = json.loads((folder / "plan.json").read_text())
    assert {e["status"] for e in plan["runs"]} == {"complete"}
    assert all(e["wall_s"] >= 0 for e in plan["runs"])
    assert not list((folder / "running").glob("*.json"))  # no marker left


def test_ctrl_c_stops_every_lab_kernel_and_resume_finishes_the_plan(tmp_path, monkeypatch,
                                                                    fake_machine):
    cfg, runs, folder = _lane_plan(tmp_path)
    lanes = phases(runs, 2, expected_run_s)[0][1]  # as the runner deals them, no history
    held = {lanes[0][1].run_id, lanes[1][0].run_id}  # one in progress in each kernel
    guest = LaneGuest(hold=held, interrupt_when=3)
    monkeypatch.setattr(uml, "run_in_uml", guest)
    with pytest.raises(KeyboardInterrupt):
        runner.run_plan(cfg, runs, folder, quiet=True, jobs=2)
    statuses = _plan_statuses(folder)
    assert {statuses[r][1] for r in held} == {"failed"}
    assert all("interrupted" in statuses[r][2] for r in held)
    assert statuses[lanes[0][0].run_id][1] == "complete"
    later = [r.run_id for lane in lanes for r in lane
             if r.run_id not in held and r.run_id != lanes[0][0].run_id]
    assert {statuses[r][1] for r in later} == {"pending"}
    assert not any((folder / "runs" / r).exists() for r in later)
    assert not list((folder / "running").glob("*.json"))
    monkeypatch.setattr(uml, "run_in_uml", LaneGuest())  # resume, with another --jobs
    outcome = runner.run_plan(cfg, runs, folder, quiet=True, jobs=3)
    assert outcome.count("complete") == 6
    assert {s for _, s, _ in _plan_statuses(folder).values()} == {"complete"}
