"""pathdiv's transfer server keeps an MPTCP reply alive until the client has it
(lab kernel, virtual time; tests/support/mptcp_lab.py orphan).

Linux 6.12 resets an MPTCP connection (MP_FASTCLOSE and RST) 60 s after its application
closed the socket, whatever it still had to deliver: the close timeout of an orphaned
msk (net/mptcp/protocol.c, TCP_TIMEWAIT_LEN). The server used to close right after
writing a reply into its send buffer; a 25 MB reply slowed under incast (seed 001's noisy
network, RB) ended in ConnectionResetError at 118.7 s. Here the reply is 4 MB in a 4 MB
send buffer over a 0.4 Mbit/s path, about 80 s of delivery. With the server before the
fix (`mptcp_lab.py orphan --server-script` with that revision's transfer.py) the client
got ConnectionResetError 64.5 s in, about 3.0 MB of the 4 MB delivered; with the fix,
which shuts the sending side down and holds the socket until the client closed, the
4 MB arrived whole in 85.3 s (lab kernel 28e6e8418a8c5709, 7 s of wall time).
"""

from __future__ import annotations

import json
import sys

import pytest

from pathdiv.kernels import uml

pytestmark = [pytest.mark.root, pytest.mark.slow]

MPTCP_LAB = uml.REPO_DIR / "tests" / "support" / "mptcp_lab.py"


def test_a_reply_longer_than_the_orphan_timeout_is_delivered_whole(lab_kernel, tmp_path):
    res = uml.run_in_uml(
        [sys.executable, str(MPTCP_LAB), "orphan", "--size", "4000000", "--rate-mbit",
         "0.4", "--out", str(tmp_path)],
        share=tmp_path, kernel=lab_kernel, timeout_s=900)
    assert res.returncode == 0, res.stderr[-3000:]
    run = json.loads(res.stdout)
    print({k: run[k] for k in ("ok", "error", "received", "seconds", "fastclose_segments",
                                "rst_segments")})
    # 4 MB at 0.4 Mbit/s: the application was done writing long before; the delivery
    # outlasts the 60 s close timeout of an orphaned MPTCP socket
    assert run["seconds"] > 70, run
    assert run["ok"] and run["received"] == 4_000_000, run
