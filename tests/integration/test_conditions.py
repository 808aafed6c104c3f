"""Link conditions and events on a real run (root, this machine's kernel, kernel data
plane), through `pathdiv run` and the analysis:

- two core links fail 1 s into a permutation of 4MB fetches (with background load and
  request/response traffic beside it): every MPTCP connection that had a subflow on a
  failed link and one elsewhere completes (subflows on disjoint paths, so some always do:
  with hashed ones, one CI run had none); TCP flows stuck on a failed link fail with
  their reason and the run ends (nothing hangs); the report draws the time plot with
  the events; background flows are in the captures, not among the measured transfers;
- `loss_pct: 1` on h1's access link: every transfer of h1 retransmits, no other does.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pathdiv.analysis.capture.flows import (
    group_connections,
    match_transfers,
    read_link_captures,
    split_subflows,
)
from pathdiv.analysis.metrics.table import load_transfers, run_topology

ROOT = Path(__file__).resolve().parents[2]
FAILED = ("a1-c1", "a2-c3")

FAILURE = """\
name: failure-check
seed: 7
topology:
  k: 4
  links: {host: {bw_mbps: 20}, edge: {bw_mbps: 20}, core: {bw_mbps: 20}}
dataplane: nftables
switching: {mode: ecmp}
hosts: {subflows: 4, kernel: host, subflow_paths: disjoint}
workload:
  pattern: permutation
  flow_types: {long: 4MB}
  iterations: 1
  timeout_s: 20
  background: {pattern: poisson, load: 0.05}
  max_size: 200KB
  rpc: {rate_per_s: 5, connections: 1}
events:
  - {at_s: 1, link: a1-c1, action: down}
  - {at_s: 1, link: a2-c3, action: down}
factors:
  switching: {ecmp-mptcp: {hosts.transport: mptcp}, ecmp-tcp: {hosts.transport: tcp}}
analysis: {ivs: [switching], clusters: [flow_type]}
"""

LOSS = """\
name: loss-check
seed: 3
topology:
  k: 4
  links: {host: {bw_mbps: 20, queue_pkts: 3000}, edge: {bw_mbps: 20, queue_pkts: 3000},
          core: {bw_mbps: 20, queue_pkts: 3000}}
  link_overrides: {h1-e1: {loss_pct: 1}}
dataplane: nftables
switching: {mode: ecmp}
hosts: {subflows: 4, kernel: host}
workload: {pattern: silent, flow_types: {mid: 4MB}, iterations: 1, requests: 1}
factors:
  switching: {ecmp-tcp: {hosts.transport: tcp}, ecmp-mptcp: {hosts.transport: mptcp}}
analysis: {ivs: [switching], clusters: [flow_type]}
"""

pytestmark = pytest.mark.root


def _needs() -> str | None:
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    if importlib.util.find_spec("mininet") is None:
        return "mininet not installed (make setup)"
    return None


def _run(base: Path, text: str) -> Path:
    reason = _needs()
    if reason:
        pytest.skip(reason)
    cfg = base / "config.yaml"
    cfg.write_text(text)
    out = base / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "pathdiv.experiments.cli", "run", str(cfg), "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=1800,
    )
    assert proc.returncode == 0, f"pathdiv run failed:\n{proc.stdout[-3000:]}\n" \
                                 f"{proc.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def failure(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("failure"), FAILURE)


@pytest.fixture(scope="module")
def lossy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("loss"), LOSS)


def _manifest(results: Path, transport: str) -> tuple[Path, dict]:
    for path in sorted((results / "runs").glob("*/manifest.json")):
        m = json.loads(path.read_text())
        if m["config"]["hosts"]["transport"] == transport:
            return path.parent, m
    raise AssertionError(f"no {transport} run in {results}")


def _subflows_on(run_dir: Path, manifest: dict, links: tuple[str, ...], after_wall: float
                 ) -> tuple[pd.DataFrame, dict[int, list[int]], set[int], set[int]]:
    """(transfers, transfer -> subflows, subflows with packets on `links` after
    `after_wall`, subflows that never touched `links` and carried payload after it)."""
    topo = run_topology(manifest["config"])
    index = {lk.name: i for i, lk in enumerate(topo.links)}
    pk, table = split_subflows(read_link_captures(run_dir / "captures", topo))
    table = group_connections(table)
    transfers = load_transfers(run_dir)
    members = match_transfers(transfers, table, topo)
    on_links = pk["link"].isin([index[n] for n in links])
    late = pk["ts"] > after_wall
    hit = set(pk.loc[on_links & late, "subflow"].unique())
    touched = set(pk.loc[on_links, "subflow"].unique())
    carried = set(pk.loc[late & (pk["payload"] > 0), "subflow"].unique())
    return transfers, members, hit, carried - touched


def test_events_are_recorded_with_their_actual_times(failure: Path) -> None:
    for transport in ("mptcp", "tcp"):
        _, m = _manifest(failure, transport)
        assert m["status"] == "complete", m.get("error")
        events = m["events"]
        assert [e["link"] for e in events] == list(FAILED)
        assert all(e["applied"] and e["applied_s"] >= e["at_s"] for e in events), events


def test_mptcp_completes_on_its_other_subflows(failure: Path) -> None:
    run_dir, m = _manifest(failure, "mptcp")
    t_fail = m["workload_start_wall_s"] + max(e["applied_s"] for e in m["events"])
    transfers, members, hit, alive = _subflows_on(run_dir, m, FAILED, t_fail)
    # caught by the failure, with a subflow on a working path that carried data after it
    survivors = [tid for tid, sfs in members.items() if set(sfs) & hit and set(sfs) & alive]
    assert survivors, "no MPTCP connection had a subflow on a failed link and one elsewhere"
    ok = transfers.set_index("transfer_id")["ok"]
    assert all(ok[tid] for tid in survivors), transfers[transfers["transfer_id"].isin(
        survivors)][["transfer_id", "client", "server", "ok", "error"]]


def test_tcp_flows_on_a_failed_link_fail_with_their_reason(failure: Path) -> None:
    run_dir, m = _manifest(failure, "tcp")
    t_fail = m["workload_start_wall_s"] + max(e["applied_s"] for e in m["events"])
    transfers, members, hit, _ = _subflows_on(run_dir, m, FAILED, t_fail)
    failed = transfers[~transfers["ok"]]
    assert len(failed) > 0, "no TCP flow was caught by the failed links"
    assert failed["error"].str.len().gt(0).all()
    assert failed["error"].str.contains("timed out|Timeout", case=False).all(), \
        failed[["client", "server", "error"]]
    # a flow that failed is one whose packets were on a failed link after it failed,
    # or one that tried to start through it (its SYNs are there too)
    stuck = {tid for tid, sfs in members.items() if set(sfs) & hit}
    assert set(failed["transfer_id"]) <= stuck | {t for t, s in members.items() if not s}
    assert m["transfers"]["total"] == 16  # the run ended, with every row accounted for


def test_report_draws_goodput_over_time_with_the_events(failure: Path) -> None:
    assert (failure / "plots" / "goodput_time.png").stat().st_size > 0
    assert "(plots/goodput_time.png)" in (failure / "report.md").read_text()
    run_dir, _ = _manifest(failure, "mptcp")
    tl = pd.read_csv(run_dir / "timeline.csv")
    assert tl["measured_mbps"].max() > 0


def test_background_is_captured_but_not_measured(failure: Path) -> None:
    run_dir, m = _manifest(failure, "tcp")
    transfers = load_transfers(run_dir)
    assert (transfers["server_port"] == 8080).all()
    background = pd.read_csv(run_dir / "background.csv")
    assert len(background) > 0 and background["ok"].any()
    topo = run_topology(m["config"])
    pk = read_link_captures(run_dir / "captures", topo)
    assert ((pk["sport"] == 8081) & (pk["payload"] > 0)).any()
    requests = pd.read_csv(run_dir / "requests.csv")
    assert requests["ok"].any() and (requests.loc[requests["ok"], "latency_s"] > 0).all()


def test_loss_raises_retransmissions_only_on_flows_that_cross_the_link(lossy: Path) -> None:
    tm = pd.read_csv(lossy / "transfer_metrics.csv")
    assert tm["ok"].all() and tm["measured"].all(), tm[["client", "server", "error"]]
    crossing = (tm["client"] == "h1") | (tm["server"] == "h1")
    assert crossing.sum() >= 4  # h1 as client and as server, in both runs
    assert (tm.loc[crossing, "retrans_pct"] > 0.3).all(), tm.loc[crossing, "retrans_pct"]
    assert (tm.loc[~crossing, "retrans_pct"] < 0.3).all(), \
        tm.loc[~crossing, ["client", "server", "retrans_pct"]]
    assert np.isfinite(tm["retrans_pct"]).all()
