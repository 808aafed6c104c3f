"""One `simple_switch` process: its command line, readiness and stop (no Mininet here).

Both the Mininet switch node (experiments/dataplane/bmv2/plane.py) and the one-switch
harness (tests/support/p4_harness.py) start bmv2 through these functions.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

from pathdiv.experiments.dataplane.bmv2.tools import P4Tools

READY_TIMEOUT_S = 30.0
POLL_S = 0.05
TCP_LISTEN = "0A"
# bmv2 reads whole frames with libpcap: no partial checksums, no super-packets.
OFFLOADS_OFF = ("rx", "off", "tx", "off", "sg", "off", "tso", "off", "gso", "off", "gro", "off")


class SwitchStartError(RuntimeError):
    """simple_switch exited or did not become ready."""


def simple_switch_argv(
    tools: P4Tools,
    device_id: int,
    thrift_port: int,
    ports: list[tuple[int, str]],
    program_json: Path,
    debug_dir: Path | None = None,
) -> list[str]:
    """argv of one switch: logging off unless `debug_dir` (console log + per-port pcaps).

    Without a log sink bmv2 still builds every debug message of every packet (spdlog
    asks the kernel for the thread id each time: 50 of the 65 system calls per packet
    of one switch, benchmarks/bmv2_syscalls.py), so `--log-level off` says it outright.
    `--enable-swap` lets the control plane replace the program while it runs.
    """
    argv = [str(tools.switch), "--device-id", str(device_id), "--thrift-port", str(thrift_port)]
    for number, intf in ports:
        argv += ["-i", f"{number}@{intf}"]
    if debug_dir is not None:
        argv += ["--log-console", "--log-level", "debug", "--pcap", str(debug_dir)]
    else:
        argv += ["--log-level", "off"]
    argv.append(str(program_json))
    argv += ["--", "--enable-swap"]
    return argv


def offload_argv(intf: str) -> list[str]:
    return ["ethtool", "-K", intf, *OFFLOADS_OFF]


def listening_tcp_ports(proc_net_tcp: str) -> set[int]:
    """Local ports in LISTEN state in a /proc/<pid>/net/tcp{,6} dump."""
    ports: set[int] = set()
    for line in proc_net_tcp.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 3 and fields[3] == TCP_LISTEN:
            ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def process_listening(pid: int) -> set[int]:
    """TCP ports listening in the network namespace of process `pid`."""
    ports: set[int] = set()
    for name in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            ports |= listening_tcp_ports(Path(f"/proc/{pid}/net/{name}").read_text())
    return ports


def wait_ready(
    proc: subprocess.Popen[bytes], thrift_port: int, what: str, log: Path,
    timeout_s: float = READY_TIMEOUT_S,
) -> None:
    """Return once `proc` listens on `thrift_port`; raise naming `log` otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        rc = proc.poll()
        if rc is not None:
            raise SwitchStartError(f"{what}: simple_switch exited with code {rc} while "
                                   f"starting; read {log}")
        if thrift_port in process_listening(proc.pid):
            return
        if time.monotonic() > deadline:
            raise SwitchStartError(f"{what}: simple_switch did not listen on thrift port "
                                   f"{thrift_port} within {timeout_s:g} s; read {log}")
        time.sleep(POLL_S)


def threads_first_in_first_out(pid: int) -> int:
    """Every thread of process `pid` under SCHED_FIFO, priority 1 (as the transfers:
    experiments/traffic/transfer.py, `first_in_first_out`); return how many. A thread
    that ended meanwhile is skipped; a refusal raises (OSError)."""
    count = 0
    for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
        try:
            os.sched_setscheduler(int(task.name), os.SCHED_FIFO, os.sched_param(1))
        except ProcessLookupError:
            continue
        count += 1
    return count


def stop_process(proc: subprocess.Popen[bytes] | None, timeout_s: float = 5.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout_s)
