"""Seed 003's additions to the lab kernel (User-Mode Linux, virtual time): an MPTCP
transfer completes with each new congestion control (olia, coupled-bbr) and each new
scheduler (arp, ar, redundant, minrtt), the redundant scheduler's copies are on the wire
(through one bottleneck, and a large share over two disjoint paths), dual-homed hosts
(topology.kind: paths) open one subflow per interface and arp marks a broken path's
subflow redundant, arp aggregates two paths under bbr, and coupled-bbr takes one path's
rate where bbr takes both.

One client with 2 subflows (two addresses on one interface) fetches 2 MB from a server
through a 20 Mbit/s bottleneck with 5 ms of delay (tests/support/mptcp_lab.py check); the
capture gives the subflows that carried data and the share of segments repeating a DSN.
"""

from __future__ import annotations

import json
import statistics
import sys

import pytest

from pathdiv.kernels import uml
from tests.conftest import load_script

pytestmark = [pytest.mark.root, pytest.mark.slow]

SIZE = 2_000_000

MPTCP_LAB = uml.REPO_DIR / "tests" / "support" / "mptcp_lab.py"


def check(lab_kernel, tmp_path, cc: str, schedulers: list[str]) -> dict[str, dict]:
    share = tmp_path / cc
    share.mkdir()
    res = uml.run_in_uml(
        [sys.executable, str(MPTCP_LAB), "check", "--cc", cc,
         "--schedulers", *schedulers, "--subflows", "2", "--size", str(SIZE),
         "--rate-mbit", "20", "--queue-pkts", "50", "--delay-ms", "5", "--out", str(share)],
        share=share, kernel=lab_kernel, timeout_s=900)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads(res.stdout)
    assert report["cc"] == cc
    runs = {run["scheduler"]: run for run in report["runs"]}
    print(cc, {s: (r["goodput_mbps"], r["subflows_seen"], r["copied_share"])
               for s, r in runs.items()})
    return runs


def test_olia_carries_a_transfer(lab_kernel, tmp_path):
    runs = check(lab_kernel, tmp_path, "olia", ["default", "arp"])
    for sched, run in runs.items():
        assert run["complete"] and run["bytes"] == [SIZE], (sched, run)
        assert run["subflows_seen"] == 2, (sched, run)


def test_coupled_bbr_and_the_arp_family_carry_a_transfer(lab_kernel, tmp_path):
    runs = check(lab_kernel, tmp_path, "coupled-bbr",
                 ["default", "arp", "ar", "redundant", "minrtt"])
    for sched, run in runs.items():
        assert run["complete"] and run["bytes"] == [SIZE], (sched, run)
        assert run["subflows_seen"] == 2, (sched, run)
    # redundant: one subflow carries the new data, the other copies. Here both subflows
    # cross one bottleneck, so the copies queue behind the originals and most data is
    # acknowledged before its copy is due (4.1 % of the segments measured after patch
    # 0012); default copies none. Two disjoint paths: the test after the next
    assert runs["redundant"]["copied_share"] > max(0.005, runs["default"]["copied_share"])


BROKEN_PATHS = """\
name: seed003-broken-pair
topology:
  kind: paths
  paths:
    - {bw_mbps: 20, delay_ms: 10, queue_pkts: 50}
    - {bw_mbps: 20, delay_ms: 10, queue_pkts: 50}
hosts: {transport: mptcp, cc: coupled-bbr, kernel: lab, scheduler: arp}
workload: {pattern: silent, flow_types: {long: 2MB}, timeout_s: 120}
events:
  # Fig. 10's break (configs/seed003-fig10.yaml) at 0.3 s: after the server saw the join
  # (it waits for it before sending), so the join is not left to a path losing 30 %
  - {at_s: 0.3, link: ra2-rb2, set: {loss_pct: 30, delay_ms: 50}}
"""


def test_dual_homed_hosts_open_one_subflow_per_interface_and_arp_marks_the_broken_one_redundant(
        lab_kernel, tmp_path):
    # topology.kind: paths, two paths of 20 Mbit/s and 20 ms RTT; from 0.3 s the second
    # loses 30 % of its packets and its RTT grows to 100 ms (Fig. 10's break), Coupled
    # BBR as the paper pairs it with AR&P. Checked on the kernel's own state: the server's
    # MP_JOIN counters say one subflow joined per extra interface, and AR-Scheduling's
    # counters (patch 0011) that after the break a subflow was redundant at most of its
    # decisions, where the same paths without the break leave (nearly) every subflow
    # non-redundant. (With cubic and loss alone arp did not: the inflight < 4 rule caught
    # the lossy subflow at 4-33 % of the splits over five runs; docs/reproduction/seed003.)
    # The broken paths run twice and their decisions are pooled. In 4 of 101 runs arp
    # decided only 11-12 times, 1 marking (before the break 8 and 1): the lossy subflow
    # held the connection's window (268 packets in flight, the other subflow idle at
    # 0.5 s), so there was little to schedule. 40 runs counted from the break on gave
    # 11-24 decisions after it, 71-92 % of them marking a subflow redundant.
    config = tmp_path / "broken.yaml"
    config.write_text(BROKEN_PATHS)
    runs = {}
    for name, sched, extra in (("default", "default", []), ("arp", "arp", []),
                               ("arp-again", "arp", []),
                               ("arp-clean", "arp", ["--set", "events=[]"])):
        out = tmp_path / name
        res = uml.run_in_uml(
            [sys.executable, "-m", "pathdiv.experiments.traffic.paths_run", "run",
             str(config), "--set", f"hosts.scheduler={sched}", *extra, "--out", str(out)],
            share=tmp_path, kernel=lab_kernel, timeout_s=900)
        assert res.returncode == 0, res.stderr[-3000:]
        runs[name] = json.loads(res.stdout)
    print({s: (r["goodput_mbps"], r["subflows_seen"], r["mptcp_counters"],
               [e["mptcp_counters"] for e in r["events"]]) for s, r in runs.items()})
    for name, run in runs.items():
        assert run["complete"] and run["bytes"] == SIZE, (name, run)
        counters = run["mptcp_counters"]
        assert counters.get("MPCapableSYNRX") == 1, (name, counters)
        assert counters.get("MPJoinAckRx") == 1, (name, counters)  # one per extra interface
    # default spreads data: both interfaces' subflows carried some
    assert runs["default"]["subflows_seen"] == 2, runs["default"]
    assert runs["default"]["mptcp_counters"].get("ArpSplits", 0) == 0

    def decisions(name: str, after_break: bool) -> tuple[int, int]:
        """(splits, subflows marked redundant) of a run, counted from the break on."""
        run = runs[name]
        at_break = run["events"][0]["mptcp_counters"] if after_break else {}
        return tuple(run["mptcp_counters"].get(k, 0) - at_break.get(k, 0)
                     for k in ("ArpSplits", "ArpRedundant"))

    broken = [decisions(name, after_break=True) for name in ("arp", "arp-again")]
    splits, redundant = sum(s for s, _ in broken), sum(r for _, r in broken)
    clean_splits, clean_redundant = decisions("arp-clean", after_break=False)
    assert splits > 10 and clean_splits > 10, (broken, clean_splits)
    assert redundant / splits > 0.5, broken
    assert redundant / splits > clean_redundant / clean_splits + 0.2, (broken, clean_redundant)


def test_arp_aggregates_two_paths_and_coupled_bbr_takes_the_best_paths_rate(lab_kernel,
                                                                            tmp_path):
    # two idle 20 Mbit/s paths of 20 ms. BBR on each subflow fills both: the connection
    # aggregates them (about 40 Mbit/s), with AR&P as with the default scheduler, each
    # path carrying a large share. Coupled BBR paces each subflow at β_i = 1/2 of its
    # bandwidth outside the probing rounds, so the connection gets about one path's rate
    # (Σ β_i BW_i = max BW, section IV), whatever the scheduler: why AR&P's Fig. 10 runs
    # at 20 Mbit/s per path read 22 and not the paper's 40 (docs/reproduction/seed003).
    share = tmp_path / "rates"
    share.mkdir()
    size = 20_000_000
    runs: dict[str, dict[str, dict]] = {}
    for cc in ("bbr", "coupled-bbr"):
        res = uml.run_in_uml(
            [sys.executable, str(MPTCP_LAB), "paths", "--paths",
             "20:20:0", "20:20:0", "--cc", cc, "--schedulers", "default", "arp", "--size",
             str(size), "--queue-pkts", "100", "--out", str(share)],
            share=share, kernel=lab_kernel, timeout_s=900)
        assert res.returncode == 0, res.stderr[-3000:]
        runs[cc] = {run["scheduler"]: run for run in json.loads(res.stdout)["runs"]}
        for sched, run in runs[cc].items():
            assert run["complete"] and run["subflows_seen"] == 2, (cc, sched, run)
    goodput = {cc: {s: r["goodput_mbps"] for s, r in by.items()} for cc, by in runs.items()}
    print(goodput, {s: [p["bytes"] for p in r["paths"]] for s, r in runs["bbr"].items()})
    for sched in ("default", "arp"):
        assert goodput["bbr"][sched] > 30, (sched, goodput)
        assert 12 < goodput["coupled-bbr"][sched] < 0.75 * goodput["bbr"][sched], goodput
    # AR&P aggregates: both subflows non-redundant, each path a large share of the data
    paths = [p["bytes"] for p in runs["bbr"]["arp"]["paths"]]
    assert min(paths) > 0.3 * sum(paths), paths


def test_redundant_copies_the_new_data_on_the_other_path(lab_kernel, tmp_path):
    # two disjoint idle 20 Mbit/s paths of 20 ms RTT, cubic: "redundant" gives the new data
    # to one subflow and the other copies what is still unacknowledged as its own window
    # allows. Patch 0012 sends those copies from the ACK-clocked subflow push too; before,
    # they left only with the application's writes (2-3.6 % of the segments). Not
    # coupled-bbr here: the copying subflow sends only what the other already sent, so its
    # bandwidth estimate stays low, its coupled gain falls to the 4-packets floor, and it
    # copied 41 of 6,651 segments (0.45 %) in this setting (the report's Fig. 10 notes)
    share = tmp_path / "copies"
    share.mkdir()
    res = uml.run_in_uml(
        [sys.executable, str(MPTCP_LAB), "paths", "--paths", "20:20:0", "20:20:0", "--cc",
         "cubic", "--schedulers", "default", "redundant", "--size", "10000000",
         "--queue-pkts", "100", "--out", str(share)],
        share=share, kernel=lab_kernel, timeout_s=900)
    assert res.returncode == 0, res.stderr[-3000:]
    runs = {run["scheduler"]: run for run in json.loads(res.stdout)["runs"]}
    print({s: (r["goodput_mbps"], r["copied_share"], r["paths"]) for s, r in runs.items()})
    for sched, run in runs.items():
        assert run["complete"] and run["subflows_seen"] == 2, (sched, run)
    assert runs["default"]["copied_share"] < 0.01
    # (which subflow copies is not fixed: in one run each path carried 15 % copies of
    # the other's data, so no per-path share is asserted)
    assert runs["redundant"]["copied_share"] > 0.05


SHARE_PATHS = """\
name: seed003-share
topology:
  kind: paths
  paths:
    - {bw_mbps: 20, delay_ms: 25, queue_pkts: 84, background: {flows: 2}}
    - {bw_mbps: 20, delay_ms: 25, queue_pkts: 84, background: {flows: 2}}
hosts: {transport: mptcp, cc: coupled-bbr, kernel: lab, scheduler: minrtt}
workload: {pattern: silent, flow_types: {long: 200MB}, timeout_s: 60, measure_s: 30}
capture: {cc_trace_ms: 10}
"""


def test_coupled_bbr_measures_its_probe_whole_beside_bbr_flows(lab_kernel, tmp_path):
    # Fig. 8's testbed at 20 Mbit/s: two bottlenecks of 25 ms with a one-BDP drop-tail
    # queue, two BBR downloads on each; one MPTCP connection with Coupled BBR (minRTT,
    # MPTCP v0.94's scheduler), 30 s. The queue holds the RTT near twice the min RTT.
    # With BBR's clock of one min RTT per phase a coupled subflow's best delivery-rate
    # sample per cycle was 0.87-0.96 of its estimate at 100 Mbit/s and its share eroded;
    # with phases one round trip long (patch 0020) it measures its probe whole.
    # Not asserted: its share beside the BBR flows. Each boot seeds the guest's random
    # numbers from the host (CONFIG_UML_RANDOM), BBR's cycle phase among them, so one run
    # is one draw: the connection got 0.185 of the mean BBR flow's goodput in one CI run
    # (1.6 against 8.9 Mbit/s) and above 1.0 in others, where upstream's default scheduler
    # (megabytes parked on a subflow pacing at alpha_i) got a sixth. One run cannot tell
    # the two apart; the share is a distribution over runs (docs/reproduction/seed003).
    trace = load_script("scripts/seed003_trace.py")
    config = tmp_path / "share.yaml"
    config.write_text(SHARE_PATHS)
    out = tmp_path / "coupled-bbr"
    res = uml.run_in_uml(
        [sys.executable, "-m", "pathdiv.experiments.traffic.paths_run", "run",
         str(config), "--out", str(out)], share=tmp_path, kernel=lab_kernel, timeout_s=1500)
    assert res.returncode == 0, res.stderr[-3000:]
    run = json.loads(res.stdout)
    assert run["complete"], run
    sockets = trace.read(out / "cc_trace-pdp-h2.jsonl")
    flows = [g for b in run["background"] for g in b["goodput_mbps"]]
    # Both subflows join; one may be reset at its join and leave no samples after 10 s:
    # when the server's first flight on it is lost behind the BBR flows' start-up queue,
    # the client's first segment from the server arrives out of order before the fourth
    # ACK, which Linux 6.12 treats as a protocol violation (check_fully_established,
    # MP_TCPRST "unspecified"); 1 of 8 runs here.
    assert len(sockets) == 2 and all(s[0]["cc"] == "coupled-bbr" for s in sockets.values())
    ratios = [trace.cycle_ratios(samples, from_s=10.0) for samples in sockets.values()]
    pooled = [r for per in ratios for r in per]
    print(run["goodput_mbps"], flows, [(len(r), statistics.median(r)) for r in ratios if r])
    # The best delivery-rate sample of each probing cycle over the estimate, pooled over
    # the subflows' cycles (40-50 per run). Round-trip phases: median 1.00-1.07 in 8 runs;
    # one subflow's own median (about 20 cycles) fell to 0.925 once while the other's was
    # 1.035. BBR's clock: 0.87-0.96 per subflow (docs/reproduction/seed003/trace).
    assert len(pooled) >= 10 and statistics.median(pooled) >= 0.97, ratios
    assert len(flows) == 4 and run["goodput_mbps"] > 0, (run["goodput_mbps"], flows)
