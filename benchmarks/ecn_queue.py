"""One congested switch port with ECN marking: its queue over time and the CE marks.

On a k=4 fat tree with `switching.ecn_threshold_pkts` = K, two hosts of h1's pod
(h2 on its edge switch, h3 on the other) send to h1 at once with iperf3 for
`--seconds`, so the edge switch's port towards h1 (e1 -> h1, 20 Mbit/s) gets twice
what it can send. Every `--sample-ms`
(after a warm-up of a quarter of the transfer) the script reads that port's queue with
`tc -s -j qdisc` (the leaf's packets in queue; on the nftables plane the RED leaf also
counts what it marked), and it captures h1's interface to count the data packets that
arrived CE-marked among the ECN-capable ones (`ce_marks`, the `ce_pct` metric).

Run it where the congestion control and the marking exist: the nftables plane needs
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
from pathdiv.experiments.fabric.shaping import FRAME_BYTES
from pathdiv.experiments.network.network import Network

# h2 shares h1's edge switch, h3 reaches it through an aggregation switch: their data
# meets only at e1's port towards h1, whatever ECMP chooses; h4's pings cross it too
CLIENT, SENDERS, PINGER = "h1", ("h2", "h3"), "h4"
BASE_PORT = 5201


def plane_class(name: str) -> type:
    if name == "kernel":
        from pathdiv.experiments.dataplane.nftables.plane import NftablesDataPlane

        return NftablesDataPlane
    from pathdiv.experiments.dataplane.bmv2.plane import Bmv2DataPlane

    return Bmv2DataPlane


def leaf_stats(net: Network, node: str, intf: str) -> dict:
    """The stats of the leaf qdisc (handle 10:) of `intf`'s egress."""
    out = net.cmd(node, ["tc", "-s", "-j", "qdisc", "show", "dev", intf])
    for q in json.loads(out):
        if q.get("handle") == "10:":
            return q
    raise RuntimeError(f"{node} {intf}: no leaf qdisc 10: in {out[:300]}")


def ping_replies(text: str) -> list[tuple[int, float]]:
    """(icmp_seq, RTT in ms) of each reply line of `ping -n`'s output."""
    replies = []
    for line in text.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "icmp_seq" in fields and "time" in fields:
            replies.append((int(fields["icmp_seq"]), float(fields["time"])))
    return replies


def steady_rtts_ms(replies: list[tuple[int, float]], interval_s: float, start_s: float,
                   end_s: float) -> list[float]:
    """The RTTs of the pings sent between start_s and end_s after the first (ping sends
    icmp_seq n at about (n - 1) * interval): the window the queue is sampled in."""
    return [rtt for seq, rtt in replies if start_s <= (seq - 1) * interval_s <= end_s]


def measure(plane: str, threshold: int | None, cc: str, seconds: float,
            sample_ms: float, work: Path) -> dict:
    """Run the two senders and the pings in a network whose files go under `work`."""
    cfg = validate({
        "name": "ecn-queue", "dataplane": plane,
        "switching": {"mode": "ecmp", "ecn_threshold_pkts": threshold},
        "hosts": {"transport": "tcp", "cc": cc},
    })
    topo = cfg.topology()
    port = topo.link_between("e1", CLIENT).port_of("e1").intf
    client_intf = topo.link_between("e1", CLIENT).port_of(CLIENT).intf
    rate = cfg.link_conditions()[("e1", CLIENT)].bw_mbps or 0.0
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
        warm_up = seconds / 4
        ping = net.popen(PINGER, ["ping", "-n", "-i", f"{sample_ms / 1000:g}", "-w",
                                  f"{seconds:g}", addr])
        time.sleep(warm_up)  # slow start over
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
    replies = ping_replies(ping_out)
    # the queue's delay in the window the nftables plane's samples cover (after slow start,
    # before the senders stop), above the lowest RTT of the whole ping (the empty queue)
    rtts = steady_rtts_ms(replies, sample_ms / 1000, warm_up, warm_up + seconds * 0.7)
    frame_ms = FRAME_BYTES * 8 / (rate * 1e3) if rate else float("nan")
    base = min(r for _, r in replies) if replies else float("nan")
    queued = [(r - base) / frame_ms for r in rtts]  # in full frames of the port's rate
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
        "ping_queue_pkts_median": (statistics.median(queued) if queued else None),
        # the top of the queue's range: with classic ECN it saws below K, peaking near it
        "ping_queue_pkts_p90": (statistics.quantiles(queued, n=10)[-1]
                                if len(queued) > 1 else None),
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
    with tempfile.TemporaryDirectory(prefix="pathdiv-ecn-") as work:
        print(json.dumps(measure(args.plane, args.threshold or None, args.cc, args.seconds,
                                 args.sample_ms, Path(work))))


if __name__ == "__main__":
    main()
