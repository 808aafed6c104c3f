"""Extra subflow elimination (mptcp-d) between two namespaces: one MPTCP connection whose
subflows share a bottleneck, beside one on a disjoint path (as root, in the lab kernel).

The server (``pdlab-s``, the data sender) reaches the client (``pdlab-c``) over one veth
pair whose server end has one queue per path: a prio qdisc whose bands each hold a netem
of the path's delay and rate (its queue is the path's bottleneck queue); a packet's band
is chosen by the client address it goes to. The client has three addresses, each an MPTCP
``subflow`` endpoint, so the connection has three subflows: those to the first two
addresses share path 1 (one queue), the third has path 2 to itself, with a longer delay
(heterogeneous paths: the paper's claim is that ESE tells them apart by RTT level).

Per congestion control (net.ipv4.tcp_congestion_control of both namespaces; mptcp-d's
alpha and beta from the module parameters) one transfer of ``--size`` bytes runs while
the server's subflows are sampled every ``--sample-ms`` with ``ss -tin``: each
subflow's congestion window, bytes sent and acked, and bytes the MPTCP scheduler queued
on it that TCP has not sent yet (``notsent``), over time. The server's MPTCP counters
(MPTcpExt*, e.g. MptcpDClosed and MptcpDReinject where the kernel has them) are read
before and after each transfer. Prints one JSON object.

    python tests/support/ese_lab.py [--ccs mptcp-d lia] [--size 20000000] [--alpha 1.3] \
        [--beta 0.1] [--joins before late placed]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run by path in the guest
import mptcp_lab as ml

PARAMETERS = Path("/sys/module/mptcp/parameters")
# client address index -> path (1: shared, 2: disjoint)
PATH_OF = {0: 1, 1: 1, 2: 2}


@contextlib.contextmanager
def two_paths(rate_mbit: float, delays_ms: tuple[float, float], queue_pkts: int,
              ack_delay_ms: float) -> Iterator[None]:
    ml.teardown()
    try:
        for ns in (ml.NS_SERVER, ml.NS_CLIENT):
            ml.sh("ip", "netns", "add", ns)
            ml.sh("ip", "link", "set", "lo", "up", ns=ns)
            ml.sh("ip", "mptcp", "limits", "set", "subflow", "8", "add_addr_accepted", "8",
                  ns=ns)
            ml.sh("sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1", ns=ns)
        ml.sh("ip", "link", "add", ml.DEV_SERVER, "netns", ml.NS_SERVER, "type", "veth",
              "peer", "name", ml.DEV_CLIENT, "netns", ml.NS_CLIENT)
        ml.sh("ip", "addr", "add", f"{ml.SERVER_ADDR}/24", "dev", ml.DEV_SERVER, ns=ml.NS_SERVER)
        for i in PATH_OF:
            ml.sh("ip", "addr", "add", f"{ml.client_addr(i)}/24", "dev", ml.DEV_CLIENT,
                  ns=ml.NS_CLIENT)
            if i:
                ml.sh("ip", "mptcp", "endpoint", "add", ml.client_addr(i), "dev",
                      ml.DEV_CLIENT, "subflow", ns=ml.NS_CLIENT)
        for ns, dev in ((ml.NS_SERVER, ml.DEV_SERVER), (ml.NS_CLIENT, ml.DEV_CLIENT)):
            ml.sh("ip", "link", "set", dev, "up", ns=ns)
            ml.sh("ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", ns=ns,
                  check=False)
        dev, ns = ml.DEV_SERVER, ml.NS_SERVER
        ml.sh("tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "prio", "bands", "3",
              "priomap", *["2"] * 16, ns=ns)
        for band, delay in enumerate(delays_ms, start=1):
            ml.sh("tc", "qdisc", "add", "dev", dev, "parent", f"1:{band}", "handle",
                  f"{10 + band}:", "netem", "delay", f"{delay}ms", "rate", f"{rate_mbit}mbit",
                  "limit", str(queue_pkts), ns=ns)
        for i, band in PATH_OF.items():
            ml.sh("tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio",
                  "1", "u32", "match", "ip", "dst", f"{ml.client_addr(i)}/32", "flowid",
                  f"1:{band}", ns=ns)
        if ack_delay_ms:
            ml.sh("tc", "qdisc", "add", "dev", ml.DEV_CLIENT, "root", "netem", "delay",
                  f"{ack_delay_ms}ms", ns=ml.NS_CLIENT)
        yield
    finally:
        ml.teardown()


SOCKET_RE = re.compile(r"\s(\d+\.\d+\.\d+\.\d+):(\d+)\s+(\d+\.\d+\.\d+\.\d+):(\d+)")


SS_FIELDS = ("cwnd", "bytes_acked", "bytes_sent", "notsent")


def subflow_states(ss_output: str) -> dict[str, dict[str, int]]:
    """client address -> {cwnd, bytes_acked, bytes_sent, notsent} of the server's
    subflows in `ss -tin` output (ss leaves notsent out when it is 0)."""
    out: dict[str, dict[str, int]] = {}
    peer = None
    for line in ss_output.splitlines():
        m = SOCKET_RE.search(" " + line)
        if m and m.group(2) == str(ml.PORT):
            peer = m.group(3)
            continue
        if peer and "cwnd:" in line:
            fields = dict(re.findall(r"(\w+):(\d+)", line))
            out[peer] = {k: int(fields.get(k, 0)) for k in SS_FIELDS}
            peer = None
    return out


def mptcp_counters(netstat: str) -> dict[str, int]:
    """The MPTcpExt counters in /proc/net/netstat text (a header line, a value line)."""
    rows = [line.split() for line in netstat.splitlines() if line.startswith("MPTcpExt:")]
    if len(rows) < 2:
        return {}
    return {k: int(v) for k, v in zip(rows[0][1:], rows[1][1:], strict=False)}


def server_counters() -> dict[str, int]:
    return mptcp_counters(ml.sh("cat", "/proc/net/netstat", ns=ml.NS_SERVER, check=False))


def run(cc: str, size: int, sample_ms: float, join: str = "before") -> dict:
    allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
    if cc not in allowed.read_text().split():
        allowed.write_text(f"{allowed.read_text().strip()} {cc}")
    ml.set_sysctls(f"net.ipv4.tcp_congestion_control={cc}")
    # join "before": the server sends once every subflow joined (they start together on
    # empty queues); "late": at once, the extra subflows join while the first one fills
    # the shared queue (as Linux's path manager opens them after the handshake)
    # "placed": as "before", with pathdiv's own transfer tool opening the subflows
    # through the userspace path manager (hosts.subflow_paths other than hashed with
    # hosts.join_before_data), one per client address
    placed = join == "placed"
    for ns in (ml.NS_SERVER, ml.NS_CLIENT):
        ml.sh("sysctl", "-qw", f"net.mptcp.pm_type={int(placed)}", ns=ns)
    waits_for = len(PATH_OF) if join == "before" else 1
    server = subprocess.Popen(TRANSFER_SERVE if placed else ml.server_cmd(1, waits_for),
                              stdout=subprocess.PIPE, text=True)
    samples: list[tuple[float, dict[str, dict[str, int]]]] = []
    before = server_counters()
    try:
        ml.wait_listening()
        client = subprocess.Popen(transfer_fetch(size) if placed else ml.client_cmd(size, 1),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        start = time.monotonic()
        while client.poll() is None:
            state = subflow_states(ml.sh("ss", "-Htin", "state", "established",
                                         ns=ml.NS_SERVER, check=False))
            if state:
                samples.append((round(time.monotonic() - start, 3), state))
            time.sleep(sample_ms / 1000)
        out, err = client.communicate(timeout=60)
        if client.returncode:
            raise RuntimeError(f"client failed ({client.returncode}): {err.strip()}")
        if placed:  # pathdiv's result: the subflows it opened before data, "placed"
            got = json.loads(out)
            fetched = {"complete": got["ok"], "fct_s": [round(got["end_s"] - got["start_s"], 4)],
                       "placed": got["placed"].split(";"), "subflows_seen": got["subflows"]}
            server.terminate()  # it serves until stopped
            server.communicate(timeout=60)
        else:
            fetched = json.loads(out)
            served, _ = server.communicate(timeout=60)
            # subflows the connection had when the server started sending (it waits,
            # at most 5 s, for all of them with join "before")
            fetched["subflows_at_start"] = json.loads(served)["subflows_at_start"]
    finally:
        if server.poll() is None:
            server.kill()
    after = server_counters()
    counters = {k: after[k] - before.get(k, 0) for k in after
                if after[k] - before.get(k, 0) and k in WATCHED}
    return {"cc": cc, "join": join, **fetched, "counters": counters, **summary(samples)}


TRANSFER = [sys.executable, "-m", "pathdiv.experiments.traffic.transfer"]
TRANSFER_SERVE = ["ip", "netns", "exec", ml.NS_SERVER, *TRANSFER, "serve", "--address",
                  ml.SERVER_ADDR, "--port", str(ml.PORT), "--mptcp", "--userspace-pm"]
PLACED_PORT = 30001  # below Linux's ephemeral range, as pathdiv's placement chooses


def transfer_fetch(size: int) -> list[str]:
    """pathdiv's fetch with one subflow per client address, all joined before data."""
    place = ",".join(f"{ml.client_addr(i)}:{PLACED_PORT + i}" for i in PATH_OF)
    return ["ip", "netns", "exec", ml.NS_CLIENT, *TRANSFER, "fetch",
            f"{ml.SERVER_ADDR}:{ml.PORT}:{size}", "--mptcp", "--timeout", "60",
            "--place", place, "--join-first", str(len(PATH_OF))]


# server counters reported per transfer (deltas), where the kernel has them
WATCHED = ("MptcpDClosed", "MptcpDReinject", "RetransSegs", "SubflowStale", "MPJoinAckRx")


def summary(samples: list[tuple[float, dict[str, dict[str, int]]]]) -> dict:
    """Per client address: cwnd over the second half of the transfer (max), bytes acked
    at the end and in the second half; closed = the window held at 1 packet there.
    For a closed subflow, from the first sample with a one-packet window on: when that
    was (closed_at_s), the largest and the mean of the bytes queued on it but not sent
    (notsent: what the scheduler handed it), the share of those samples with any, and
    the bytes it sent from then on, and those the scheduler queued on it from then on
    (handed_after_close: sent or held at the end beyond what it held at the closure)."""
    if not samples:
        return {"subflows": {}}
    half = samples[len(samples) // 2:]
    addrs = sorted({a for _, s in samples for a in s})
    per: dict[str, dict] = {}
    for addr in addrs:
        late = [s[addr] for _, s in half if addr in s]
        last = next((s[addr] for _, s in reversed(samples) if addr in s), {})
        first_late = late[0]["bytes_acked"] if late else 0
        per[addr] = {
            "path": PATH_OF.get(int(addr.rsplit(".", 1)[1]) - 10),
            "cwnd_max_second_half": max((x["cwnd"] for x in late), default=0),
            "bytes_acked": last.get("bytes_acked", 0),
            "bytes_second_half": (late[-1]["bytes_acked"] - first_late) if late else 0,
        }
        per[addr]["closed"] = bool(late) and per[addr]["cwnd_max_second_half"] <= 1
        if per[addr]["closed"]:
            per[addr].update(after_closing(
                [(t, s[addr]) for t, s in samples if addr in s]))
    return {"samples": len(samples), "subflows": per}


def after_closing(series: list[tuple[float, dict[str, int]]]) -> dict:
    """What a closed subflow was given from its first one-packet window on."""
    start = next((i for i, (_, x) in enumerate(series) if x["cwnd"] <= 1), None)
    if start is None:
        return {}
    rest = [x for _, x in series[start:]]
    notsent = [x["notsent"] for x in rest]
    return {"closed_at_s": series[start][0],
            "notsent_max_after_close": max(notsent),
            "notsent_mean_after_close": round(sum(notsent) / len(notsent)),
            "notsent_share_after_close": round(sum(1 for n in notsent if n) / len(notsent), 3),
            "sent_after_close": rest[-1]["bytes_sent"] - rest[0]["bytes_sent"],
            # bytes the scheduler queued on it after the closure: what it sent or held
            # at the end beyond what it held when its window closed
            "handed_after_close": (rest[-1]["bytes_sent"] + rest[-1]["notsent"]
                                   - rest[0]["bytes_sent"] - rest[0]["notsent"])}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ccs", nargs="+", default=["mptcp-d", "lia"])
    p.add_argument("--size", type=int, default=20_000_000)
    p.add_argument("--rate-mbit", type=float, default=100.0,
                   help="per path; at 10 Mbit/s a queued packet (1.2 ms) is as wide as "
                   "beta's whole band, and the reference RTT, taken as the shared queue "
                   "starts to grow, is left behind before the partner's next sample")
    p.add_argument("--delays-ms", type=float, nargs=2, default=[5.0, 30.0],
                   help="one-way delay of path 1 (shared) and path 2 (disjoint): base RTTs "
                   "of about 10.6 and 60.6 ms, so beta's band on path 1 (+-1.06 ms) holds "
                   "about 9 queued packets at 100 Mbit/s, and path 2's RTT, even with a "
                   "full queue, never comes near path 1's")
    p.add_argument("--queue-pkts", type=int, default=100, help="per path")
    p.add_argument("--ack-delay-ms", type=float, default=0.5)
    p.add_argument("--alpha", type=float, default=1.3)
    p.add_argument("--beta", type=float, default=0.1)
    p.add_argument("--sample-ms", type=float, default=200.0)
    p.add_argument("--joins", nargs="+", choices=("before", "late", "placed"),
                   default=["before"],
                   help="before: the subflows join before data (the server waits for "
                   "them); late: the server sends at once and they join meanwhile; "
                   "placed: as before, through pathdiv's transfer tool and the "
                   "userspace path manager; each congestion control runs once per value")
    args = p.parse_args(argv)
    if (PARAMETERS / "mptcp_d_alpha_pct").exists():
        (PARAMETERS / "mptcp_d_alpha_pct").write_text(f"{round(args.alpha * 100)}\n")
        (PARAMETERS / "mptcp_d_beta_pct").write_text(f"{round(args.beta * 100)}\n")
    with two_paths(args.rate_mbit, tuple(args.delays_ms), args.queue_pkts, args.ack_delay_ms):
        runs = [run(cc, args.size, args.sample_ms, join) for join in args.joins
                for cc in args.ccs]
    print(json.dumps({"mode": "ese", "kernel": ml.sh("uname", "-r").strip(),
                      "rate_mbit_per_path": args.rate_mbit, "delays_ms": args.delays_ms,
                      "alpha": args.alpha, "beta": args.beta, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
