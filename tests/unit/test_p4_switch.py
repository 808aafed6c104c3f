"""simple_switch command lines and readiness parsing (no bmv2 needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pathdiv.experiments.dataplane.bmv2.switch import (
    SwitchStartError,
    listening_tcp_ports,
    offload_argv,
    simple_switch_argv,
    wait_ready,
)
from pathdiv.experiments.dataplane.bmv2.tools import P4Tools

TOOLS = P4Tools(Path("/opt/p4/bin/simple_switch"), Path("/opt/p4/bin/simple_switch_CLI"),
                Path("/opt/p4/bin/p4c-bm2-ss"))

PROC_NET_TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:2383 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 0100007F:A1B2 0100007F:2383 01 00000000:00000000 00:00000000 00000000     0        0 2 1
"""


def test_argv_maps_ports_and_keeps_logging_off() -> None:
    argv = simple_switch_argv(TOOLS, 3, 9093, [(0, "e1-eth0"), (2, "e1-eth2")], Path("p.json"))
    assert argv == ["/opt/p4/bin/simple_switch", "--device-id", "3", "--thrift-port", "9093",
                    "-i", "0@e1-eth0", "-i", "2@e1-eth2", "--log-level", "off", "p.json", "--",
                    "--enable-swap"]
    # no sink is not enough: without `--log-level off` bmv2 still formats every message
    assert "--log-console" not in argv and "--log-file" not in argv


def test_debug_adds_console_log_and_pcaps() -> None:
    argv = simple_switch_argv(TOOLS, 0, 9090, [(0, "c1-eth0")], Path("p.json"), Path("/tmp/d"))
    assert argv[argv.index("--pcap") + 1] == "/tmp/d"
    assert "--log-console" in argv
    assert argv.index("p.json") > argv.index("--pcap")  # options before the program


def test_offloads_include_checksums_and_segmentation() -> None:
    argv = offload_argv("e1-eth0")
    assert argv[:3] == ["ethtool", "-K", "e1-eth0"]
    pairs = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert {k: pairs[k] for k in ("rx", "tx", "tso", "gso", "gro")} == dict.fromkeys(
        ("rx", "tx", "tso", "gso", "gro"), "off")


def test_only_listening_sockets_count() -> None:
    assert listening_tcp_ports(PROC_NET_TCP) == {0x2383}


def test_a_switch_that_exits_names_its_log(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait()
    with pytest.raises(SwitchStartError, match=r"exited with code 3 while starting; read .*s1"):
        wait_ready(proc, 9090, "switch s1", tmp_path / "s1.log", timeout_s=1)


def test_a_switch_that_never_listens_times_out(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(SwitchStartError, match="did not listen on thrift port 9"):
            wait_ready(proc, 9, "switch s1", tmp_path / "s1.log", timeout_s=0.3)
    finally:
        proc.kill()
        proc.wait()
