"""Host variants in the lab kernel (User-Mode Linux, virtual time): the lia coupled
congestion control against uncoupled CUBIC, and `hosts.reordering` under packet spraying.

Virtual time makes the figures independent of the host's load (the same run gives the
same bytes); they are printed beside the assertions.
"""

from __future__ import annotations

import json
import sys

import pytest

from pathdiv.kernels import uml

pytestmark = [pytest.mark.root, pytest.mark.slow]


def lab_json(lab_kernel, tmp_path, *args: str) -> dict:
    share = tmp_path / "share"
    share.mkdir()
    lab = uml.REPO_DIR / "tests" / "support" / "mptcp_lab.py"
    res = uml.run_in_uml([sys.executable, str(lab), *args],
                         share=share, kernel=lab_kernel, timeout_s=1800)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.clock == "virtual"
    return json.loads(res.stdout)


def test_lia_takes_about_one_tcp_share_of_a_shared_bottleneck(lab_kernel, tmp_path):
    # one MPTCP connection with 4 subflows and one TCP flow through one 20 Mbit/s
    # bottleneck (RTT 40 ms + queue of 60 packets), 60 s after a 10 s warm-up
    report = lab_json(lab_kernel, tmp_path, "share", "--ccs", "cubic", "lia")
    runs = {run["cc"]: run for run in report["runs"]}
    print({cc: (run["mptcp"]["mbps"], run["tcp"]["mbps"], run["mptcp_to_tcp"])
           for cc, run in runs.items()})
    for cc, run in runs.items():
        assert run["mptcp"]["subflows"] == 4, (cc, run)
        total = run["mptcp"]["mbps"] + run["tcp"]["mbps"]
        assert 0.9 * report["rate_mbit"] <= total <= 1.01 * report["rate_mbit"], (cc, run)
    assert runs["lia"]["mptcp_to_tcp"] <= 1.3
    # uncoupled, each subflow competes as a flow of its own: MPTCP takes more than TCP
    # (measured 1.46-2.44, not the 4 of four independent flows: with 4 subflows MPTCP
    # reaches about half of it here, as it does with lia, 0.35-0.73; kernels/README.md).
    # The figure is the test's printout; what it checks is that coupling gives way.
    assert runs["cubic"]["mptcp_to_tcp"] > 1.0
    assert runs["cubic"]["mptcp_to_tcp"] > 1.5 * runs["lia"]["mptcp_to_tcp"]


def test_the_reorder_hold_stops_spurious_retransmissions_of_a_sprayed_flow(lab_kernel,
                                                                          tmp_path):
    # one TCP transfer of 10 MB sprayed packet by packet over 4 paths of 1, 2, 3, 4 ms
    # (5 Mbit/s each); gro holds SACKs for up to 20 ms (the reordering, queues included,
    # lasts 12-20 ms here: kernels/README.md)
    report = lab_json(lab_kernel, tmp_path, "spray", "--levels", "default", "tuned", "gro")
    runs = {run["reordering"]: run for run in report["runs"]}
    print({level: (run["retrans_share"], run["goodput_mbps"], run["sender"]["dsack_dups"],
                   run["sender"]["reordering"]) for level, run in runs.items()})
    for level, run in runs.items():
        assert run["complete"], (level, run)
    default, tuned, gro = runs["default"], runs["tuned"], runs["gro"]
    # the study's problem: reordering taken for loss, retransmissions the receiver
    # reports as duplicates (DSACK)
    assert default["sender"]["reord_seen"] > 0
    assert default["retrans_share"] > 0 and default["sender"]["dsack_dups"] > 0
    assert tuned["sender"]["reordering"] >= 32  # the tuned initial degree took effect
    # the hold: at most a quarter of default's retransmissions, goodput at least as high
    assert gro["retrans_share"] <= default["retrans_share"] / 4
    assert gro["goodput_mbps"] >= default["goodput_mbps"]
