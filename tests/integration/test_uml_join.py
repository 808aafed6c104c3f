"""A joined subflow whose first data segment is lost, replayed into the lab kernel as the
joining side (patch 0024).

Fig. 9(b)'s 25/100-ms runs (docs/reproduction/seed003/README.md): the server sent data
on the new subflow as soon as it had the third ACK, the first segments were dropped
behind a full queue, and the client reset the subflow when the next arrived out of
order; the connection never used that path. tests/support/join_replay.py plays that
sequence from a crafted MPTCP server against the kernel's MPTCP client, in virtual time.

Measured on the lab kernel without patch 0024 (recipe 9d314febd172cd8c): the kernel
reset the subflow 2 microseconds after the out-of-order segment (MP_TCPRST, reason 0)
and the client read none of the 2,800 bytes; in order, all of them. One boot per case,
a few seconds of wall time.
"""

from __future__ import annotations

import json
import sys

import pytest

from pathdiv.kernels import uml

pytestmark = [pytest.mark.root, pytest.mark.slow]


def replay(lab_kernel, tmp_path, scenario: str) -> dict:
    share = tmp_path / "share"
    share.mkdir()
    lab = uml.REPO_DIR / "tests" / "support" / "join_replay.py"
    res = uml.run_in_uml([sys.executable, str(lab), "run", "--scenario", scenario,
                          "--gap-s", "0.3", "--timeout-s", "10"],
                         share=share, kernel=lab_kernel, timeout_s=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.clock == "virtual"
    report = json.loads(res.stdout)
    print({k: v for k, v in report.items() if k != "sent"})
    return report


def test_uml_joined_subflow_survives_its_first_segment_lost(lab_kernel, tmp_path):
    report = replay(lab_kernel, tmp_path, "lost-first")
    # the second segment came first: the kernel answers it (a duplicate ACK), keeps the
    # subflow, and takes the first one when it comes 0.3 s later
    assert not report["join_reset"], f"the kernel reset the subflow: {report}"
    assert report["first_reply"]["ack_rel"] == 0
    assert report["bytes_received"] == report["bytes_expected"]
    assert 0.3 <= report["received_all_after_s"] < 0.5


def test_uml_joined_subflow_in_order(lab_kernel, tmp_path):
    # the control: the same server, the segments in order (what 6.12 always took)
    report = replay(lab_kernel, tmp_path, "in-order")
    assert not report["join_reset"]
    assert report["first_reply"]["ack_rel"] == 1400
    assert report["bytes_received"] == report["bytes_expected"]
