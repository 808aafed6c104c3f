"""Link sharing between subflows, CPU per MB, the path-manager messages, CPU logs."""

from __future__ import annotations

import math
import os
import socket
import struct
from pathlib import Path

import numpy as np
import pytest

from pathdiv.analysis.metrics.sharing import cpu_ms_per_mb, link_sharing, subflow_link_sets
from pathdiv.experiments.traffic import mptcp_pm
from pathdiv.experiments.traffic.rounds import TransferRow, merge_server_cpu


def test_link_sets_keep_data_packets_on_fabric_links_only() -> None:
    subflow = np.array([0, 0, 0, 1, 1, 2])
    link = np.array([0, 5, 6, 0, 7, 5])
    carries = np.array([True, True, True, True, True, False])
    fabric = np.zeros(8, dtype=bool)
    fabric[[5, 6, 7]] = True
    assert subflow_link_sets(subflow, link, carries, fabric) == {0: {5, 6}, 1: {7}}


def test_link_sharing_counts_subflows_and_distinct_paths() -> None:
    a, b, c = frozenset({1, 2}), frozenset({2, 3}), frozenset({4, 5})
    assert link_sharing({0: a, 1: b, 2: c}) == (2, 3)
    assert link_sharing({0: a, 1: a, 2: c, 3: c}) == (4, 2)
    assert link_sharing({0: a, 1: c}) == (0, 2)
    assert link_sharing({}) == (0, 0)


def test_cpu_per_mb_is_not_applicable_in_virtual_time() -> None:
    assert cpu_ms_per_mb(30.0, 10.0, 2_000_000) == 20.0
    assert math.isnan(cpu_ms_per_mb(30.0, 10.0, 2_000_000, clock="virtual"))
    assert math.isnan(cpu_ms_per_mb(float("nan"), 10.0, 2_000_000))


def test_subflow_create_message_layout() -> None:
    msg = mptcp_pm.subflow_message(0x1F, mptcp_pm.CMD_SUBFLOW_CREATE, 0xD493BC4B,
                                   ("10.0.0.34", 24567), 1, ("10.0.0.3", 8080), seq=9)
    length, family, flags, seq, _ = struct.unpack_from("=IHHII", msg)
    assert (length, family, seq) == (len(msg), 0x1F, 9)
    assert flags == mptcp_pm.NLM_F_REQUEST | mptcp_pm.NLM_F_ACK
    assert msg[16:18] == bytes([mptcp_pm.CMD_SUBFLOW_CREATE, 1])
    attrs = mptcp_pm.parse_attrs(msg[20:])
    assert struct.unpack("=I", attrs[mptcp_pm.ATTR_TOKEN])[0] == 0xD493BC4B
    local = mptcp_pm.parse_attrs(attrs[mptcp_pm.ATTR_ADDR])
    assert struct.unpack("=H", local[mptcp_pm.ADDR_ATTR_FAMILY])[0] == socket.AF_INET
    assert local[mptcp_pm.ADDR_ATTR_ADDR4] == socket.inet_aton("10.0.0.34")
    assert struct.unpack("=H", local[mptcp_pm.ADDR_ATTR_PORT])[0] == 24567  # host order
    assert local[mptcp_pm.ADDR_ATTR_ID] == b"\x01"
    remote = mptcp_pm.parse_attrs(attrs[mptcp_pm.ATTR_ADDR_REMOTE])
    assert mptcp_pm.ADDR_ATTR_ID not in remote
    assert struct.unpack("=H", remote[mptcp_pm.ADDR_ATTR_PORT])[0] == 8080
    # nested attributes carry NLA_F_NESTED (strict parsing in the kernel needs it)
    assert struct.unpack_from("=HH", msg, 20 + 8)[1] & mptcp_pm.NLA_F_NESTED


def test_ack_error_reads_the_errno() -> None:
    err = struct.pack("=IHHII", 36, mptcp_pm.NLMSG_ERROR, 0, 1, 0) + struct.pack("=i", -98)
    assert mptcp_pm.ack_error(err + bytes(16)) == 98


def test_server_cpu_goes_to_the_row_of_the_same_client_port() -> None:
    rows = [TransferRow(i, 0, "q", "mptcp", "h1", "h16", "10.0.0.2", "10.3.1.3", 8080,
                        client_port=port) for i, port in enumerate((4000, 4001, 4000))]
    logs = {"h16": [{"client_addr": "10.0.0.2", "client_port": 4001, "cpu_ms": 2.0},
                    {"client_addr": "10.0.0.2", "client_port": 4000, "cpu_ms": 1.0},
                    {"client_addr": "10.0.0.2", "client_port": 4000, "cpu_ms": 3.0}]}
    merge_server_cpu(rows, logs)
    assert [r.server_cpu_ms for r in rows] == [1.0, 2.0, 3.0]


def test_energy_is_the_power_model_over_cpu_time_and_nan_in_virtual_time() -> None:
    from pathdiv.analysis.metrics.sharing import energy_j

    # 40 ms of CPU at 15 W per busy core: 0.6 J; plus 2 hosts idling at 5 W for 2 s: 20 J
    assert energy_j(40.0, 2.0, 2, 15.0, 0.0) == pytest.approx(0.6)
    assert energy_j(40.0, 2.0, 2, 15.0, 5.0) == pytest.approx(20.6)
    cpu_virtual = cpu_ms_per_mb(30.0, 10.0, 2_000_000, clock="virtual") * 2
    assert math.isnan(energy_j(cpu_virtual, 2.0, 2, 15.0, 5.0))


def test_group_energy_follows_the_configs_power_model() -> None:
    import pandas as pd

    from pathdiv.analysis.metrics.table import group_metrics

    rows = pd.DataFrame({
        "group_id": [0, 0], "flow_type": ["short", "short"], "ok": [True, True],
        "measured": [True, True], "payload_bytes": [1_000_000, 1_000_000],
        "client": ["h1", "h1"], "server": ["h2", "h3"],
        "cpu_ms_per_mb": [10.0, 30.0], "fct_s": [1.0, 2.0], "error": ["", ""],
    })
    for col in ("wire_bytes", "data_bytes_sent", "retrans_bytes", "data_pkts_received",
                "reordered_pkts", "ect_pkts_received", "ce_pkts", "utilization", "subflows",
                "shared_subflows", "distinct_paths", "subflows_opened", "paths",
                "paths_used"):
        rows[col] = 1.0
    config = {"energy": {"busy_watts_per_core": 10.0, "idle_watts": 1.0}}
    (energy,) = group_metrics(rows, {"config": config})["energy_j"]
    # 40 ms of CPU at 10 W, plus 3 hosts (h1, h2, h3) for the group's FCT of 2 s at 1 W
    assert energy == pytest.approx(0.4 + 6.0)


def test_the_runs_host_cpu_gives_its_energy_on_every_row_and_nan_in_virtual_time() -> None:
    import pandas as pd

    from pathdiv.analysis.metrics.table import group_metrics
    from pathdiv.experiments.fidelity.verdict import CoreShare, Samples, Thresholds, judge

    # two cores, busy 50 % and 30 % (10 % of it softirq each) over 4 s of traffic, of
    # which the four hosts' processes used 1.2 s
    figures = judge(Samples(4.0, [CoreShare("cpu0", 0.5, 0.1, 0.0),
                                  CoreShare("cpu1", 0.3, 0.1, 0.0)],
                            host_cpu_s={"h1": 0.5, "h2": 0.4, "h3": 0.2, "h4": 0.1}),
                    Thresholds()).figures
    assert figures["cpu_busy_core_s"] == pytest.approx(3.2)
    assert figures["cpu_softirq_core_s"] == pytest.approx(0.8)
    assert figures["hosts_cpu_s"] == pytest.approx(1.2)
    rows = pd.DataFrame({
        "group_id": [0, 1], "flow_type": ["long", "long"], "ok": [True, True],
        "measured": [True, True], "payload_bytes": [1_000_000, 1_000_000],
        "client": ["h1", "h3"], "server": ["h2", "h4"],
        "cpu_ms_per_mb": [10.0, 30.0], "fct_s": [1.0, 2.0], "error": ["", ""],
    })
    for col in ("wire_bytes", "data_bytes_sent", "retrans_bytes", "data_pkts_received",
                "reordered_pkts", "ect_pkts_received", "ce_pkts", "utilization", "subflows",
                "shared_subflows", "distinct_paths", "subflows_opened", "paths",
                "paths_used"):
        rows[col] = 1.0
    config = {"energy": {"busy_watts_per_core": 10.0, "idle_watts": 1.0}}
    real = group_metrics(rows, {"config": config, "clock": "real",
                                "fidelity": {"figures": figures}})
    # the hosts' 1.2 CPU seconds at 10 W, plus the run's 4 hosts idling at 1 W for its 4 s
    assert list(real["run_energy_j"]) == pytest.approx([12.0 + 16.0] * 2)
    assert list(real["run_hosts_cpu_s"]) == pytest.approx([1.2, 1.2])
    assert list(real["run_cpu_s"]) == pytest.approx([3.2, 3.2])  # the whole machine
    virtual = group_metrics(rows, {"config": config, "clock": "virtual",
                                   "fidelity": {"figures": figures}})
    assert virtual["run_energy_j"].isna().all() and virtual["run_cpu_s"].isna().all()
    unmonitored = group_metrics(rows, {"config": config, "clock": "real"})
    assert unmonitored["run_energy_j"].isna().all()
    # no mptcp-d counter in this kernel: the closures are unknown, not 0
    assert virtual["run_windows_closed"].isna().all()


def test_windows_mptcp_d_closed_are_counted_per_run_on_either_clock() -> None:
    from pathdiv.analysis.metrics.sharing import run_energy
    from pathdiv.experiments.fidelity.verdict import Samples, Thresholds, judge
    from pathdiv.experiments.manifest import parse_netstat

    netstat = ("TcpExt: TCPTimeouts\nTcpExt: 3\n"
               "MPTcpExt: MPCapableSYNRX SubflowRecover MptcpDClosed MptcpDReinject\n"
               "MPTcpExt: 9 0 2 2\n")
    assert parse_netstat(netstat, "MPTcpExt")["MptcpDClosed"] == 2
    assert parse_netstat(netstat)["TCPTimeouts"] == 3
    counted = judge(Samples(2.0, windows_closed={"h1": 2, "h5": 1}), Thresholds(), "virtual")
    assert counted.figures["windows_closed"] == 3
    assert judge(Samples(2.0), Thresholds()).figures["windows_closed"] is None
    run = run_energy(counted.figures, "virtual", 16, 15.0, 0.0)
    assert run["run_windows_closed"] == 3 and math.isnan(run["run_energy_j"])


def test_host_cgroups_count_each_hosts_cpu_in_either_cgroup_version(tmp_path) -> None:
    from pathdiv.experiments.fabric.cpuacct import HostCgroups, cpu_seconds, parse_usage_ns

    assert parse_usage_ns("cpuacct.usage", "1500000000\n") == 1_500_000_000
    assert parse_usage_ns("cpu.stat", "usage_usec 2500\nuser_usec 2000\n") == 2_500_000
    with pytest.raises(ValueError):
        parse_usage_ns("cpu.stat", "user_usec 1\n")
    # a cgroup v1 cpuacct hierarchy, as a folder: the kernel would make the files
    root = tmp_path / "cpuacct"
    root.mkdir()
    (root / "cpuacct.usage").write_text("0\n")
    (root / "cgroup.procs").write_text("")
    groups = HostCgroups(["h1", "h2"], root=root, owner=7)
    for host in ("h1", "h2"):
        (root / "pathdiv-7" / host).mkdir(parents=True)
        (root / "pathdiv-7" / host / "cpuacct.usage").write_text("1000000000\n")
    assert groups.create()
    groups.attach("h1", 4242)
    assert (root / "pathdiv-7" / "h1" / "cgroup.procs").read_text() == "4242\n"
    before = groups.usage_ns()
    (root / "pathdiv-7" / "h2" / "cpuacct.usage").write_text("3500000000\n")
    assert cpu_seconds(before, groups.usage_ns()) == {"h1": 0.0, "h2": 2.5}
    assert cpu_seconds(None, groups.usage_ns()) is None
    # no hierarchy at all: unknown, not zero
    missing = HostCgroups(["h1"], root=tmp_path / "nowhere" / "cpuacct", owner=7)
    missing.usage_file = "cpuacct.usage"
    (tmp_path / "nowhere").mkdir()
    (tmp_path / "nowhere" / "cpuacct").write_text("")  # not a folder: mkdir fails
    assert not missing.create() and missing.usage_ns() is None
    missing.attach("h1", 1)  # nothing to do, no error


def test_clean_removes_the_cgroups_of_runs_that_are_gone(tmp_path) -> None:
    from pathdiv.experiments.fabric.cpuacct import remove_orphans

    gone, alive = tmp_path / "pathdiv-999999999", tmp_path / f"pathdiv-{os.getpid()}"
    for base in (gone, alive):
        (base / "h1").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    assert remove_orphans(tmp_path) == [str(gone)]
    assert not gone.exists() and alive.exists() and (tmp_path / "other").exists()


def test_the_reordering_tcp_saw_is_counted_per_run_and_unknown_where_not_counted(
        monkeypatch) -> None:
    from pathdiv.experiments.fidelity import monitor as mon
    from pathdiv.experiments.fidelity.verdict import Samples, Thresholds, judge

    assert Samples(2.0).reordering == {}
    # two hosts' TcpExt at the start and the end of the traffic (lab kernel: Juggler's too)
    texts = {
        ("11", 0): "TcpExt: TCPOFOQueue TCPSACKReorder JugglerLate JugglerEvicted\n"
                   "TcpExt: 10 1 0 4\n",
        ("12", 0): "TcpExt: TCPOFOQueue TCPSACKReorder JugglerLate JugglerEvicted\n"
                   "TcpExt: 0 0 0 0\n",
        ("11", 1): "TcpExt: TCPOFOQueue TCPSACKReorder JugglerLate JugglerEvicted\n"
                   "TcpExt: 25 1 2 4\n",
        ("12", 1): "TcpExt: TCPOFOQueue TCPSACKReorder JugglerLate JugglerEvicted\n"
                   "TcpExt: 3 0 0 0\n",
    }
    phase = [0]
    monkeypatch.setattr(mon, "read_proc",
                        lambda path: texts[(path.split("/")[2], phase[0])])
    m = mon.Monitor({"h1": 11, "h2": 12}, {}, ["h1", "h2"], 1.0)
    m._reorder0 = m._reordering()
    phase[0] = 1
    m._reorder1 = m._reordering()
    samples = m.result()
    # what moved, per host
    assert samples.reordering == {"h1": {"ofo_queued": 15, "juggler_late": 2},
                                  "h2": {"ofo_queued": 3}}
    figures = judge(samples, Thresholds(), "virtual").figures
    assert figures["ofo_queued"] == 18 and figures["juggler_late"] == 2
    assert figures["sack_reorder"] == 0 and figures["juggler_evicted"] == 0
    assert figures["dsack_recv"] is None  # not among the counters read: unknown, not 0
    assert judge(Samples(2.0), Thresholds()).figures["juggler_released"] is None


def _row_from(port: int) -> TransferRow:
    row = TransferRow(0, 0, "long", "tcp", "h1", "h6", "10.0.0.2", "10.1.0.2", 8080,
                      client_port=port)
    row.ok = True
    return row


def test_a_server_that_logs_after_its_client_has_read_is_waited_for(tmp_path) -> None:
    import threading

    from pathdiv.experiments.traffic.rounds import collect_server_cpu

    row = _row_from(4000)
    log = tmp_path / "server-h6.cpu.jsonl"
    log.write_text('{"client_addr": "10.0.0.2", "client_p')  # a line still being written

    def late() -> None:  # the handler returns after the client read the last byte
        log.write_text('{"client_addr": "10.0.0.2", "client_port": 4000, "cpu_ms": 7.5}\n')

    timer = threading.Timer(0.2, late)
    timer.start()
    try:
        collect_server_cpu([row], tmp_path, ["h6"], wait_s=30.0)
    finally:
        timer.cancel()
    assert row.server_cpu_ms == 7.5


def test_a_record_that_never_comes_is_waited_for_only_the_bound(tmp_path) -> None:
    import time

    from pathdiv.experiments.traffic.rounds import collect_server_cpu

    row = _row_from(4000)
    t0 = time.monotonic()
    collect_server_cpu([row], tmp_path, ["h6"], wait_s=0.3)
    assert row.server_cpu_ms != row.server_cpu_ms  # NaN: no server record
    assert time.monotonic() - t0 < 20.0  # returned at its bound, not waiting on


def test_only_the_logs_of_servers_whose_records_are_missing_are_read_again(
        tmp_path, monkeypatch) -> None:
    """h6 logged its request before the client read the last byte, h7 logs late: h6's
    log is read once, h7's until its record is there (at k=16 every read of every log
    was 1,024 files each 20 ms)."""
    import threading

    import pathdiv.analysis.safefiles as safefiles
    from pathdiv.experiments.traffic.rounds import collect_server_cpu, cpu_log_name

    early, late_row = _row_from(4000), _row_from(4001)
    late_row.server = "h7"
    (tmp_path / cpu_log_name("h6")).write_text(
        '{"client_addr": "10.0.0.2", "client_port": 4000, "cpu_ms": 1.5}\n')
    (tmp_path / cpu_log_name("h7")).write_text("")
    reads: list[str] = []
    real = safefiles.read_beneath

    def counted(dirfd, rel, limit):
        reads.append(str(rel))
        return real(dirfd, rel, limit)

    monkeypatch.setattr(safefiles, "read_beneath", counted)

    def late() -> None:
        (tmp_path / cpu_log_name("h7")).write_text(
            '{"client_addr": "10.0.0.2", "client_port": 4001, "cpu_ms": 2.5}\n')

    timer = threading.Timer(0.2, late)
    timer.start()
    try:
        collect_server_cpu([early, late_row], tmp_path, ["h6", "h7", "h8"], wait_s=30.0)
    finally:
        timer.cancel()
    assert (early.server_cpu_ms, late_row.server_cpu_ms) == (1.5, 2.5)
    assert reads.count(cpu_log_name("h6")) == 1
    assert reads.count(cpu_log_name("h7")) >= 2
    assert cpu_log_name("h8") not in reads  # serves no row: never read


def test_a_server_log_too_large_or_a_link_is_not_read_nor_waited_for(
        tmp_path, monkeypatch) -> None:
    """The logs are written by guest or namespace processes: read bounded, through no
    link; a refused log leaves its rows without a server CPU, at once."""
    import time

    import pathdiv.experiments.traffic.rounds as rounds
    from pathdiv.experiments.traffic.rounds import collect_server_cpu, cpu_log_name

    monkeypatch.setattr(rounds, "CPU_LOG_BYTES", 100)
    big, linked = _row_from(4000), _row_from(4001)
    linked.server = "h7"
    record = '{"client_addr": "10.0.0.2", "client_port": 4000, "cpu_ms": 1.5}\n'
    (tmp_path / cpu_log_name("h6")).write_text(record * 3)  # > 100 bytes
    (tmp_path / "elsewhere").write_text(record.replace("4000", "4001"))
    (tmp_path / cpu_log_name("h7")).symlink_to(tmp_path / "elsewhere")
    t0 = time.monotonic()
    collect_server_cpu([big, linked], tmp_path, ["h6", "h7"], wait_s=30.0)
    assert time.monotonic() - t0 < 10.0  # not waited for until the bound
    assert math.isnan(big.server_cpu_ms) and math.isnan(linked.server_cpu_ms)


def test_the_logs_a_labelled_server_writes_are_the_ones_read_under_that_label(
        tmp_path, monkeypatch) -> None:
    """start_servers names each server's CPU log and read_cpu_logs finds it, through one
    name: with a label other than the default too (the background load's servers)."""
    from types import SimpleNamespace

    import pathdiv.experiments.traffic.rounds as rounds

    started: dict[str, list[str]] = {}

    def transfer(host, argv, stderr=None):
        started[host] = argv
        return SimpleNamespace(stdout=None)

    net = SimpleNamespace(topo=SimpleNamespace(hosts=["h1", "h2"]), transfer=transfer)
    monkeypatch.setattr(rounds, "virtual_clock", lambda: False)
    monkeypatch.setattr(rounds, "wait_for_line", lambda *a, **k: "ready")
    traffic = rounds.Traffic("background", 0, "tcp", 9000, 5.0)
    rounds.start_servers(net, traffic, tmp_path, "background-server")
    for host, argv in started.items():
        path = Path(argv[argv.index("--cpu-log") + 1])
        path.write_text(f'{{"client_addr": "10.0.0.9", "client_port": 5, "cpu_ms": 3.0, '
                        f'"host": "{host}"}}\n')
    logs = rounds.read_cpu_logs(tmp_path, ["h1", "h2"], "background-server")
    assert {h: [r["host"] for r in recs] for h, recs in logs.items()} == {
        "h1": ["h1"], "h2": ["h2"]}
    assert rounds.read_cpu_logs(tmp_path, ["h1", "h2"]) == {}  # the transfer servers' own
