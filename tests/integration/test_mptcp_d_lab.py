"""mptcp-d's extra subflow elimination in the lab kernel (User-Mode Linux, virtual time):
one MPTCP connection, two subflows sharing one bottleneck queue, a third on a disjoint path
of longer delay (tests/support/ese_lab.py), all three joined before the server sends (the
paper's subflows start together). The figures are printed beside the assertions.

Before patch 0015 the closed subflow kept being handed data by the default scheduler
(679 kB after its window closed, sent a packet per round trip) and mptcp-d took 3.27 s
where lia took 1.04 s (docs/reproduction/seed004/ese-trace.md).
"""

from __future__ import annotations

import json
import sys

import pytest

from pathdiv.kernels import uml

pytestmark = [pytest.mark.root, pytest.mark.slow]


def test_mptcp_d_closes_a_link_sharing_subflow_and_keeps_the_disjoint_one(lab_kernel,
                                                                           tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    tool = uml.REPO_DIR / "tests" / "support" / "ese_lab.py"
    res = uml.run_in_uml([sys.executable, str(tool), "--ccs", "mptcp-d", "lia",
                          "--sample-ms", "20"], share=share, kernel=lab_kernel,
                         timeout_s=1800)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads(res.stdout)
    runs = {run["cc"]: run for run in report["runs"]}
    for cc, run in runs.items():
        print(cc, run["fct_s"], run["subflows_at_start"], run["counters"],
              {a: (s["path"], s["closed"], s["cwnd_max_second_half"], s["bytes_second_half"],
                   s.get("handed_after_close"))
               for a, s in run["subflows"].items()})
        assert run["complete"], (cc, run)
        assert len(run["subflows"]) == 3, (cc, run["subflows"])
        # the subflows joined together, before data (the paper's setting): all three
        # were there when the server sent its first byte
        assert run["join"] == "before" and run["subflows_at_start"] == [3], (cc, run)

    def by_path(cc: str, path: int) -> list[dict]:
        return [s for s in runs[cc]["subflows"].values() if s["path"] == path]

    shared, disjoint = by_path("mptcp-d", 1), by_path("mptcp-d", 2)
    # of the two subflows on one bottleneck exactly one had its window closed ...
    assert sorted(s["closed"] for s in shared) == [False, True]
    closed = next(s for s in shared if s["closed"])
    kept = next(s for s in shared if not s["closed"])
    # a closed window is one packet (TCP's least): about a packet per RTT, a small
    # fraction of what its partner moves over the same queue
    assert closed["bytes_second_half"] < 0.2 * kept["bytes_second_half"]
    # ... and the subflow on the disjoint path kept its window and carried data
    assert not disjoint[0]["closed"] and disjoint[0]["bytes_second_half"] > 0
    # lia, the same subflows without elimination: nothing is closed
    assert not any(s["closed"] for s in runs["lia"]["subflows"].values())
    # the kernel counted the one closure, and moved what the subflow held to the others
    assert runs["mptcp-d"]["counters"].get("MptcpDClosed") == 1
    assert runs["mptcp-d"]["counters"].get("MptcpDReinject") == 1
    # w_r = 0: once closed, the scheduler queued no new data on it (at most a few frames
    # while no other subflow could take any) ...
    assert closed["handed_after_close"] < 10 * 1448
    # ... so closing it did not hold the connection back: mptcp-d finishes about when
    # lia does (within a quarter; the same 20 MB over the same paths)
    assert runs["mptcp-d"]["fct_s"][0] <= 1.25 * runs["lia"]["fct_s"][0]


def test_mptcp_d_closes_a_shared_subflow_placed_by_pathdiv_before_data(lab_kernel, tmp_path):
    """The same network with pathdiv's transfer tool: its client opens one subflow per
    address through the userspace path manager before the server sends (as the fat-tree
    runs do with hosts.join_before_data). Every create must be answered as the kernel
    answered it: when the path manager's replies were read one request late, the first
    extra subflow was never opened and the fetch failed or ran on fewer subflows."""
    share = tmp_path / "share"
    share.mkdir()
    tool = uml.REPO_DIR / "tests" / "support" / "ese_lab.py"
    res = uml.run_in_uml([sys.executable, str(tool), "--ccs", "mptcp-d", "--joins", "placed",
                          "--sample-ms", "20"], share=share, kernel=lab_kernel,
                         timeout_s=1800)
    assert res.returncode == 0, res.stderr[-3000:]
    run = json.loads(res.stdout)["runs"][0]
    subflows = run["subflows"]
    print(run["fct_s"], run["placed"], run["counters"],
          {a: (s["path"], s["closed"], s["bytes_second_half"]) for a, s in subflows.items()})
    assert run["complete"], run
    # all three subflows were opened before data, from the addresses and ports asked for
    assert len(run["placed"]) == 3 and run["subflows_seen"] == 3, run
    assert len(subflows) == 3, subflows
    shared = [s for s in subflows.values() if s["path"] == 1]
    disjoint = [s for s in subflows.values() if s["path"] == 2]
    assert sorted(s["closed"] for s in shared) == [False, True]
    assert not disjoint[0]["closed"] and disjoint[0]["bytes_second_half"] > 0
    assert run["counters"].get("MptcpDClosed") == 1
