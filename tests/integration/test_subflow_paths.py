"""Subflows that know their paths, on a running k=4 fat tree (nftables plane, ECMP).

- the hash model names the core every chosen 5-tuple crosses, read from the cores'
  counters; on bmv2 where its tools exist;
- one MPTCP connection as `pathdiv probe` makes it: the link-sharing metric and the
  distinct paths measured from captures agree with the probe's per-core counters, and
  with what the model predicts from the 5-tuples seen in the captures; `eliminate`
  leaves no subflows sharing a link;
- `pathdiv run` of a silent experiment, subflow_paths hashed vs disjoint: with
  `disjoint`, 4 subflows use 4 distinct cores in >= 95% of the connections between
  pods (from captures); with `hashed` the measured share is printed, not asserted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pathdiv.analysis.capture.flows import group_connections, read_link_captures, split_subflows
from pathdiv.analysis.capture.pcap import ip_to_int
from pathdiv.analysis.metrics.sharing import link_sharing, subflow_link_sets
from pathdiv.analysis.metrics.table import compute_metrics
from pathdiv.experiments.classroom.probe import (
    PORT,
    ProbePlan,
    _settled_core_tx,
    core_ports_towards,
    per_core_delta,
    placement_of,
    probe_fetch,
)
from pathdiv.experiments.config.load import load
from pathdiv.experiments.dataplane.ecmp_model import UDP, FiveTuple, PathModel
from pathdiv.experiments.fabric.nodeprocs import wait_for_line
from pathdiv.experiments.network.network import Network
from pathdiv.experiments.traffic.placement import sharing_subflows
from pathdiv.topologies.model import Tier
from tests.conftest import REPO, dataplane_class

pytestmark = pytest.mark.root
CONNECTIONS = 3
MPTCP_BYTES = 2_000_000

SEND_UDP = """
import socket, sys
src, dst, sport, dport, n = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((src, sport))
for _ in range(n):
    s.sendto(b"pathdiv", (dst, dport))
"""


def _network(tmp: Path, plane: str, subflow_paths: str) -> Network:
    cfg = load(REPO / "configs/class-probe.yaml",
               [f"hosts.subflow_paths={subflow_paths}", f"dataplane={plane}"])
    return Network(cfg, dataplane_class(plane), tmp)


@pytest.mark.parametrize("plane", ["kernel", "bmv2"])
def test_the_model_names_the_core_of_chosen_five_tuples(root_fabric, tmp_path, plane):
    with _network(tmp_path, plane, "hashed") as net:
        model = PathModel(net.topo, net.tables, net.plane.name)
        for src_host, dst_host in (("h1", "h16"), ("h16", "h1"), ("h6", "h11")):
            ports = core_ports_towards(net.topo, dst_host)
            for i in range(8):
                src = net.topo.host_addresses(src_host)[i % 4]
                t = FiveTuple(src, net.topo.nodes[dst_host].address, UDP, 21000 + 97 * i,
                              9000 + i)
                before = _settled_core_tx(net, ports)
                net.cmd(src_host, [sys.executable, "-S", "-c", SEND_UDP, t.src, t.dst,
                                   str(t.sport), str(t.dport), "5"])
                moved = {c: n for c, n in per_core_delta(before, _settled_core_tx(net, ports))
                         .items() if n}
                assert moved == {model.core(t): 5}, (t, moved)


def _one_connection(net: Network, capdir: Path
                    ) -> tuple[dict[str, int], pd.DataFrame, int]:
    """Per-core counters (probe's view) and the captured packets of one MPTCP fetch."""
    plan = ProbePlan.for_topology(net.topo)
    ports = core_ports_towards(net.topo, plan.client)
    net.captures.start(capdir, 160, 200)
    before = _settled_core_tx(net, ports)
    res = probe_fetch(net, plan, [MPTCP_BYTES], mptcp=True)
    counters = per_core_delta(before, _settled_core_tx(net, ports))
    net.captures.stop()
    opened = len(res[0]["placed"].split(";")) if res[0]["placed"] else net.cfg.subflows
    assert res[0]["subflows"] == opened
    return counters, read_link_captures(capdir, net.topo), opened


@pytest.mark.parametrize("subflow_paths", ["hashed", "disjoint", "eliminate"])
def test_link_sharing_agrees_with_the_probes_core_counters(root_fabric, tmp_path,
                                                           subflow_paths):
    with _network(tmp_path / "lab", "kernel", subflow_paths) as net:
        topo = net.topo
        plan = ProbePlan.for_topology(topo)
        argv = ["serve", "--port", str(PORT), "--mptcp"]
        if placement_of(net) is not None:
            argv.append("--userspace-pm")
        server = net.transfer(plan.server, argv)
        wait_for_line(server, server.stdout, "ready", 15, "probe server")
        model = PathModel(topo, net.tables, net.plane.name)
        server_addr = ip_to_int(topo.nodes[plan.server].address)
        fabric = pd.Series([lk.tier is not Tier.HOST for lk in topo.links]).to_numpy()
        core_link = {i: lk.b.node for i, lk in enumerate(topo.links) if lk.tier is Tier.CORE
                     and topo.nodes[lk.a.node].pod == topo.nodes[plan.client].pod}
        pod = topo.nodes[plan.client].pod
        client_pod = [ip_to_int(a) for a, h in topo.address_owner.items()
                      if topo.nodes[h].pod == pod]
        seen = []
        for n in range(CONNECTIONS):
            counters, packets, opened = _one_connection(net, tmp_path / f"cap{n}")
            pk, table = split_subflows(packets)
            table = group_connections(table)
            data = pk["src"].to_numpy() == server_addr
            sets = subflow_link_sets(pk["subflow"].to_numpy(), pk["link"].to_numpy(), data,
                                     fabric)
            shared, distinct = link_sharing(sets)
            assert len(sets) == opened
            # the probe's view: per core, packets towards the client's pod
            towards = packets[packets["link"].isin(list(core_link))
                              & packets["dst"].isin(client_pod)]
            captured = towards.groupby(towards["link"].map(core_link)).size().to_dict()
            for core, k in counters.items():
                assert abs(captured.get(core, 0) - k) <= max(2, 0.01 * k), (counters, captured)
            sub_cores = {core_link[lk] for links in sets.values() for lk in links
                         if lk in core_link}
            assert distinct == len(sub_cores)
            # every core that carried data is a subflow's; other cores the counters saw
            # carried only a refused or idle join (the server's in-kernel PM tries its
            # own alias addresses: SYN, RST, maybe a retransmitted SYN), no payload
            assert {c for c, k in counters.items() if k > 2} >= sub_cores, counters
            other = towards[~towards["link"].map(core_link).isin(sub_cores)]
            assert int(other["payload"].sum()) == 0, (
                counters, other[["link", "src", "dst", "flags", "payload"]])
            # the model, from the 5-tuples in the captures, predicts the same sharing
            predicted = [model.path(FiveTuple(
                str(topo_addr(r.resp_addr)), str(topo_addr(r.init_addr)), 6,
                int(r.resp_port), int(r.init_port))) for r in table.itertuples()
                if int(r.resp_addr) == server_addr]
            assert sharing_subflows(topo, predicted) == shared
            assert len({topo.core_of_path(p) for p in predicted}) == distinct
            seen.append((shared, distinct))
        net.end(server)
    print(f"\n{subflow_paths}: (shared_subflows, distinct_paths) per connection: {seen}")
    if subflow_paths == "disjoint":
        assert all(d == 4 for _, d in seen)
    if subflow_paths == "eliminate":  # k=4: at most two link-disjoint paths between pods
        assert all(s == 0 and d <= 2 for s, d in seen)


def topo_addr(value: int) -> str:
    return ".".join(str((int(value) >> s) & 0xFF) for s in (24, 16, 8, 0))


CONFIG = """\
name: subflow-paths-check
seed: 11
repetitions: 1
topology:
  kind: fattree
  k: 4
  links: {host: {bw_mbps: 20}, edge: {bw_mbps: 20}, core: {bw_mbps: 20}}
dataplane: nftables
switching: {mode: ecmp}
hosts: {transport: mptcp, subflows: 4, cc: cubic, kernel: host}
workload: {pattern: silent, flow_types: {short: 300KB}, iterations: 2, requests: 1}
factors:
  subflow_paths: {hashed: {hosts.subflow_paths: hashed},
                  disjoint: {hosts.subflow_paths: disjoint}}
analysis: {ivs: [subflow_paths]}
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    base = tmp_path_factory.mktemp("subflow-paths")
    (base / "c.yaml").write_text(CONFIG)
    out = base / "results"
    proc = subprocess.run([sys.executable, "-m", "pathdiv.experiments.cli", "run",
                           str(base / "c.yaml"), "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, f"pathdiv run failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    compute_metrics(out)
    metrics = pd.read_csv(out / "metrics.csv")
    assert {"shared_subflows", "distinct_paths", "cpu_ms_per_mb"} <= set(metrics.columns)
    return pd.read_csv(out / "transfer_metrics.csv")


def test_disjoint_puts_four_subflows_on_four_cores(runs: pd.DataFrame) -> None:
    between_pods = runs[(runs["paths"] == 4) & runs["ok"] & runs["measured"]]
    share = {}
    for level in ("hashed", "disjoint"):
        t = between_pods[between_pods["subflow_paths"] == level] if "subflow_paths" in runs \
            else between_pods[between_pods["run_id"].str.contains(level)]
        assert len(t) >= 16
        assert t["distinct_paths"].between(1, 4).all()
        share[level] = float((t["distinct_paths"] == 4).mean())
    print(f"\nconnections between pods on 4 distinct cores: hashed {share['hashed']:.1%}, "
          f"disjoint {share['disjoint']:.1%}")
    assert share["disjoint"] >= 0.95


def test_cpu_cost_is_measured_on_the_real_clock(runs: pd.DataFrame) -> None:
    ok = runs[runs["ok"]]
    assert (ok["cpu_ms"] > 0).all() and (ok["server_cpu_ms"] > 0).all()
    assert (ok["cpu_ms_per_mb"] > 0).all()
