"""Node scripts: the same commands as the argv lists, in batch files and few executions."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pathdiv.experiments.dataplane.nftables.rules import route_batch
from pathdiv.experiments.fabric.hostsetup import HostSpec, host_commands
from pathdiv.experiments.fabric.nodescript import (
    FAIL_MARK,
    batch_commands,
    batch_text,
    failure_message,
    render,
    sysctl_writes,
    write,
)
from pathdiv.experiments.fabric.shaping import interface_commands, tc_commands
from pathdiv.experiments.fabric.veths import veth_batch
from pathdiv.topologies.fattree import FatTree
from pathdiv.topologies.forwarding import forwarding_tables
from pathdiv.topologies.model import LinkParams

TOPO = FatTree(4, aliases_per_host=3)
SPEC = HostSpec("mptcp", 4, "cubic")
PARAMS = LinkParams(bw_mbps=20, queue_pkts=50)


def host_setup(host: str = "h1") -> list[list[str]]:
    intfs = [(link.port_of(host).intf, PARAMS) for link in TOPO.links_of(host)]
    return host_commands(TOPO, host, SPEC) + interface_commands(intfs)


def lines(text: str) -> list[str]:
    return text.splitlines()


def test_a_host_runs_one_ip_batch_one_ethtool_one_tc_batch_and_no_sysctl_process():
    cmds = host_setup()
    script = render(cmds, "/w/nodes/h1.setup")
    assert script.execs == 3
    ip_file, tc_file = sorted(script.files, key=lambda p: p.endswith(".tc"))
    assert ip_file.endswith(".ip") and tc_file.endswith(".tc")
    # the batch files hold exactly what the per-command form would run, minus "ip"/"tc"
    assert lines(script.files[ip_file]) == [" ".join(c[1:]) for c in cmds if c[0] == "ip"]
    assert lines(script.files[tc_file]) == [" ".join(c[1:]) for c in cmds if c[0] == "tc"]
    body = script.script
    assert f"ip -batch {ip_file} ||" in body and f"tc -batch {tc_file} ||" in body
    assert "ethtool -K h1-eth0 tso off gso off gro off ||" in body
    assert "sysctl" not in " ".join(line.split("||")[0] for line in lines(body))
    assert "echo 2 > /proc/sys/net/ipv4/conf/h1-eth0/rp_filter ||" in body
    assert "echo cubic > /proc/sys/net/ipv4/tcp_congestion_control ||" in body


def test_commands_keep_their_order_and_only_neighbours_share_a_batch():
    cmds = [["ip", "link", "set", "dev", "x", "up"], ["ethtool", "-K", "x", "gro", "off"],
            ["ip", "addr", "add", "10.0.0.1/32", "dev", "x"], ["nft", "-f", "/w/x.nft"]]
    script = render(cmds, "/w/x")
    assert script.execs == 4
    run = [line.split(" ||")[0] for line in lines(script.script)[4:]]
    assert run == ["ip -batch /w/x.1.ip", "ethtool -K x gro off", "ip -batch /w/x.3.ip",
                   "nft -f /w/x.nft"]
    assert script.files == {"/w/x.1.ip": "link set dev x up\n",
                            "/w/x.3.ip": "addr add 10.0.0.1/32 dev x\n"}


def test_a_switch_shapes_all_ports_with_one_tc_batch():
    intfs = [(f"e1-eth{i}", PARAMS) for i in range(4)]
    cmds = interface_commands(intfs)
    assert [c[0] for c in cmds] == ["ip"] * 4 + ["ethtool"] * 4 + ["tc"] * 12
    assert cmds[8:] == [c for i, _ in intfs for c in tc_commands(i, PARAMS)]
    assert render(cmds, "/w/e1").execs == 1 + 4 + 1


def test_sysctl_becomes_proc_writes():
    assert sysctl_writes(["sysctl", "-qw", "net.ipv4.ip_forward=1", "net.mptcp.scheduler=rb"]) \
        == [("/proc/sys/net/ipv4/ip_forward", "1"), ("/proc/sys/net/mptcp/scheduler", "rb")]
    with pytest.raises(ValueError, match="only `sysctl -w`"):
        sysctl_writes(["sysctl", "net.ipv4.ip_forward"])
    with pytest.raises(ValueError, match="is not key=value"):
        sysctl_writes(["sysctl", "-w", "net.ipv4.ip_forward"])


def test_batch_files_refuse_what_ip_would_parse_differently():
    with pytest.raises(ValueError, match="cannot go in a batch file"):
        batch_text([["ip", "link", "set", "dev", "a b", "up"]], "ip")
    with pytest.raises(ValueError, match="is not a tc command"):
        batch_text([["ip", "link"]], "tc")


def test_generated_route_batches_round_trip():
    text = route_batch(forwarding_tables(TOPO, run_seed=1)["e1"])
    assert batch_text(batch_commands("ip", text), "ip") == text


def test_a_failing_batch_names_node_command_line_number_and_line():
    script = render(host_setup(), "/w/nodes/h1.setup")
    path = next(p for p in script.files if p.endswith(".ip"))
    output = (f"{FAIL_MARK}ip -batch {path}\nRTNETLINK answers: File exists\n"
              f"Command failed {path}:3\n")
    msg = failure_message("h1", output, "1", script.files)
    third = lines(script.files[path])[2]
    assert msg.startswith(f"h1: `ip -batch {path}` failed at line 3 (`{third}`) (exit 1)")
    assert "RTNETLINK answers: File exists" in msg


def test_the_script_stops_at_the_first_failure_and_says_which(tmp_path: Path):
    marker = tmp_path / "ran"
    script = render([["true"], ["false", "--flag"], ["touch", str(marker)]], str(tmp_path / "n"))
    write(script, tmp_path / "n.sh")
    out = subprocess.run(["bash", "-c", f"( . {tmp_path / 'n.sh'} ) 2>&1; echo __rc=$?"],
                         capture_output=True, text=True).stdout
    assert f"{FAIL_MARK}false --flag" in out and out.rstrip().endswith("__rc=1")
    assert not marker.exists()


def test_the_state_file_shows_each_step_as_it_ends_and_where_a_failure_stopped(
        tmp_path: Path):
    """The state file is the build's sign of life (and, after a failure, how far the node
    got): `started`, then one line per step as it ends, the sysctl writes one step."""
    ok = render([["true"], ["sysctl", "-w", "a.b=1", "c.d=2"], ["true", "x"]],
                str(tmp_path / "ok"))
    ok_script = ok.script.replace("/proc/sys/", f"{tmp_path}/")  # writable stand-ins
    (tmp_path / "a").mkdir()
    (tmp_path / "c").mkdir()
    (tmp_path / "ok.sh").write_text(ok_script)
    failed = render([["true"], ["false"], ["true"]], str(tmp_path / "bad"))
    write(failed, tmp_path / "bad.sh")
    for name in ("ok", "bad"):
        (tmp_path / f"{name}.state").write_text("left by an earlier build\n")
        subprocess.run(["bash", "-c", f"( . {tmp_path / name}.sh ) >/dev/null 2>&1"])
    assert lines((tmp_path / "ok.state").read_text()) == [
        "started", "step 1 of 3", "step 2 of 3", "step 3 of 3"]
    assert (tmp_path / "c" / "d").read_text() == "2\n"
    assert lines((tmp_path / "bad.state").read_text()) == ["started", "step 1 of 3"]


def test_veth_batch_makes_every_link_with_names_macs_and_namespaces():
    pids = {name: 1000 + i for i, name in enumerate(TOPO.nodes)}
    batch = lines(veth_batch(TOPO, pids))
    assert len(batch) == len(TOPO.links) == 48
    link = TOPO.links[0]
    a, b = link.a, link.b
    assert batch[0] == (f"link add name {a.intf} address {TOPO.mac(a)} netns {pids[a.node]} up "
                        f"type veth peer name {b.intf} address {TOPO.mac(b)} "
                        f"netns {pids[b.node]}")
