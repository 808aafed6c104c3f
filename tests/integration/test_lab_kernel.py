"""The lab kernel in a VM: its schedulers, 4-subflow transfers under each, per-packet interleaving.

One VM boot runs kernels/mptcp_lab.py (two namespaces, one veth pair, address aliases as
MPTCP subflow endpoints, a captured 2 MB transfer per scheduler). The kernel is built
first when it is not cached (about 12 minutes on 2 cores, once per patch/config change).
"""

from __future__ import annotations

import json
import sys

import pytest

from pathdiv.kernels import vm as labvm

pytestmark = [pytest.mark.root, pytest.mark.slow]

SCHEDULERS = ["default", "rb", "roundrobin"]


def test_schedulers_transfers_and_interleaving_in_the_lab_vm(lab_kernel, tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    result = labvm.run_in_lab(
        [sys.executable, str(labvm.KERNELS_DIR / "mptcp_lab.py"), "check",
         "--schedulers", *SCHEDULERS, "--out", str(share / "check")],
        share=share, kernel=lab_kernel, timeout_s=1200,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.kernel_release == labvm.kernel_release(lab_kernel)
    assert result.kernel_release.endswith("-pathdiv")
    report = json.loads(result.stdout)
    (tmp_path / "report.json").write_text(json.dumps(report, indent=1))

    runs = {run["scheduler"]: run for run in report["runs"]}
    fractions = {name: run.get("interleave_fraction") for name, run in runs.items()}
    print(f"accel={result.accel} vm_seconds={result.seconds:.0f} fractions={fractions}")

    assert report["available_schedulers"] == SCHEDULERS
    assert sorted(runs) == sorted(SCHEDULERS)
    for name, run in runs.items():
        assert run["complete"], (name, run["bytes"])
        assert run["server"]["subflows_at_start"] == [4], (name, run["server"])
        if name != "default":  # default may leave a subflow idle
            assert run["subflows_seen"] == 4, (name, run)
        assert run["capture_dropped"] == 0, (name, run)
        assert run["packet_pairs"] > 500, (name, run)

    assert fractions["rb"] >= 0.9, fractions
    assert fractions["roundrobin"] >= 0.8, fractions
    assert fractions["default"] <= fractions["rb"] - 0.3, fractions
