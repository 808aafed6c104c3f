"""Single-flow TCP goodput through bmv2 versus the nftables plane, printed as a ratio.

Two setups, each at every rate given (Mbit/s; links shaped with the lab's HTB + pfifo):
  one-switch  two host namespaces joined by one switch: a bmv2 simple_switch running
              static.p4, or a namespace forwarding in the kernel;
  fattree     the k=4 fat tree in static mode, first host of pod 0 fetching from the last
              host of the last pod (5 switches on the path), bmv2 versus nftables plane.
It also prints the machine's idle CPU share during each transfer (twenty bmv2 switches
share the same cores as everything else).

    python benchmarks/bmv2_goodput.py [--rates 20 100] [--seconds 8] [--skip-fattree]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support
from pathdiv.experiments.dataplane.bmv2.programs import compile_program
from pathdiv.experiments.dataplane.bmv2.tools import require_p4_tools
from pathdiv.experiments.dataplane.p4.entries import switch_entries
from pathdiv.experiments.fabric.environment import mark_namespace_argv
from pathdiv.experiments.fabric.shaping import tc_commands
from pathdiv.topologies.forwarding import NextHop, Route, SwitchTable
from pathdiv.topologies.model import LinkParams
from tests.support.p4_harness import OneSwitch

REPO = Path(__file__).resolve().parents[1]
PORT = 5003
GATEWAY = "10.0.0.1"
HOSTS = ("10.0.0.2", "10.0.1.2")


def cpu_times() -> tuple[int, int]:
    """(idle, total) jiffies of the whole machine."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[3] + fields[4], sum(fields)


def run(argv: list[str]) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def in_ns(ns: str | None, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv] if ns else argv


def transfer(server: list[str], client: list[str], addr: str, size: int) -> tuple[float, float]:
    """(goodput Mbit/s, idle CPU share) of one fetch; `server`/`client` prefix argvs."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    py = [sys.executable, "-u", "-m", "pathdiv.experiments.traffic.transfer"]
    srv = subprocess.Popen([*server, *py, "serve", "--port", str(PORT)], env=env,
                           stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout is not None
        if "ready" not in srv.stdout.readline():
            raise RuntimeError("transfer server did not start")
        idle0, total0 = cpu_times()
        out = subprocess.run([*client, *py, "fetch", f"{addr}:{PORT}:{size}", "--timeout", "300"],
                             env=env, capture_output=True, text=True, timeout=330)
        idle1, total1 = cpu_times()
    finally:
        srv.terminate()
        srv.wait()
    res = json.loads(out.stdout.splitlines()[0])
    if not res["ok"]:
        raise RuntimeError(f"transfer failed: {res['error']}")
    goodput = res["received"] * 8 / (res["end_s"] - res["start_s"]) / 1e6
    return goodput, (idle1 - idle0) / max(1, total1 - total0)


def configure_hosts(names: list[str | None], intfs: list[str], rate: float | None) -> None:
    for ns, intf, addr in zip(names, intfs, HOSTS, strict=True):
        run(in_ns(ns, ["ip", "addr", "add", f"{addr}/32", "dev", intf]))
        run(in_ns(ns, ["ip", "route", "add", "default", "via", GATEWAY, "dev", intf, "onlink"]))
        shape(ns, intf, rate)


def shape(ns: str | None, intf: str, rate: float | None) -> None:
    if rate is not None:
        for cmd in tc_commands(intf, LinkParams(bw_mbps=rate)):
            run(in_ns(ns, cmd))


def one_switch_bmv2(rate: float | None, size: int, workdir: Path) -> tuple[float, float]:
    tools = require_p4_tools()
    program = compile_program("static", tools)
    with OneSwitch(tools, program.json, 2, workdir / "bmv2", prefix="pd6",
                   peer_namespaces=True) as box:
        macs = box.port_macs()
        hops = [NextHop(i, box.switch_intf(i), f"h{i}", HOSTS[i], macs[i][1]) for i in range(2)]
        table = SwitchTable("sw", GATEWAY, tuple(Route(f"{HOSTS[i]}/32", hops[i], direct=True)
                                                 for i in range(2)), (), (), 0)
        box.install(switch_entries(table, macs, "static"))
        configure_hosts([box.peer_ns(0), box.peer_ns(1)], [box.peer_intf(0), box.peer_intf(1)],
                        rate)
        for i in range(2):
            shape(box.switch_ns, box.switch_intf(i), rate)
        return transfer(in_ns(box.peer_ns(1), []), in_ns(box.peer_ns(0), []), HOSTS[1], size)


def one_switch_kernel(rate: float | None, size: int) -> tuple[float, float]:
    sw, hosts = "pd7sw", ["pd7h0", "pd7h1"]
    for ns in (sw, *hosts):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        run(["ip", "netns", "add", ns])
        run(mark_namespace_argv(ns))  # `pathdiv clean` may delete it
        run(in_ns(ns, ["ip", "link", "set", "lo", "up"]))
    try:
        run(in_ns(sw, ["sysctl", "-qw", "net.ipv4.ip_forward=1"]))
        for i, h in enumerate(hosts):
            s_if, h_if = f"pd7s{i}", f"pd7p{i}"
            run(["ip", "link", "add", s_if, "netns", sw, "type", "veth", "peer", "name", h_if,
                 "netns", h])
            for ns, intf in ((sw, s_if), (h, h_if)):
                run(in_ns(ns, ["ip", "link", "set", intf, "up"]))
                run(in_ns(ns, ["ethtool", "-K", intf, "tso", "off", "gso", "off", "gro", "off"]))
            run(in_ns(sw, ["ip", "addr", "add", f"{GATEWAY}/32", "dev", s_if]))
            run(in_ns(sw, ["ip", "route", "add", f"{HOSTS[i]}/32", "dev", s_if]))
            shape(sw, s_if, rate)
        configure_hosts(hosts, ["pd7p0", "pd7p1"], rate)
        return transfer(in_ns(hosts[1], []), in_ns(hosts[0], []), HOSTS[1], size)
    finally:
        for ns in (sw, *hosts):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def fattree(plane: str, rate: float, size: int, workdir: Path) -> tuple[float, float]:
    from pathdiv.experiments.config.load import load
    from pathdiv.experiments.dataplane.nftables.plane import NftablesDataPlane
    from pathdiv.experiments.fabric.nodeprocs import wait_for_line
    from pathdiv.experiments.network.network import Network

    cfg = load(REPO / "configs/class-probe.yaml").with_overrides(
        [(f"topology.links.{tier}.bw_mbps", rate) for tier in ("host", "edge", "core")]
        + [("switching.mode", "static"), ("hosts.transport", "tcp")]
    )
    if plane == "bmv2":
        from pathdiv.experiments.dataplane.bmv2.plane import Bmv2DataPlane as cls
    else:
        cls = NftablesDataPlane
    with Network(cfg, cls, workdir / f"fattree-{plane}-{rate:g}") as net:
        client, server = net.topo.hosts[0], net.topo.hosts[-1]
        srv = net.transfer(server, ["serve", "--port", str(PORT)])
        wait_for_line(srv, srv.stdout, "ready", 15, "transfer server")
        idle0, total0 = cpu_times()
        addr = net.topo.nodes[server].address
        proc = net.transfer(client, ["fetch", f"{addr}:{PORT}:{size}", "--timeout", "300"])
        out, _ = proc.communicate(timeout=330)
        idle1, total1 = cpu_times()
    res = json.loads(out.splitlines()[0])
    if not res["ok"]:
        raise RuntimeError(f"fat-tree transfer failed: {res['error']}")
    goodput = res["received"] * 8 / (res["end_s"] - res["start_s"]) / 1e6
    return goodput, (idle1 - idle0) / max(1, total1 - total0)


def row(setup: str, rate: float | None, kern: tuple[float, float],
        bmv2: tuple[float, float]) -> str:
    label = "unshaped" if rate is None else f"{rate:g} Mbit/s"
    return (f"{setup:<11} {label:>12} {kern[0]:>10.2f} {bmv2[0]:>10.2f} "
            f"{bmv2[0] / kern[0]:>8.3f} {100 * kern[1]:>8.0f}% {100 * bmv2[1]:>8.0f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", type=float, nargs="+", default=[20.0, 100.0])
    ap.add_argument("--seconds", type=float, default=8.0, help="transfer length at the rate")
    ap.add_argument("--unshaped-mb", type=int, default=200,
                    help="also measure one switch unshaped with this many MB (0 = skip)")
    ap.add_argument("--skip-fattree", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (network namespaces)")
    print(f"{'setup':<11} {'rate':>12} {'kernel':>10} {'bmv2':>10} {'ratio':>8} "
          f"{'idle(k)':>9} {'idle(b)':>9}   goodput in Mbit/s, ratio bmv2/kernel")
    with tempfile.TemporaryDirectory(prefix="bmv2-goodput-") as tmp:
        work = Path(tmp)
        cases: list[float | None] = list(args.rates)
        if args.unshaped_mb:
            cases.append(None)
        for rate in cases:
            size = int(rate * 1e6 / 8 * args.seconds) if rate else args.unshaped_mb * 1_000_000
            kern = one_switch_kernel(rate, size)
            bmv2 = one_switch_bmv2(rate, size, work)
            print(row("one-switch", rate, kern, bmv2), flush=True)
        if not args.skip_fattree:
            for rate in args.rates:
                size = int(rate * 1e6 / 8 * args.seconds)
                kern = fattree("kernel", rate, size, work)
                bmv2 = fattree("bmv2", rate, size, work)
                print(row("fattree k=4", rate, kern, bmv2), flush=True)


if __name__ == "__main__":
    main()
