"""`pathdiv probe` and `pathdiv net` with hosts.kernel: lab run inside the lab kernel (UML).

The probe of the reference config (configs/noisy.yaml: both host levels on the lab kernel)
prints the same JSON as on the host kernel, plus where it ran; the Mininet CLI, fed on
stdin as a student types it, answers from inside the lab kernel. No rate is asserted
(benchmarks/ measure them).

The reference config says `dataplane: auto`, which picks a P4 plane wherever its tools are
found; both pin the nftables plane so that they cost the same on every machine (the P4
planes in the lab kernel: tests/integration/test_planes_query.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.root, pytest.mark.slow]
PATHDIV = [sys.executable, "-m", "pathdiv.experiments.cli"]
PROBE_KEYS = {"dataplane", "mode", "pair", "tcp_flows", "mptcp", "tcp_single",
              "goodput_fraction", "kernel_release", "clock"}
SCRIPT = """\
paths h1 h16
flow h1 h16 1MB mptcp
mode static
flow h1 h16 1MB tcp
flow h1 h99 1MB
exit
"""


def test_probe_of_the_reference_config_runs_in_the_lab_kernel(lab_kernel, root_fabric):
    proc = subprocess.run([*PATHDIV, "probe", "configs/noisy.yaml", "--json",
                           "--set", "dataplane=nftables"], cwd=REPO,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)  # one JSON object, nothing else on stdout
    assert PROBE_KEYS <= set(result), sorted(result)
    assert result["kernel_release"].endswith("-pathdiv"), result["kernel_release"]
    assert result["clock"] == "virtual"
    assert result["mptcp"]["subflows"] == 4
    assert sum(result["tcp_single"]["per_core"].values()) > 0
    assert 0 < result["goodput_fraction"] <= 1.0, result


def lab_session(*extra: str) -> list[str]:
    """SCRIPT typed into `pathdiv net configs/noisy.yaml` (lab kernel): the output per
    command, split at the prompt."""
    proc = subprocess.run([*PATHDIV, "net", "configs/noisy.yaml", *extra], input=SCRIPT,
                          capture_output=True, text=True, timeout=1200, cwd=REPO)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    return proc.stdout.replace("\r\n", "\n").split("pathdiv> ")[1:]


def test_net_cli_on_stdin_answers_from_the_lab_kernel(lab_kernel, root_fabric):
    paths, mptcp, static, tcp, bad_host, *_ = lab_session("--set", "dataplane=nftables")
    assert "4 equal-cost path(s) h1 -> h16" in paths
    assert "over mptcp: FCT" in mptcp, mptcp
    assert "mode: static" in static
    assert "paths used: 1 of 4" in tcp, tcp
    assert "error: unknown host 'h99'" in bad_host
