"""`pathdiv net`/`probe` on hosts.kernel: lab: the guest's command, its terminal, its
environment (PATH and P4_PREFIX reach the guest), and bmv2 with the lab kernel accepted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pathdiv.experiments.dataplane import select
from pathdiv.experiments.execute.boot import guest_argv
from pathdiv.experiments.execute.lab_command import CLI_MODULE, command_args
from pathdiv.kernels import uml
from tests.conftest import REPO


def test_the_guest_runs_the_same_pathdiv_command_on_the_resolved_config():
    argv = guest_argv("/py", CLI_MODULE, command_args("probe", Path("/s/config.yaml"),
                                                      json_out=True))
    assert argv == ["/py", "-m", "pathdiv.experiments.cli", "probe", "/s/config.yaml",
                    "--json"]
    assert guest_argv("/py", CLI_MODULE, command_args("net", Path("/c.yaml"),
                                                      verbose=True))[3:] == [
        "-v", "net", "/c.yaml"]


def test_only_net_and_probe_run_in_the_lab_kernel_this_way():
    with pytest.raises(ValueError, match="command 'run' does not run in the lab kernel; "
                       "only net, probe do"):
        command_args("run", Path("/c.yaml"))


def test_the_terminal_boot_line_puts_the_guest_console_on_the_users_terminal(tmp_path):
    args = uml.boot_args(tmp_path / "init", "virtual", 512, tmp_path, terminal=(5, 6))
    assert "con0=fd:5,fd:6" in args
    assert "console=ttyS0" in args  # kernel messages to the console log, not the terminal
    assert "con0=null,fd:1" not in args


def test_the_guest_command_owns_tty0_as_its_controlling_terminal():
    script = uml.guest_init(["python", "-m", "x"], Path("/w"), Path("/r/.labkernel/x"),
                            terminal=True)
    assert "(cd /w && exec setsid -c python -m x) < /dev/tty0 > /dev/tty0 2>&1\n" in script
    assert "/r/.labkernel/x/stdout" not in script


def test_stdin_of_a_non_interactive_command_comes_from_a_file():
    script = uml.guest_init(["cat"], Path("/w"), Path("/r/x"), stdin=Path("/r/x/stdin"))
    assert "(cd /w && exec cat) < /r/x/stdin > /r/x/stdout 2> /r/x/stderr\n" in script


def test_path_and_p4_prefix_reach_the_guest():
    """PATH and the terminal's type pass on their own; what a data plane needs (P4_PREFIX
    and the like) its registry entry names, and the caller passes it (select.guest_env)."""
    env = {"PATH": "/opt/p4/bin:/usr/bin", "P4_PREFIX": "/opt/p4", "HOME": "/root",
           "TERM": "xterm"}
    assert uml.passed_env(env) == {"PATH": "/opt/p4/bin:/usr/bin", "TERM": "xterm"}
    assert select.guest_env(env) == {"P4_PREFIX": "/opt/p4"}
    script = uml.guest_init(["true"], Path("/"), Path("/r/x"),
                            {**uml.passed_env(env), **select.guest_env(env)})
    # the host's PATH replaces the guest's default one, after it
    assert script.index("export PATH=/usr/local/sbin") < script.index(
        "export PATH=/opt/p4/bin:/usr/bin\n")
    assert "export P4_PREFIX=/opt/p4\n" in script


def test_where_p4c_ebpfs_runtime_headers_are_reaches_the_guest():
    env = {"P4C_EBPF_RUNTIME": "/opt/rt", "HOME": "/root"}
    assert select.guest_env(env) == {"P4C_EBPF_RUNTIME": "/opt/rt"}


def test_check_accepts_bmv2_switches_with_lab_kernel_hosts(tmp_path):
    """Where p4lang's tools are installed (here: stand-ins under P4_PREFIX), a plan of
    bmv2 switches and lab-kernel hosts is accepted, as the product is specified."""
    bindir = tmp_path / "p4" / "bin"
    bindir.mkdir(parents=True)
    for name in ("simple_switch", "simple_switch_CLI", "p4c-bm2-ss"):
        tool = bindir / name
        tool.write_text("#!/bin/sh\nexit 0\n")
        tool.chmod(0o755)
    env = dict(os.environ, P4_PREFIX=str(tmp_path / "p4"))
    proc = subprocess.run([sys.executable, "-m", "pathdiv.experiments.cli", "check",
                           "configs/noisy.yaml", "--set", "dataplane=bmv2"], cwd=REPO,
                          env=env, capture_output=True, text=True,
                          timeout=300)  # 6 s of CPU, 34 s of wall at load 5: a bound, no goal
    assert proc.returncode == 0, proc.stderr
    assert "bmv2" in proc.stdout.splitlines()[0], proc.stdout
    assert "lab kernel: 168 run(s)" in proc.stdout, proc.stdout


def test_piped_input_is_typed_once_the_guest_speaks_and_ends_with_ctrl_d():
    import threading

    source_r, source_w = os.pipe()
    term_r, term_w = os.pipe()  # stands in for the pseudo-terminal's master side
    os.write(source_w, b"paths h1 h16\nexit\n")
    os.close(source_w)
    spoke = threading.Event()
    typist = threading.Thread(target=uml.relay_input, args=(source_r, term_w, spoke))
    typist.start()
    typist.join(timeout=0.2)
    assert typist.is_alive()  # nothing typed before the guest wrote to its terminal
    guest_r, guest_w = os.pipe()
    sink_r, sink_w = os.pipe()
    os.write(guest_w, b"pathdiv> ")
    os.close(guest_w)
    uml.relay_output(guest_r, sink_w, spoke)
    assert spoke.is_set() and os.read(sink_r, 100) == b"pathdiv> "
    typist.join(timeout=5)
    os.close(term_w)
    assert os.read(term_r, 100) == b"paths h1 h16\nexit\n\x04"
