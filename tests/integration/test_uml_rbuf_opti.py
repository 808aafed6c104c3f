"""minrtt's receive-buffer optimisation (patch 0025, MPTCP v0.94's) in the lab kernel:
when the peer's connection-level window blocks new data behind a slow subflow, minrtt
halves that subflow's window and sends the blocking data again on the fast one; without
the optimisation (minrtt-plain) it does neither. Both deliver the whole transfer.

Two paths (topology.kind: paths): a fast one, 50 Mbit/s with 5 ms one way, and a slow one,
2 Mbit/s with the same delay and a 500-packet queue (3 s of queue when full). minrtt gives
the slow subflow data whenever the fast one's window is full; that data waits behind the
slow queue while the fast subflow fills the receiver's window behind it.
"""

from __future__ import annotations

import json
import sys

import pytest

from pathdiv.kernels import uml

pytestmark = [pytest.mark.root, pytest.mark.slow]

SIZE = 8_000_000

SLOW_PATH = f"""\
name: rbuf-opti
topology:
  kind: paths
  paths:
    - {{bw_mbps: 50, delay_ms: 5, queue_pkts: 100}}
    - {{bw_mbps: 2, delay_ms: 5, queue_pkts: 500}}
hosts: {{transport: mptcp, cc: cubic, kernel: lab, scheduler: minrtt}}
workload: {{pattern: silent, flow_types: {{long: {SIZE // 1_000_000}MB}}, timeout_s: 300}}
"""


def test_minrtt_halves_the_slow_subflow_and_resends_what_blocks_the_window(lab_kernel,
                                                                         tmp_path):
    config = tmp_path / "slow-path.yaml"
    config.write_text(SLOW_PATH)
    runs = {}
    for sched in ("minrtt", "minrtt-plain"):
        out = tmp_path / sched
        res = uml.run_in_uml(
            [sys.executable, "-m", "pathdiv.experiments.traffic.paths_run", "run",
             str(config), "--set", f"hosts.scheduler={sched}", "--out", str(out)],
            share=tmp_path, kernel=lab_kernel, timeout_s=900)
        assert res.returncode == 0, res.stderr[-3000:]
        runs[sched] = json.loads(res.stdout)
    print({s: (r.get("fct_s"), r["goodput_mbps"], r["bytes_per_path"],
               {k: v for k, v in r["mptcp_counters"].items() if k.startswith("Rbuf")})
           for s, r in runs.items()})
    for sched, run in runs.items():
        assert run["complete"] and run["bytes"] == SIZE, (sched, run)
        assert run["subflows_seen"] == 2, (sched, run)
    counters = runs["minrtt"]["mptcp_counters"]
    assert counters.get("RbufPenalties", 0) > 0, counters
    assert counters.get("RbufResends", 0) > 0, counters
    plain = runs["minrtt-plain"]["mptcp_counters"]
    assert plain.get("RbufPenalties", 0) == 0 and plain.get("RbufResends", 0) == 0, plain
