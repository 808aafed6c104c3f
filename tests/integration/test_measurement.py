"""Measurement on a real run: a small silent experiment (TCP and MPTCP, ECMP) through
`pathdiv run`, then the metrics checked against what must hold whatever the network did:

- goodput × FCT equals the payload, and the subflows matched to each transfer carry
  at least the payload as new (not retransmitted) bytes: MPTCP grouping found them all;
- throughput ≥ goodput;
- per link, the bytes in the capture match the interface counters over the capture
  window within 2% (the runner records them in the manifest as `interface_counters`),
  and the capture holds every packet they counted (captures are buffered: a stop before
  the kernel hands over its last block would lose it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pathdiv.analysis.capture.flows import capture_files, read_link_captures
from pathdiv.analysis.metrics.table import compute_metrics, run_topology
from tests.conftest import missing_packets

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """\
name: measurement-check
seed: 3
repetitions: 1
topology:
  kind: fattree
  k: 4
  links: {host: {bw_mbps: 20}, edge: {bw_mbps: 20}, core: {bw_mbps: 20}}
dataplane: nftables
switching: {mode: ecmp}
hosts: {transport: tcp, subflows: 4, cc: cubic, kernel: host}
workload: {pattern: silent, flow_types: {short: 500KB}, iterations: 1, requests: 1}
factors:
  switching: {ecmp-tcp: {hosts.transport: tcp}, ecmp-mptcp: {hosts.transport: mptcp}}
analysis: {ivs: [switching]}
"""

pytestmark = pytest.mark.root


def _needs() -> str | None:
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    if importlib.util.find_spec("pathdiv.experiments.runner") is None:
        return "pathdiv.experiments.runner not written yet (pathdiv run)"
    if importlib.util.find_spec("mininet") is None:
        return "mininet not installed (make setup)"
    return None


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = _needs()
    if reason:
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("measure")
    cfg = base / "measure.yaml"
    cfg.write_text(CONFIG)
    out = base / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "pathdiv.experiments.cli", "run", str(cfg), "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=1800,
    )
    tail = f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, f"pathdiv run failed:\n{tail}"
    found = [p.parent for p in [out / "runs", *out.glob("*/runs")] if p.is_dir()]
    assert len(found) == 1, f"expected one results folder with runs/ under {out}, got {found}"
    compute_metrics(found[0])
    return found[0]


def test_goodput_times_fct_is_the_payload_and_all_of_it_was_seen(results: Path) -> None:
    tm = pd.read_csv(results / "transfer_metrics.csv")
    done = tm[tm["ok"] & tm["measured"]]
    assert len(done) == len(tm) > 0, tm[~(tm["ok"] & tm["measured"])].to_string()
    delivered = done["goodput_mbps"] * 1e6 * done["fct_s"] / 8
    assert (delivered - done["size_bytes"]).abs().max() < 1e-3
    new_bytes = done["data_bytes_sent"] - done["retrans_bytes"]
    assert (new_bytes >= done["size_bytes"]).all(), done[new_bytes < done["size_bytes"]]
    mptcp = done[done["transport"] == "mptcp"]
    # Every subflow the application saw is in the captures. The capture may hold more:
    # with `subflow` endpoints on every host, a server's in-kernel path manager also
    # tries joins towards the client's initial address and port, which the client
    # refuses (SYN + RST); those attempts count as opened, never as used.
    assert (mptcp["subflows_opened"] >= mptcp["subflows_app"]).all()


def test_throughput_is_at_least_goodput(results: Path) -> None:
    m = pd.read_csv(results / "metrics.csv")
    assert (m["throughput_mbps"] >= m["goodput_mbps"]).all()
    assert m["utilization"].between(0, 1).all()


def test_link_bytes_match_interface_counters(results: Path) -> None:
    checked = 0
    for mpath in sorted((results / "runs").glob("*/manifest.json")):
        manifest = json.loads(mpath.read_text())
        counters = manifest.get("interface_counters")
        if not counters:
            pytest.skip("manifest has no interface_counters (per captured interface: rx/tx "
                        "bytes over the capture window); the runner must record them")
        stop = manifest["capture"]["stop"]
        assert stop["dropped_by_kernel"] == 0 and not stop["files_full"], stop
        assert missing_packets(mpath.parent) == {}
        topo = run_topology(manifest["config"])
        pk = read_link_captures(mpath.parent / "captures", topo)
        captured = pk.groupby("link")["wire_len"].sum()
        for intf in capture_files(mpath.parent / "captures"):
            link = topo.links.index(topo.link_of_intf(intf))
            c = counters[intf]
            counted = c["rx_bytes"] + c["tx_bytes"]
            if counted < 100_000:  # ARP and the like dominate nearly idle links
                continue
            assert captured.get(link, 0) == pytest.approx(counted, rel=0.02), intf
            checked += 1
    assert checked > 0
