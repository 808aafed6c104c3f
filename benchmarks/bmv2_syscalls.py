"""Where one bmv2 switch spends its system calls: per forwarded packet, by call and thread.

In the lab kernel (User-Mode Linux) every system call of a guest process is trapped by
the UML kernel on the host (ptrace: several host context switches each), and every
hand-off between bmv2's threads is a futex wake plus a guest context switch, so a
switch's calls and wake-ups per packet set what a bmv2 lab run costs. This counts them
on the host kernel, where the same binary makes the same calls: one `simple_switch`
running static.p4 (tests/support/p4_harness.py), PACKETS UDP frames sent into
port 0 and forwarded out of port 2, `strace -c -f` attached meanwhile, and the
switch threads' context switches from /proc. Extra simple_switch options after `--`
(e.g. `-- --log-level off`) show what an option saves. `--program-json` with
`--commands` profiles another program (e.g. bmv2's own mininet/simple_router.json, where
p4c is not installed): simple_switch_CLI commands that send 10.1.0.2 out of port 2. Root.

    python benchmarks/bmv2_syscalls.py [--packets 2000] [--program-json J --commands F]
                                       [-- SWITCH_OPTION ...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scapy.all import IP, UDP, Ether, conf, sendp

from pathdiv.experiments.dataplane.bmv2.programs import compile_program
from pathdiv.experiments.dataplane.bmv2.tools import require_p4_tools
from pathdiv.experiments.dataplane.p4.entries import EntryOptions, switch_entries
from pathdiv.topologies.forwarding import NextHop, Route, SwitchTable
from tests.support import p4_harness as harness
from tests.support.p4_harness import OneSwitch

PORTS = 4
HOST, REMOTE = "10.0.0.2", "10.1.0.2"


def table(box: OneSwitch, macs: dict[int, tuple[str, str]]) -> SwitchTable:
    def hop(port: int, addr: str) -> NextHop:
        return NextHop(port, box.switch_intf(port), f"peer{port}", addr, macs[port][1])

    return SwitchTable(switch="sw", address="10.0.0.1",
                       down=(Route(f"{HOST}/32", hop(0, HOST), direct=True),),
                       up=tuple(hop(p, f"10.0.{p}.1") for p in (1, 2, 3)),
                       static=(Route(f"{REMOTE}/32", hop(2, "10.0.2.1")),), seed=1)


def context_switches(pid: int) -> dict[str, int]:
    """Thread name -> voluntary + involuntary context switches so far."""
    out: dict[str, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        fields = dict(line.split(":", 1) for line in (task / "status").read_text().splitlines())
        name = f"{fields['Name'].strip()}[{task.name}]"
        out[name] = (int(fields["voluntary_ctxt_switches"])
                     + int(fields["nonvoluntary_ctxt_switches"]))
    return out


def parse_strace_summary(text: str) -> dict[str, int]:
    """Call name -> count from `strace -c` output."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0][0].isdigit() and not line.startswith("100.00"):
            if parts[3].isdigit():  # % time, seconds, usecs/call, calls, [errors], name
                counts[parts[-1]] = int(parts[3])
    return counts


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--packets", type=int, default=2000)
    parser.add_argument("--program-json", type=Path, help="a compiled bmv2 program")
    parser.add_argument("--commands", type=Path, help="its simple_switch_CLI commands")
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    tools = require_p4_tools()
    program = args.program_json or compile_program("static", tools).json
    if extra:  # the harness builds the argv; add the options before the program's JSON
        plain = harness.simple_switch_argv

        def with_extra(*a, **k):  # type: ignore[no-untyped-def]
            cmd = plain(*a, **k)
            at = cmd.index(str(program))
            return cmd[:at] + extra + cmd[at:]

        harness.simple_switch_argv = with_extra  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as tmp, \
            OneSwitch(tools, program, PORTS, Path(tmp) / "box") as box:
        macs = box.port_macs()
        if args.commands:
            box.cli(args.commands.read_text().splitlines(), "commands")
        else:
            box.install(switch_entries(table(box, macs), macs, "static", EntryOptions()))
        conf.ifaces.reload()
        frame = (Ether(src=macs[0][1], dst=macs[0][0]) / IP(src=HOST, dst=REMOTE)
                 / UDP(sport=40000, dport=9) / (b"x" * 64))
        assert box.proc is not None
        pid = box.proc.pid  # `ip netns exec` execs simple_switch in its place
        before = context_switches(pid)
        out_rx = Path(f"/sys/class/net/{box.peer_intf(2)}/statistics/rx_packets")
        rx_before = int(out_rx.read_text())
        trace = subprocess.Popen(["strace", "-c", "-f", "-p", str(pid)],
                                 stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)  # attached to every thread
        sendp([frame] * args.packets, iface=box.peer_intf(0), verbose=False)
        time.sleep(1.0)
        trace.send_signal(2)
        summary = trace.communicate()[1]
        after = context_switches(pid)
        forwarded = int(out_rx.read_text()) - rx_before
    calls = parse_strace_summary(summary)
    options = " ".join(extra) or "(pathdiv's options)"
    print(f"simple_switch {options} running {program.name}: "
          f"{forwarded} of {args.packets} packets forwarded")
    total = sum(calls.values())
    print(f"system calls per forwarded packet: {total / max(forwarded, 1):.2f}")
    for name, n in sorted(calls.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {name:<16} {n / max(forwarded, 1):6.2f}")
    switched = {t: after.get(t, 0) - n for t, n in before.items() if after.get(t, 0) - n}
    print(f"context switches per forwarded packet: "
          f"{sum(switched.values()) / max(forwarded, 1):.2f} over {len(switched)} thread(s)")
    for name, n in sorted(switched.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {name:<24} {n / max(forwarded, 1):6.2f}")


if __name__ == "__main__":
    main()
