"""How evenly a 7-to-1 incast shares the receiver's link on each data plane.

Seven TCP senders in three pods (h1, h2, h3, h5, h6, h13, h14) each send 3 MB to one
reader on h9 through a k=4 fat tree (configs/class-probe.yaml, static routing, 20 Mbit/s
links, this machine's kernel): every sender sleeps until the same instant before it
connects, so no flow has a head start. 2 s later it prints, per run and plane:

- Jain's fairness index of the seven byte counts h9 received (1 = equal shares);
- how many of h9's sockets still have their first receive space (`rcv_space` 14480:
  a flow that fell behind in its first round trips never grows its buffer);
- the packets h9's edge port dropped (`tc -s qdisc`, e5-eth0);
- the bytes each of three senders' sockets was still charged for 1 s in (`ss -tm`,
  `t`): packets not let go of beyond the sender's own host (docs/p4.md, "Why the noisy
  plan differed at first").

The planes alternate run by run, so a drift of the machine falls on both. Real clock:
steal and load are printed beside each run. Root; one emulation at a time.

    python benchmarks/incast_fairness.py [--reps 3] [--planes kernel,p4-ebpf]
"""

from __future__ import annotations

import argparse
import re
import time

from hoststat import HostLoad

from pathdiv.experiments import api

SENDERS = ("h1", "h2", "h3", "h5", "h6", "h13", "h14")
RECEIVER, EDGE_PORT = "h9", ("e5", "e5-eth0")
PORT = 9099
SIZE = 3_000_000
FIRST_RCV_SPACE = "14480"  # 10 segments of 1448 bytes: where every receive space starts
RECV = """
import socket, sys, threading, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(16)
def drain(c):
    while c.recv(65536):
        pass
while True:
    c, _ = s.accept()
    threading.Thread(target=drain, args=(c,), daemon=True).start()
"""
SEND = """
import socket, sys, time
time.sleep(max(0.0, float(sys.argv[4]) - time.time()))
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
c.sendall(b"x" * int(sys.argv[3]))
"""


def jain(values: list[int]) -> float:
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values)) if values else 0.0


def one_run(plane: str) -> str:
    overrides = {"hosts.kernel": "host", "dataplane": plane, "switching.mode": "static",
                 "hosts.transport": "tcp"}
    with api.network("class-probe", overrides) as net:
        dst = net.topo.nodes[RECEIVER].address
        net.cmd(RECEIVER, ["sh", "-c", f"python3 -S -c '{RECV}' {PORT} >/dev/null 2>&1 &"])
        time.sleep(0.3)
        t0 = time.time() + 0.5
        for host in SENDERS:
            net.cmd(host, ["sh", "-c", f"python3 -S -c '{SEND}' {dst} {PORT} {SIZE} "
                                       f"{t0:.6f} >/dev/null 2>&1 &"])
        time.sleep(max(0.0, t0 + 1.0 - time.time()))
        charged = [int(t) for host in SENDERS[::3]
                   for t in re.findall(r"skmem:\(r\d+,rb\d+,t(\d+),",
                                       net.cmd(host, ["ss", "-tmn", "dst", dst]))]
        time.sleep(max(0.0, t0 + 2.0 - time.time()))
        socks = net.cmd(RECEIVER, ["ss", "-tin", "sport", f"= :{PORT}"])
        got = sorted(int(x) for x in re.findall(r"bytes_received:(\d+)", socks))
        stuck = re.findall(r"rcv_space:(\d+)", socks).count(FIRST_RCV_SPACE)
        qdisc = net.cmd(EDGE_PORT[0], ["tc", "-s", "qdisc", "show", "dev", EDGE_PORT[1]])
        drops = re.search(r"dropped (\d+)", qdisc)
    return (f"Jain {jain(got):.3f}, {stuck} of {len(got)} at the first receive space, "
            f"{drops.group(1) if drops else '?'} edge-port drops, senders charged "
            f"{charged} B, received {[g // 1000 for g in got]} kB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--planes", default="kernel,p4-ebpf",
                        help="comma-separated: kernel, p4-ebpf, bmv2")
    args = parser.parse_args()
    for rep in range(args.reps):
        for plane in args.planes.split(","):
            with HostLoad() as host:
                line = one_run(plane)
            print(f"{plane:8s} run {rep + 1}: {line}; {host}", flush=True)


if __name__ == "__main__":
    main()
