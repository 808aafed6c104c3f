"""A DATA_FIN inside a reinjected mapping, replayed into the lab kernel (patch 0022).

`rb-drops-short`'s hung transfer (docs/reproduction/paper-settings.md, RB point 7): the
sender's last mapping went again, with the DATA_FIN, on another subflow after its data
had arrived over others; Linux 6.12 recorded that DATA_FIN and never acknowledged it,
nor any bare DATA_FIN after it, and the receiving application waited for an end of
stream that never came. tests/support/datafin_replay.py plays that sequence from a
crafted MPTCP peer (MP_CAPABLE, MP_JOIN, DSS mappings) against the kernel's MPTCP
listener, in virtual time: the same packets every run.

Measured on the lab kernel without patch 0022 (recipe fca58adb63275fa1): all 20,000
bytes received, no end of stream in the application's 60 s, eight bare DATA_FINs over
15 s unacknowledged; with it, the DATA_FIN is acknowledged and recv() returns 0 within
20 microseconds of the reinjection. One boot per case, about 3 s of wall time.
"""

from __future__ import annotations

import json
import sys

import pytest

from pathdiv.kernels import uml

pytestmark = [pytest.mark.root, pytest.mark.slow]

SIZE = 20_000


def replay(lab_kernel, tmp_path, *args: str) -> dict:
    share = tmp_path / "share"
    share.mkdir()
    lab = uml.REPO_DIR / "tests" / "support" / "datafin_replay.py"
    res = uml.run_in_uml([sys.executable, str(lab), "run", "--size", str(SIZE), *args],
                         share=share, kernel=lab_kernel, timeout_s=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.clock == "virtual"
    return json.loads(res.stdout)


# the capture's last mapping: 2,152 bytes, two segments on the wire; and one segment
@pytest.mark.parametrize("last", [2152, 1000])
def test_uml_data_fin_in_a_reinjected_mapping_ends_the_stream(lab_kernel, tmp_path, last):
    report = replay(lab_kernel, tmp_path, "--scenario", "reinjection", "--last", str(last),
                    "--bare", "4", "--wait-s", "1", "--timeout-s", "40")
    print({k: v for k, v in report.items() if k not in ("sent", "data_acks")})
    # the whole stream had been acknowledged at the data level before the reinjection:
    # the reinjected mapping carried only data the receiver held, and the DATA_FIN
    assert report["bytes_received"] == SIZE
    assert report["held_acked_after_s"] <= 0
    # the DATA_FIN is acknowledged and the application reads the end of stream, in
    # reply to the reinjection itself: no bare DATA_FIN was needed
    assert report["eof"], "no end of stream: the DATA_FIN was never acknowledged"
    assert 0 <= report["eof_after_s"] < 0.5
    assert report["fin_acked_after_s"] is not None and 0 <= report["fin_acked_after_s"] < 0.5
    assert report["bare_data_fins_sent"] == 0


def test_uml_data_fin_with_new_data_ends_the_stream(lab_kernel, tmp_path):
    # the control: the same peer, the last mapping's data new to the receiver (what
    # Linux handled before patch 0022 too), so a failure above is the reinjection's
    report = replay(lab_kernel, tmp_path, "--scenario", "in-order", "--last", "2152",
                    "--bare", "4", "--wait-s", "1", "--timeout-s", "40")
    print({k: v for k, v in report.items() if k not in ("sent", "data_acks")})
    assert report["bytes_received"] == SIZE
    assert report["eof"] and 0 <= report["eof_after_s"] < 0.5
    assert report["bare_data_fins_sent"] == 0
