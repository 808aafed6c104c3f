"""The study's metrics on scapy-crafted runs whose answers follow from the timing model
of tests.support.pcap_synth: a packet sent at t is captured on hop i at t + (i+1)·H, the
server's handshake reply leaves RTT/2 after the client's packet, with RTT = 2·6·H + 2·H
on the 6-hop paths between pods."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pathdiv.analysis.metrics.columns import METRIC_COLUMNS
from pathdiv.analysis.metrics.table import (
    RunLayoutError,
    compute_metrics,
    compute_run_metrics,
    compute_transfer_metrics,
)
from pathdiv.analysis.metrics.transfer import balance_utilization
from pathdiv.topologies.fattree import FatTree
from tests.support.pcap_synth import (
    ETH_IP_TCP,
    CaptureBuilder,
    add_transfer,
    spec_between,
    write_run,
)

H = 50e-6  # CaptureBuilder's hop delay
RTT = 14 * H
GAP = 1e-3  # TransferSpec.gap_s
MSS = 1000
REQ = 100


def run(tmp_path: Path, specs: list, transport: str = "tcp", pattern: str = "silent",
        name: str = "r1", status: str = "complete") -> Path:
    topo = FatTree(4, aliases_per_host=3 if transport == "mptcp" else 0)
    b = CaptureBuilder(topo, hop_delay_s=H)
    rows = [add_transfer(b, s) for s in specs]
    return write_run(tmp_path / "runs" / name, topo, b, rows, transport=transport,
                     subflows=4 if transport == "mptcp" else 1, pattern=pattern,
                     factors={"switching": f"ecmp-{transport}", "host": "vanilla"},
                     run_id=name, status=status)


def one(tmp_path: Path, spec, transport: str = "tcp") -> pd.Series:
    return compute_transfer_metrics(run(tmp_path, [spec], transport)).iloc[0]


def tcp_spec(**kw):
    return spec_between(FatTree(4), 1, "h1", "h16", t0=1000.0, mss=MSS, gap_s=GAP,
                        request_bytes=REQ, **kw)


def test_tcp_transfer_known_fct_and_bytes(tmp_path: Path) -> None:
    m = one(tmp_path, tcp_spec(size_bytes=5000))
    # Client SYN seen on its access link at t0 + H. Request at t0 + RTT + H, data from
    # RTT/2 later, 5 segments GAP apart, server FIN 5·GAP after the first, seen 6·H later.
    fct = (RTT + H + RTT / 2 + 5 * GAP + 6 * H) - H
    assert m["fct_s"] == pytest.approx(fct, abs=2e-6)
    # Frames: SYN, SYN-ACK, ACK, request, 5 data + 5 ACKs, FIN, FIN, ACK.
    wire = 11 * ETH_IP_TCP + (ETH_IP_TCP + REQ) + 5 * (ETH_IP_TCP + MSS)
    assert m["wire_bytes"] == wire
    assert m["throughput_mbps"] == pytest.approx(wire * 8 / fct / 1e6, rel=1e-3)
    assert m["goodput_mbps"] == pytest.approx(5000 * 8 / fct / 1e6, rel=1e-3)
    assert m["excess_pct"] == pytest.approx(100 * (wire - 5000) / 5000)
    assert (m["retrans_pct"], m["reorder_pct"]) == (0, 0)
    assert (m["subflows"], m["subflows_opened"], m["paths"], m["paths_used"]) == (1, 1, 4, 1)
    assert m["utilization"] == 0.25


def test_a_client_that_closed_first_ends_the_transfer_at_its_first_fin(tmp_path: Path
                                                                       ) -> None:
    closed = one(tmp_path / "c", tcp_spec(size_bytes=5000, client_closes=True))
    normal = one(tmp_path / "n", tcp_spec(size_bytes=5000))
    # sent at the same instant, the server's FIN crosses the client's access link after
    # its six hops, the client's after its first: 5 H sooner
    assert closed["fct_s"] == pytest.approx(normal["fct_s"] - 5 * H, abs=2e-6)


def test_retransmissions_counted_from_the_repeated_sequence_range(tmp_path: Path) -> None:
    # Segment 2 is dropped after 3 of its 6 hops and sent again after segment 4.
    m = one(tmp_path, tcp_spec(size_bytes=5000, lost={2: 3}))
    assert m["retrans_bytes"] == MSS
    assert m["data_bytes_sent"] == 6 * MSS
    assert m["retrans_pct"] == pytest.approx(100 / 6)
    assert m["reorder_pct"] == 0  # the late retransmission is not reordering
    # The lost copy crossed half of the path: it counts for half a frame.
    # 4 segments through, 1 lost half way, 1 retransmission through.
    wire = 11 * ETH_IP_TCP + (ETH_IP_TCP + REQ) + 5.5 * (ETH_IP_TCP + MSS)
    assert m["wire_bytes"] == wire
    assert m["fct_s"] == pytest.approx(RTT + RTT / 2 + 6 * GAP + 6 * H, abs=2e-6)


def test_reordering_counted_exactly(tmp_path: Path) -> None:
    # Segment 2 arrives 3.5 gaps late: after segments 3, 4 and 5 -> one late packet.
    # Segment 6 arrives 1.5 gaps late: after segment 7 -> a second one.
    # Segment 8 is lost and retransmitted at the end: not reordering.
    spec = tcp_spec(size_bytes=10 * MSS, delayed={2: 3.5 * GAP, 6: 1.5 * GAP}, lost={8: 1})
    m = one(tmp_path, spec)
    assert m["reordered_pkts"] == 2
    assert m["data_pkts_received"] == 10
    assert m["reorder_pct"] == pytest.approx(20.0)
    assert m["retrans_bytes"] == MSS


def mptcp_spec(paths, **kw):
    return spec_between(FatTree(4, aliases_per_host=3), 1, "h1", "h16", paths=paths,
                        mptcp=True, t0=1000.0, mss=MSS, gap_s=GAP, request_bytes=REQ, **kw)


def test_mptcp_on_four_paths_has_utilization_one(tmp_path: Path) -> None:
    m = one(tmp_path, mptcp_spec((0, 1, 2, 3), size_bytes=8 * MSS), "mptcp")
    # Each path carries 2 data segments; handshakes differ by the 4 bytes an MP_JOIN
    # SYN-ACK option has over MP_CAPABLE's, so the balance is 1.0 to within 1e-5.
    assert m["utilization"] == pytest.approx(1.0, abs=1e-5)
    assert (m["subflows"], m["subflows_opened"], m["paths_used"]) == (4, 4, 4)
    # Per path (server -> client): SYN-ACK, 2 data segments, FIN, last ACK. The 4 paths
    # use 2 access links, 2 edge-aggregation links per pod and 4 aggregation-core links
    # per pod: 14 links.
    assert m["path_pkts"] == "5;5;5;5" and m["links_used"] == 14
    synack = [ETH_IP_TCP + 12, ETH_IP_TCP + 16, ETH_IP_TCP + 16, ETH_IP_TCP + 16]
    assert m["path_bytes"] == ";".join(
        str(s + 2 * (ETH_IP_TCP + MSS) + 2 * ETH_IP_TCP) for s in synack
    )
    # FCT spans all subflows: 4 handshakes of RTT + H, request, 8 segments, and the
    # last subflow's FIN 3·H after the first's.
    fct = 4 * (RTT + H) + RTT / 2 + 8 * GAP + 3 * H + 6 * H - H
    assert m["fct_s"] == pytest.approx(fct, abs=2e-6)
    assert m["goodput_mbps"] * 1e6 * m["fct_s"] / 8 == pytest.approx(8 * MSS)


def test_mptcp_on_a_single_path_has_utilization_a_quarter(tmp_path: Path) -> None:
    m = one(tmp_path, mptcp_spec((2, 2, 2, 2), size_bytes=8 * MSS), "mptcp")
    assert m["utilization"] == 0.25
    assert (m["subflows"], m["paths_used"]) == (4, 1)


def test_two_of_four_paths_balanced_is_a_half() -> None:
    assert balance_utilization([5, 5, 0, 0]) == 0.5
    assert balance_utilization([1, 1, 1, 1]) == 1.0
    assert 0.25 < balance_utilization([10, 1, 0, 0]) < 0.5
    assert balance_utilization([0, 0]) != balance_utilization([0, 0])  # NaN: nothing sent


def test_partition_aggregate_group_takes_the_longest_transfer(tmp_path: Path) -> None:
    topo = FatTree(4)
    servers = [h for h in topo.hosts if h not in ("h1",)][:7]
    specs = [
        spec_between(topo, i + 1, "h1", s, size_bytes=(i + 1) * MSS, t0=1000.0, group_id=9,
                     flow_type="query", mss=MSS, gap_s=GAP, client_port=40000 + i)
        for i, s in enumerate(servers)
    ]
    rdir = run(tmp_path, specs, pattern="noisy")
    per_transfer = compute_transfer_metrics(rdir)
    rows = compute_run_metrics(rdir)
    assert len(rows) == 1
    g = rows.iloc[0]
    assert g["transfers"] == 7 and g["ok"]
    assert g["fct_s"] == per_transfer["fct_s"].max()
    assert g["goodput_mbps"] == pytest.approx(28 * MSS * 8 / g["fct_s"] / 1e6)
    assert g["throughput_mbps"] > g["goodput_mbps"]
    assert (g["condition"], g["flow_type"], g["switching"], g["host"]) == (
        "noisy", "query", "ecmp-tcp", "vanilla"
    )


def test_metrics_csv_covers_complete_runs_only(tmp_path: Path) -> None:
    run(tmp_path, [tcp_spec(size_bytes=3000)], name="r1")
    run(tmp_path, [tcp_spec(size_bytes=4000)], name="r2")
    run(tmp_path, [tcp_spec(size_bytes=5000)], name="r3", status="failed")
    out = compute_metrics(tmp_path)
    assert out == tmp_path / "metrics.csv"
    df = pd.read_csv(out)
    assert sorted(df["run_id"]) == ["r1", "r2"]
    assert sorted(df["payload_bytes"]) == [3000, 4000]
    for col in ["switching", "host", "run_id", "repetition", "condition", "flow_type",
                *METRIC_COLUMNS]:
        assert col in df.columns
    assert df[METRIC_COLUMNS].notna().all().all()
    assert not list(tmp_path.glob(".metrics.csv.*"))  # no temp file left behind
    assert len(pd.read_csv(tmp_path / "transfer_metrics.csv")) == 2


def test_no_complete_run_is_an_error_naming_the_folder(tmp_path: Path) -> None:
    run(tmp_path, [tcp_spec(size_bytes=3000)], status="partial")
    with pytest.raises(RunLayoutError, match=r"no complete runs under .*runs \(1 manifests"):
        compute_metrics(tmp_path)


def test_failed_transfer_gives_a_row_marked_not_ok(tmp_path: Path) -> None:
    rdir = run(tmp_path, [tcp_spec(size_bytes=3000)])
    csv = rdir / "transfers.csv"
    df = pd.read_csv(csv, dtype={"error": str})
    df.loc[0, "ok"], df.loc[0, "error"] = False, "timeout"
    df.to_csv(csv, index=False)
    row = compute_run_metrics(rdir).iloc[0]
    assert not row["ok"] and row["error"] == "timeout"


def test_missing_manifest_names_the_expected_layout(tmp_path: Path) -> None:
    with pytest.raises(RunLayoutError, match=r"manifest.json missing; expected a run folder"):
        compute_run_metrics(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"config": {}}))
    with pytest.raises(RunLayoutError, match=r"transfers.csv missing"):
        compute_run_metrics(tmp_path)


def test_transfer_without_a_connection_is_not_measured(tmp_path: Path) -> None:
    rdir = run(tmp_path, [tcp_spec(size_bytes=3000)])
    csv = rdir / "transfers.csv"
    df = pd.read_csv(csv, dtype={"error": str})
    extra = df.iloc[0].copy()
    extra["transfer_id"], extra["group_id"], extra["client_port"] = 2, 2, None
    extra["ok"], extra["error"] = False, "connect: no route"
    pd.concat([df, extra.to_frame().T]).to_csv(csv, index=False)
    rows = compute_run_metrics(rdir).set_index("group_id")
    assert rows.loc[1, "ok"] and rows.loc[1, "fct_s"] > 0
    assert not rows.loc[2, "ok"] and rows.loc[2, "error"] == "connect: no route"
    assert rows.loc[2, METRIC_COLUMNS[:-1]].isna().all()


def test_subflows_from_addresses_the_config_does_not_list_stay_the_clients(
    tmp_path: Path,
) -> None:
    # The captures use alias addresses, but the manifest says 1 subflow (no aliases).
    rdir = run(tmp_path, [mptcp_spec((0, 1, 2, 3), size_bytes=8 * MSS)], "mptcp")
    manifest = json.loads((rdir / "manifest.json").read_text())
    manifest["config"]["hosts"]["subflows"] = 1
    (rdir / "manifest.json").write_text(json.dumps(manifest))
    m = compute_transfer_metrics(rdir).iloc[0]
    assert m["utilization"] == pytest.approx(1.0, abs=1e-5)
    assert m["data_bytes_sent"] == 8 * MSS and m["subflows"] == 4


def test_bursts_are_runs_of_back_to_back_packets_at_the_links_rate() -> None:
    from pathdiv.analysis.metrics.transfer import burst_sizes, burstiness

    # 20 Mbit/s: a 1514-byte frame takes 605.6 µs; three back to back, a pause, five
    tx = 1514 * 8 / 20e6
    ts = [0, tx, 2 * tx, 0.010, 0.010 + tx, 0.010 + 2 * tx, 0.010 + 3 * tx, 0.010 + 4 * tx]
    sizes = burst_sizes(ts, [1514] * len(ts), 20.0)
    assert list(sizes) == [3, 5]
    # the burst a packet leaves in, on average: (3·3 + 5·5) / 8; the largest: 5
    assert burstiness(sizes) == (pytest.approx(34 / 8), 5.0)
    # a gap under 1.5 transmission times (an ACK-clocked packet right behind) continues
    assert list(burst_sizes([0, 1.4 * tx], [1514, 1514], 20.0)) == [2]
    assert list(burst_sizes([0, 1.6 * tx], [1514, 1514], 20.0)) == [1, 1]
    assert burstiness(burst_sizes([], [], 20.0))[0] != burstiness(burst_sizes([], [], 20.0))[0]


def test_frames_the_shaper_released_together_leave_a_transmission_time_apart() -> None:
    from pathdiv.analysis.metrics.transfer import serialised

    # six frames captured at one instant (one GSO skb through the emulated link's
    # shaper), then one after the link went idle: a 20 Mbit/s link sends a 1514-byte
    # frame in 605.6 µs
    tx = 1514 * 8 / 20e6
    done = serialised(np.array([0.0] * 6 + [0.1]), np.full(7, 1514), 20.0)
    assert done[:6] == pytest.approx(tx * np.arange(1, 7))
    assert done[6] == pytest.approx(0.1 + tx)
    # a frame that arrives while the link still sends waits for it
    assert serialised(np.array([0.0, tx / 2]), np.full(2, 1514), 20.0)[1] == pytest.approx(
        2 * tx)
    assert len(serialised(np.array([]), np.array([]), 20.0)) == 0


@pytest.mark.parametrize(("rate_mbps", "bursts"), [(20.0, [9]), (200.0, [3, 3, 3])])
def test_chunks_released_at_once_are_one_burst_only_at_the_rate_that_keeps_them_back_to_back(
        rate_mbps: float, bursts: list[int]) -> None:
    from pathdiv.analysis.metrics.transfer import burst_sizes, burstiness

    # a shaper lets out 3-frame chunks at once, one chunk's time at 20 Mbit/s apart: a
    # 20 Mbit/s link sends them back to back (one burst of 9), a 200 Mbit/s link sends
    # each chunk in a tenth of that and idles between them (three bursts of 3)
    chunk_s = 3 * 1514 * 8 / 20e6
    ts = np.repeat(np.arange(3) * chunk_s, 3)
    sizes = burst_sizes(ts, np.full(9, 1514), rate_mbps)
    assert list(sizes) == bursts
    assert burstiness(sizes)[0] == pytest.approx(max(bursts))


def test_one_packet_is_a_burst_of_one_and_no_packet_has_no_burstiness() -> None:
    from pathdiv.analysis.metrics.transfer import burst_sizes, burstiness

    assert burstiness(burst_sizes(np.array([5.0]), np.array([1514]), 20.0)) == (1.0, 1.0)
    assert all(math.isnan(v) for v in burstiness(burst_sizes(np.array([]), np.array([]), 20.0)))


@pytest.mark.parametrize(("host_mbps", "segments", "expected"),
                         [(8.0, 5, 5.0), (80.0, 5, 1.0), (8.0, 1, 1.0)])
def test_burstiness_is_a_registered_column_of_the_servers_data(
        tmp_path: Path, host_mbps: float, segments: int, expected: float) -> None:
    from pathdiv.analysis.metrics.columns import dependent_variables

    # 5 data segments of 1054 frame bytes, GAP (1 ms) apart: at 8 Mbit/s a frame takes
    # 1.05 ms (back to back: one burst of 5); at 80 Mbit/s 0.1 ms (five bursts of 1);
    # a transfer of one segment is one burst of 1
    run_dir = run(tmp_path, [tcp_spec(size_bytes=segments * MSS)])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["config"]["topology"]["links"] = {"host": {"bw_mbps": host_mbps}}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    m = compute_transfer_metrics(run_dir).iloc[0]
    assert m["burst_pkts"] == expected and m["burst_pkts_max"] == expected
    assert m["burstiness"] == expected  # through the metric registry
    assert "burstiness" in dependent_variables()
    row = compute_run_metrics(run_dir).iloc[0]
    assert row["burstiness"] == expected
