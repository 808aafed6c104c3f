"""Juggler against the other receivers, in the spray lab (as root, in the lab kernel).

The lab is mptcp_lab.py's `spray` set-up: namespaces ``pdlab-s`` (sender) and ``pdlab-c``
(receiver) joined by one veth pair; the sender's packets are sprayed round robin, packet
by packet, over P paths of different delays (a prio qdisc with one netem per path). Per
receiver level, one transfer from the sender to the receiver:

  default    the kernel's TCP, GRO off (frame by frame, as every pathdiv host)
  gro        the reorder hold (net.ipv4.tcp_reorder_hold_us): SACKs held, no packet moved
  gro-only   GRO on at the receiver's interface, Juggler off: what GRO alone changes
  juggler    GRO on and Juggler (net.core.juggler) with its timeouts and table

and, from both namespaces' /proc/net/netstat (and the sender's tcp_info), what TCP saw of
the reordering: segments the receiver queued out of order (TcpExt TCPOFOQueue), the
sender's reordering detections (TCPSACKReorder, tcp_info reord_seen), retransmissions and
DSACKs (spurious retransmissions), Juggler's own counters. With ``--capture`` both ends
are captured (the sender's interface sees a packet leave its path's queue, which with veth
is when it arrives; the receiver's sees what GRO handed up) and compared
(reorder_captures.py): data that reached TCP below data it already had, how long each
segment was held, GRO's merges and, for MPTCP, merges that ran past a DSS mapping.

Modes (one JSON object on stdout):
  tcp    one TCP transfer per level
  mptcp  one MPTCP transfer with N subflows (the receiver's addresses as endpoints)
         per level, captured
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support import mptcp_lab as lab
from tests.support.reorder_captures import (
    by_flow,
    hold_delays,
    late_segments,
    mapping_overruns,
    merges,
    read_segments,
    summary,
)

LEVELS = ("default", "gro", "gro-only", "juggler")
SENDER = ("TCPSACKReorder", "TCPDSACKRecv", "TCPDSACKRecvSegs", "TCPFastRetrans",
          "TCPLostRetransmit", "TCPLossProbes", "TCPTimeouts", "TCPSpuriousRTOs",
          "TCPTSReorder", "TCPRenoReorder")
RECEIVER = ("TCPOFOQueue", "TCPDSACKOldSent", "TCPDSACKOfoSent", "JugglerOutOfOrder",
            "JugglerReleased", "JugglerHeldUs", "JugglerOooTimeout", "JugglerLate",
            "JugglerEvicted", "JugglerEvictedHeld", "JugglerOverflow")
MPTCP = ("OFOQueue", "OFOMerge", "DuplicateData", "DSSNotMatching", "DSSNoMatchTCP",
         "InfiniteMapRx", "DataCsumErr", "DSSTcpMismatch")
MSS = 1448


def netstat(ns: str) -> dict[str, dict[str, int]]:
    """/proc/net/netstat and /proc/net/snmp of a namespace: {section: {field: value}}."""
    out: dict[str, dict[str, int]] = {}
    for name in ("netstat", "snmp"):
        lines = lab.sh("cat", f"/proc/net/{name}", ns=ns).splitlines()
        for head, values in zip(lines[::2], lines[1::2], strict=False):
            section, _, fields = head.partition(":")
            out[section] = dict(zip(fields.split(), map(int, values.partition(":")[2].split()),
                                    strict=False))
    return out


def delta(before: dict, after: dict, section: str, fields: Sequence[str]) -> dict[str, int]:
    b, a = before.get(section, {}), after.get(section, {})
    return {f: a[f] - b.get(f, 0) for f in fields if f in a}


def set_level(level: str, hold_us: int, juggler: tuple[int, int, int]) -> None:
    """The receiver's settings of a level (the previous level's undone first)."""
    from pathdiv.experiments.fabric.hostsetup import HOLD_SYSCTL, reordering_sysctls

    base = ["net.ipv4.tcp_reordering=3", "net.ipv4.tcp_max_reordering=300",
            "net.ipv4.tcp_recovery=1", "net.ipv4.tcp_dsack=1", f"{HOLD_SYSCTL}=0",
            "net.core.juggler=0"]
    lab.set_sysctls(*base)
    settings = {"gro-only": "default"}.get(level, level)
    lab.set_sysctls(*reordering_sysctls(settings, hold_us, juggler))
    gro = "on" if level in ("gro-only", "juggler") else "off"
    lab.sh("ethtool", "-K", lab.DEV_CLIENT, "gro", gro, ns=lab.NS_CLIENT)


@contextmanager
def captures(out: Path | None) -> Iterator[dict[str, Path]]:
    """tcpdump on both ends (to local storage first), stopped and moved into ``out``."""
    if out is None:
        yield {}
        return
    local = Path(tempfile.mkdtemp(prefix="pdjug-"))
    files = {"wire": local / "wire.pcap", "received": local / "received.pcap"}
    procs = []
    for (ns, dev), path in zip(((lab.NS_SERVER, lab.DEV_SERVER), (lab.NS_CLIENT, lab.DEV_CLIENT)),
                               files.values(), strict=True):
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", ns, "tcpdump", "-i", dev, "-s", "128", "-B", "16384",
             "--immediate-mode", "-w", str(path), "tcp", "port", str(lab.PORT)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    deadline = time.monotonic() + 20
    while not all(p.exists() for p in files.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield files
    finally:
        time.sleep(1.0)  # let tcpdump drain what the kernel queued
        dropped = []
        for proc in procs:
            proc.terminate()
            dropped += [line for line in proc.communicate(timeout=30)[1].splitlines()
                        if "dropped by kernel" in line and not line.startswith("0 ")]
        if dropped:
            raise RuntimeError(f"the captures lost packets: {dropped}")
        out.mkdir(parents=True, exist_ok=True)
        for path in files.values():
            if path.exists():
                shutil.move(path, out / path.name)
        shutil.rmtree(local, ignore_errors=True)


def compare(folder: Path) -> dict:
    """What the receiver's TCP got against what arrived (reorder_captures.py)."""
    wire = read_segments(folder / "wire.pcap", lab.PORT)
    received = read_segments(folder / "received.pcap", lab.PORT)
    per_flow = {f"{f[3]}": late_segments(s)["late"] for f, s in by_flow(received).items()}
    return {"wire": late_segments(wire), "received": late_segments(received),
            "received_late_per_subflow": per_flow,
            "hold_us": summary(hold_delays(wire, received)),
            "gro": merges(received, MSS), "dss": mapping_overruns(received)}


def transfer(level: str, size: int, subflows: int, capture: Path | None) -> dict:
    before = {ns: netstat(ns) for ns in (lab.NS_SERVER, lab.NS_CLIENT)}
    mptcp = subflows > 1
    server_argv = (["serve", "--connections", "1", "--subflows", str(subflows)] if mptcp
                   else ["serve-tcp"])
    with captures(capture) as files:
        server = subprocess.Popen(["ip", "netns", "exec", lab.NS_SERVER, sys.executable,
                                   lab.__file__, *server_argv], stdout=subprocess.PIPE,
                                  text=True)
        try:
            lab.wait_listening()
            res = subprocess.run(["ip", "netns", "exec", lab.NS_CLIENT, sys.executable,
                                  lab.__file__, "fetch", *([] if mptcp else ["--tcp"]),
                                  "--size", str(size)], capture_output=True, text=True,
                                 timeout=3600)
            if res.returncode != 0:
                raise RuntimeError(f"client failed ({res.returncode}): {res.stderr.strip()}")
            fetched = json.loads(res.stdout)
            sender = json.loads(server.communicate(timeout=60)[0] or "{}")
        finally:
            if server.poll() is None:
                server.kill()
    after = {ns: netstat(ns) for ns in (lab.NS_SERVER, lab.NS_CLIENT)}
    s, c = lab.NS_SERVER, lab.NS_CLIENT
    report = {
        "level": level, "complete": fetched["complete"], "fct_s": fetched["fct_s"][0],
        "goodput_mbps": fetched["goodput_mbps"], "sender_info": sender,
        "sender": {**delta(before[s], after[s], "TcpExt", SENDER),
                   **delta(before[s], after[s], "Tcp", ("RetransSegs", "OutSegs"))},
        "receiver": delta(before[c], after[c], "TcpExt", RECEIVER),
    }
    if mptcp:
        report["receiver_mptcp"] = delta(before[c], after[c], "MPTcpExt", MPTCP)
    if capture and files:
        report["captures"] = compare(capture)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=("tcp", "mptcp"))
    p.add_argument("--levels", nargs="+", choices=LEVELS, default=list(LEVELS))
    p.add_argument("--size", type=int, default=10_000_000)
    p.add_argument("--subflows", type=int, default=4, help="mptcp mode")
    p.add_argument("--delays-ms", type=float, nargs="+", default=[1.0, 2.0, 3.0, 4.0])
    p.add_argument("--rate-mbit", type=float, default=5.0, help="per path")
    p.add_argument("--queue-pkts", type=int, default=100, help="per path")
    p.add_argument("--ack-delay-ms", type=float, default=1.0)
    p.add_argument("--hold-us", type=int, default=20000, help="gro: the SACK hold's bound")
    p.add_argument("--ooo-us", type=int, default=20000, help="juggler: out-of-order timeout")
    p.add_argument("--inseq-us", type=int, default=0, help="juggler: in-sequence timeout")
    p.add_argument("--flows", type=int, default=8, help="juggler: flows per receive queue")
    p.add_argument("--capture", type=Path, default=None,
                   help="capture both ends into this folder (one sub-folder per level)")
    args = p.parse_args(argv)
    subflows = args.subflows if args.mode == "mptcp" else 1
    if args.mode == "mptcp" and args.capture is None:
        args.capture = Path(tempfile.mkdtemp(prefix="pdjug-mptcp-"))
    juggler = (args.inseq_us, args.ooo_us, args.flows)
    runs = []
    with lab.spray_lab(args.delays_ms, args.rate_mbit, args.queue_pkts, args.ack_delay_ms):
        for ns in (lab.NS_SERVER, lab.NS_CLIENT):
            lab.sh("sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1", ns=ns)
        if subflows > 1:
            for ns in (lab.NS_SERVER, lab.NS_CLIENT):
                lab.sh("ip", "mptcp", "limits", "set", "subflow", "8", "add_addr_accepted",
                       "8", ns=ns)
            for i in range(1, subflows):
                lab.sh("ip", "addr", "add", f"{lab.client_addr(i)}/24", "dev", lab.DEV_CLIENT,
                       ns=lab.NS_CLIENT)
                lab.sh("ip", "mptcp", "endpoint", "add", lab.client_addr(i), "dev",
                       lab.DEV_CLIENT, "subflow", ns=lab.NS_CLIENT)
        for level in args.levels:
            set_level(level, args.hold_us, juggler)
            capture = args.capture / level if args.capture else None
            runs.append(transfer(level, args.size, subflows, capture))
    print(json.dumps({"mode": args.mode, "kernel": lab.sh("uname", "-r").strip(),
                      "delays_ms": args.delays_ms, "rate_mbit_per_path": args.rate_mbit,
                      "queue_pkts": args.queue_pkts, "hold_us": args.hold_us,
                      "juggler": dict(zip(("inseq_us", "ooo_us", "flows"), juggler,
                                          strict=True)),
                      "subflows": subflows, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
