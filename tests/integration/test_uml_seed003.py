"""Seed 003's additions to the lab kernel (User-Mode Linux, virtual time): an MPTCP
transfer completes with each new congestion control (olia, coupled-bbr) and each new
scheduler (arp, ar, redundant), the redundant scheduler's copies are on the wire, dual-homed
hosts open one subflow per interface, arp rides out a lossy path, and coupled-bbr takes one
path's rate where bbr takes both.

One client with 2 subflows (two addresses on one interface) fetches 2 MB from a server
through a 20 Mbit/s bottleneck with 5 ms of delay (tests/support/mptcp_lab.py check); the
capture gives the subflows that carried data and the share of segments repeating a DSN.
"""

from __future__ import annotations

import json
import sys

import pytest

from pathdiv.kernels import uml

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
    runs = check(lab_kernel, tmp_path, "coupled-bbr", ["default", "arp", "ar", "redundant"])
    for sched, run in runs.items():
        assert run["complete"] and run["bytes"] == [SIZE], (sched, run)
        assert run["subflows_seen"] == 2, (sched, run)
    # redundant: one subflow carries the new data, the other copies. Copies leave only from
    # the connection-level push, not from the ACK-driven subflow push (kernels/README.md),
    # so they are few: 2.2-8.8 % of the segments measured, none with default
    assert runs["redundant"]["copied_share"] > max(0.005, runs["default"]["copied_share"])


def test_dual_homed_hosts_open_one_subflow_per_interface_and_arp_rides_out_a_lossy_path(
        lab_kernel, tmp_path):
    # two paths of 20 Mbit/s and 20 ms RTT, the second losing 30 % of its data packets;
    # cubic, whose window on the lossy path stays near 2 packets: AR-Scheduling's rule of
    # fewer than 4 packets in flight keeps new data off that subflow, and the connection
    # is not held up by its losses as it is with default (measured 12.0-16.1 vs 5.9-6.9 Mbit/s
    # on the seed-003 kernel, 7.6 vs 5.5 on the full series: one 2 MB transfer under 30 %
    # loss varies, so only the direction is asserted)
    share = tmp_path / "paths"
    share.mkdir()
    res = uml.run_in_uml(
        [sys.executable, str(MPTCP_LAB), "paths", "--paths",
         "20:20:0", "20:20:30", "--cc", "cubic", "--schedulers", "default", "arp",
         "--size", str(SIZE), "--out", str(share)],
        share=share, kernel=lab_kernel, timeout_s=900)
    assert res.returncode == 0, res.stderr[-3000:]
    runs = {run["scheduler"]: run for run in json.loads(res.stdout)["runs"]}
    print({s: (r["goodput_mbps"], r["subflows_seen"], r["paths"]) for s, r in runs.items()})
    for sched, run in runs.items():
        assert run["complete"] and run["bytes"] == [SIZE], (sched, run)
    # one subflow per interface, each carrying data, as default spreads it; arp may keep
    # every data segment off the lossy subflow (fewer than 4 packets in flight there), so
    # its capture can show one data-carrying subflow (seen once in five runs)
    default = runs["default"]
    assert default["subflows_seen"] == 2, default
    assert all(p["segments"] > 0 for p in default["paths"]), default
    assert runs["arp"]["goodput_mbps"] > runs["default"]["goodput_mbps"], runs


def test_coupled_bbr_takes_the_best_paths_rate_where_bbr_takes_both(lab_kernel, tmp_path):
    # two idle 20 Mbit/s paths of 20 ms: BBR on each subflow fills both (about 40 Mbit/s);
    # Coupled BBR paces each at β_i = 1/2 of its bandwidth outside the probing phases, so
    # the connection gets about one path's rate (Σ β_i BW_i = max BW, section IV)
    share = tmp_path / "rates"
    share.mkdir()
    size = 20_000_000
    goodput = {}
    for cc in ("bbr", "coupled-bbr"):
        res = uml.run_in_uml(
            [sys.executable, str(MPTCP_LAB), "paths", "--paths",
             "20:20:0", "20:20:0", "--cc", cc, "--schedulers", "default", "--size",
             str(size), "--queue-pkts", "100", "--out", str(share)],
            share=share, kernel=lab_kernel, timeout_s=900)
        assert res.returncode == 0, res.stderr[-3000:]
        run = json.loads(res.stdout)["runs"][0]
        assert run["complete"] and run["subflows_seen"] == 2, (cc, run)
        goodput[cc] = run["goodput_mbps"]
    print(goodput)
    assert goodput["bbr"] > 30
    assert 12 < goodput["coupled-bbr"] < 0.75 * goodput["bbr"]
