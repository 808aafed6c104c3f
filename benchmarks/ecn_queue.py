"""One congested switch port with ECN marking: its queue over time and the CE marks.

On a k=4 fat tree with `switching.ecn_threshold_pkts` = K, two hosts of h1's pod
(h2 on its edge switch, h3 on the other) send to h1 at once with iperf3 for
`--seconds`, so the edge switch's port towards h1 (e1 -> h1, 20 Mbit/s) gets twice
what it can send. Every `--sample-ms`
(after a warm-up of a quarter of the transfer) the script reads that port's queue with
`tc -s -j qdisc` (the leaf's packets in queue; on the kernel plane the RED leaf also
counts what it marked), and it captures h1's interface to count the data packets that
arrived CE-marked among the ECN-capable ones (`ce_marks`, the `ce_pct` metric).

Run it where the congestion control and the marking exist: the kernel plane needs
sch_red and `dctcp`, which the lab kernel has (this machine's kernel may not), so
tests/integration/test_ecn_marking.py runs it in User-Mode Linux. On bmv2 the queue is
inside simple_switch, out of tc's sight: the script then samples the delay the queue
adds instead (ping from h4 to h1 crosses the same port), as packets of K full frames.

    python benchmarks/ecn_queue.py [--plane kernel|bmv2] [--threshold 20] [--cc dctcp]
        [--seconds 8] [--sample-ms 100]

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from pathdiv.analysis.capture.pcap import ip_to_int, read_pcap
from pathdiv.analysis.metrics.transfer import ce_marks
from pathdiv.experiments.config.load import validate
from pathdiv.experiments.fabric.network import Network
from pathdiv.experiments.fabric.shaping import FRAME_BYTES

# h2 shares h1's edge switch, h3 reaches it through an aggregation switch: their data
# meets only at e1's port towards h1, whatever ECMP chooses; h4's pings cross it too
CLIENT, SENDERS, PINGER = "h1", ("h2", "h3"), "h4"
BASE_PORT = 5201


def plane_class(name: str) -> type:
    if name == "kernel":
        from pathdiv.experiments.dataplane.nftables import NftablesDataPlane

        return NftablesDataPlane
    from pathdiv.experiments.dataplane.bmv2 import Bmv2DataPlane

    return Bmv2DataPlane


def leaf_stats(net: Network, node: str, intf: str) -> dict:
    """The stats of the leaf qdisc (handle 10:) of `intf`'s egress."""
    out = net.cmd(node, ["tc", "-s", "-j", "qdisc", "show", "dev", intf])
    for q in json.loads(out):
        if q.get("handle") == "10:":
            return q
    raise RuntimeError(f"{node} {intf}: no leaf qdisc 10: in {out[:300]}")


def ping_rtts_ms(text: str) -> list[float]:
    return [float(part.split("=")[1].split()[0]) for part in text.split()
            if part.startswith("time=")]


def measure(plane: str, threshold: int | None, cc: str, seconds: float,
            sample_ms: float) -> dict:
    cfg = validate({
        "name": "ecn-queue", "dataplane": plane,
        "switching": {"mode": "ecmp", "ecn_threshold_pkts": threshold},
        "hosts": {"transport": "tcp", "cc": cc},
    })
    topo = cfg.topology()
    port = topo.link_between("e1", CLIENT).port_of("e1").intf
    client_intf = topo.link_between("e1", CLIENT).port_of(CLIENT).intf
    rate = cfg.conditions()[("e1", CLIENT)].bw_mbps or 0.0
    work = Path(tempfile.mkdtemp(prefix="pathdiv-ecn-"))
    with Network(cfg, plane_class(plane), work) as net:
        pcap = work / "h1.pcap"
        dump = net.popen(CLIENT, ["tcpdump", "-i", client_intf, "-s", "64", "-w", str(pcap),
                                  "-U", "tcp"])
        servers = [net.popen(CLIENT, ["iperf3", "-s", "-1", "-p", str(BASE_PORT + i)])
                   for i in range(len(SENDERS))]
        time.sleep(1.0)
        addr = topo.nodes[CLIENT].address
        senders = [net.popen(h, ["iperf3", "-c", addr, "-p", str(BASE_PORT + i), "-t",
                                 f"{seconds:g}", "-J"])
                   for i, h in enumerate(SENDERS)]
        ping = net.popen(PINGER, ["ping", "-n", "-i", f"{sample_ms / 1000:g}", "-w",
                                  f"{seconds:g}", addr])
        time.sleep(seconds / 4)  # slow start over
        samples, t_end = [], time.monotonic() + seconds * 0.7
        first = leaf_stats(net, "e1", port) if plane == "kernel" else {}
        while time.monotonic() < t_end:
            if plane == "kernel":
                samples.append(int(leaf_stats(net, "e1", port)["qlen"]))
            time.sleep(sample_ms / 1000)
        last = leaf_stats(net, "e1", port) if plane == "kernel" else {}
        results = [json.loads(s.communicate(timeout=seconds * 4 + 30)[0]) for s in senders]
        ping_out = ping.communicate(timeout=seconds * 4 + 30)[0]
        for s in servers:
            net.end(s)
        time.sleep(0.5)
        net.end(dump)
    packets = read_pcap(pcap)
    data = packets[(packets["payload"] > 0) & (packets["dst"] == ip_to_int(addr))]
    ce, ect = ce_marks(data)
    rtts = ping_rtts_ms(ping_out)
    frame_ms = FRAME_BYTES * 8 / (rate * 1e3) if rate else float("nan")
    base = min(rtts) if rtts else float("nan")
    out = {
        "plane": plane, "threshold_pkts": threshold, "cc": cc, "seconds": seconds,
        "port": f"e1 {port}", "rate_mbit": rate,
        "qlen_samples": samples,
        "qlen_median": statistics.median(samples) if samples else None,
        "qlen_max": max(samples) if samples else None,
        "red_marked": (int(last.get("marked", 0)) - int(first.get("marked", 0))
                       if plane == "kernel" else None),
        "leaf_stats": last,
        "ce_pkts": ce, "ect_pkts": ect, "data_pkts": len(data),
        "ce_pct": 100.0 * ce / ect if ect else None,
        "ping_rtt_ms": rtts,
        # queueing delay beyond the lowest RTT, as full frames of the port's rate
        "ping_queue_pkts_median": (statistics.median(r - base for r in rtts) / frame_ms
                                   if rtts else None),
        "goodput_mbps": [r["end"]["sum_received"]["bits_per_second"] / 1e6 for r in results],
    }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plane", choices=("kernel", "bmv2"), default="kernel")
    ap.add_argument("--threshold", type=int, default=20,
                    help="switching.ecn_threshold_pkts; 0 = no marking (drop-tail)")
    ap.add_argument("--cc", default="dctcp")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--sample-ms", type=float, default=100.0)
    args = ap.parse_args()
    print(json.dumps(measure(args.plane, args.threshold or None, args.cc, args.seconds,
                             args.sample_ms)))


if __name__ == "__main__":
    main()
