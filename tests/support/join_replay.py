"""Replay of a joined subflow whose first data segment is lost, against the lab kernel as
the joining (active) side (as root, in the guest).

What Fig. 9(b)'s 25/100-ms runs showed (docs/reproduction/seed003/README.md): the client
opened the second subflow, the server validated its third ACK and sent data at once; the
first segments were dropped behind a full queue, the next arrived out of order, and the
client reset the subflow (MP_TCPRST) before it was fully established. Patch 0024.

The kernel is the client: an MPTCP socket in namespace ``jr-k`` (addresses 10.78.0.1 and
10.78.0.3, the second an in-kernel path manager's `subflow` endpoint) connects to a
crafted MPTCP server at 10.78.0.2 (namespace ``jr-p``: an interface with no address; the
peer reads and writes Ethernet frames with a packet socket), which:

1. answers MP_CAPABLE and acknowledges the kernel's third ACK at the data level, which
   makes the connection fully established and the path manager open the second subflow;
2. answers the MP_JOIN SYN, checks the third ACK's HMAC, and sends no fourth ACK of its
   own: its data is the fourth ACK, as a Linux server's is;
3. sends the stream (two segments) on the second subflow only: in scenario
   ``lost-first`` the second segment first and the first one `--gap-s` later (the first
   copy lost, its retransmission late); in ``in-order`` (the control) both in order.

The client application reads the stream's bytes or stops at its deadline. Linux 6.12 as
released resets the subflow at the out-of-order segment and the client gets nothing.

  run      one replay; prints one JSON object
  connect  (internal) the client application
  peer     (internal) the crafted server

Only the standard library (and tests/support/datafin_replay.py's packet functions).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from datafin_replay import (  # a sibling module: the script runs by path in the guest
    ACK,
    ETH_P_IP,
    MPTCP_KIND,
    PSH,
    RST,
    SYN,
    Peer,
    Segment,
    dss,
    incoming,
    join_hmac,
    key_token_idsn,
    mp_capable,
    tcp_segment,
    veth_lab,
)

NS_KERNEL, NS_PEER = "jr-k", "jr-p"
DEV_KERNEL, DEV_PEER = "jr-k0", "jr-p0"
KERNEL_ADDR, JOIN_ADDR, PEER_ADDR = "10.78.0.1", "10.78.0.3", "10.78.0.2"
PORT = 5301
MSS = 1400
SCENARIOS = ("lost-first", "in-order")
MP_CAPABLE_SUB, MP_JOIN_SUB, MP_TCPRST_SUB = 0, 1, 8


def mp_join_synack(thmac: bytes, nonce: bytes, addr_id: int = 0) -> bytes:
    """MP_JOIN of a SYN/ACK: the truncated HMAC and the responder's nonce."""
    return bytes([MPTCP_KIND, 16, MP_JOIN_SUB << 4, addr_id]) + thmac[:8] + nonce


def suboption(seg: Segment, subtype: int) -> bytes | None:
    for opt in seg.mptcp:
        if len(opt) >= 3 and opt[2] >> 4 == subtype:
            return opt
    return None


class Server(Peer):
    """The crafted server's frames on one interface: a Peer that answers connections
    the kernel opens (to PORT) instead of opening them."""

    def send(self, dst: str, dport: int, seq: int, ack: int, flags: int,  # type: ignore[override]
             options: bytes, payload: bytes = b"", what: str = "") -> None:
        head = self.dst_mac + self.src_mac + struct.pack("!H", ETH_P_IP)
        self.sock.send(head + tcp_segment(PEER_ADDR, dst, PORT, dport, seq, ack, flags,
                                          options, payload))
        self.sent.append({"at": time.monotonic(), "dport": dport, "what": what,
                          "len": len(payload)})

    def expect(self, match: Callable[[Segment], bool], timeout_s: float) -> Segment | None:
        """The kernel's next segment to the server for which `match` is true, or None
        after `timeout_s`; every segment read is logged (resets included)."""
        for seg in incoming(self.sock, time.monotonic() + timeout_s):
            if seg.dport != PORT:
                continue
            self.log.append(seg)
            if match(seg):
                return seg
        return None


def run_peer(args: argparse.Namespace) -> dict:
    srv = Server(args.dev, bytes.fromhex(args.dst_mac.replace(":", "")),
                 bytes.fromhex(args.src_mac.replace(":", "")))
    key_p = os.urandom(8)
    token_p, idsn_p = key_token_idsn(key_p)

    # 1. MP_CAPABLE: the kernel connects from KERNEL_ADDR
    syn = srv.must(lambda s: bool(s.flags & SYN) and s.src == KERNEL_ADDR, 10,
                   "MP_CAPABLE SYN")
    if suboption(syn, MP_CAPABLE_SUB) is None:
        raise RuntimeError("the kernel's SYN has no MP_CAPABLE")
    iss1 = int.from_bytes(os.urandom(4), "big")
    k_port1, k_next1 = syn.sport, (syn.seq + 1) & 0xFFFFFFFF
    srv.send(KERNEL_ADDR, k_port1, iss1, k_next1, SYN | ACK, mp_capable([key_p]),
             what="mpc-synack")
    third = srv.must(lambda s: s.sport == k_port1 and not s.flags & SYN
                     and suboption(s, MP_CAPABLE_SUB) is not None, 5, "MP_CAPABLE third ACK")
    mpc = suboption(third, MP_CAPABLE_SUB)
    if mpc is None or len(mpc) < 20:
        raise RuntimeError("the kernel's third ACK carries no keys")
    key_k = mpc[4:12]
    token_k, idsn_k = key_token_idsn(key_k)
    data_ack = (idsn_k + 1) & 0xFFFFFFFFFFFFFFFF
    # the data-level ACK that makes the connection fully established (the path manager
    # then opens the second subflow)
    srv.send(KERNEL_ADDR, k_port1, iss1 + 1, k_next1, ACK, dss(data_ack), what="mpc-dack")

    # 2. MP_JOIN from JOIN_ADDR
    jsyn = srv.must(lambda s: bool(s.flags & SYN) and s.src == JOIN_ADDR, 10,
                    "MP_JOIN SYN")
    mpj = suboption(jsyn, MP_JOIN_SUB)
    if mpj is None or len(mpj) != 12 or mpj[4:8] != token_p:
        raise RuntimeError("the kernel's join SYN has no MP_JOIN with this server's token")
    nonce_k, nonce_p = mpj[8:12], os.urandom(4)
    iss2 = int.from_bytes(os.urandom(4), "big")
    k_port2, k_next2 = jsyn.sport, (jsyn.seq + 1) & 0xFFFFFFFF
    srv.send(JOIN_ADDR, k_port2, iss2, k_next2, SYN | ACK,
             mp_join_synack(join_hmac(key_p, key_k, nonce_p, nonce_k), nonce_p),
             what="join-synack")
    jack = srv.must(lambda s: s.sport == k_port2 and not s.flags & SYN
                    and suboption(s, MP_JOIN_SUB) is not None, 5, "MP_JOIN third ACK")
    full = suboption(jack, MP_JOIN_SUB) or b""
    if full[4:24] != join_hmac(key_k, key_p, nonce_k, nonce_p)[:20]:
        raise RuntimeError("the kernel's MP_JOIN third ACK HMAC does not check")
    third_at = time.monotonic()

    # 3. the stream on the joined subflow only; no fourth ACK but the data itself
    stream = bytes((i * 7) & 0xFF for i in range(2 * MSS))
    dsn0 = (idsn_p + 1) & 0xFFFFFFFFFFFFFFFF

    def segment(i: int, what: str) -> None:
        off = i * MSS
        srv.send(JOIN_ADDR, k_port2, iss2 + 1 + off, k_next2, ACK | PSH,
                 dss(data_ack, dsn0 + off, 1 + off, MSS), stream[off:off + MSS], what=what)

    order = (1, 0) if args.scenario == "lost-first" else (0, 1)
    segment(order[0], f"segment {order[0] + 1}")
    reply = srv.expect(lambda s: s.sport == k_port2, args.gap_s)
    time.sleep(max(0.0, args.gap_s - (time.monotonic() - third_at)))
    segment(order[1], f"segment {order[1] + 1}")
    covered = srv.expect(lambda s: s.sport == k_port2 and not s.flags & RST
                         and s.ack == (iss2 + 1 + 2 * MSS) & 0xFFFFFFFF, 2.0)
    resets = [s for s in srv.log if s.sport == k_port2 and s.flags & RST]
    rst_opt = suboption(resets[0], MP_TCPRST_SUB) if resets else None
    return {
        "third_ack_at": third_at,
        "first_reply": None if reply is None else {
            "at": reply.at, "flags": reply.flags, "ack_rel": (reply.ack - iss2 - 1) & 0xFFFFFFFF},
        "join_reset": bool(resets),
        "reset_at": resets[0].at if resets else None,
        "reset_reason": rst_opt[3] if rst_opt is not None and len(rst_opt) >= 4 else None,
        "both_acked_at": covered.at if covered else None,
        "sent": srv.sent,
        "token_k": token_k.hex(),
    }


def connect(size: int, timeout_s: float) -> dict:
    """The client application: an MPTCP connection from KERNEL_ADDR, read `size` bytes."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_MPTCP)
    sock.bind((KERNEL_ADDR, 0))
    print(json.dumps({"event": "connecting"}), flush=True)
    sock.settimeout(10)
    sock.connect((PEER_ADDR, PORT))
    started = time.monotonic()
    deadline = started + timeout_s
    total, done_at = 0, None
    while total < size and (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            break
        total += len(chunk)
        if total >= size:
            done_at = time.monotonic()
    sock.close()
    return {"connected_at": started, "bytes": total, "done_at": done_at}


def replay_lab() -> contextlib.AbstractContextManager[tuple[str, str]]:
    """This replay's namespaces: the kernel's client side, with a `subflow` endpoint on
    its second address, and the crafted server."""
    return veth_lab(NS_KERNEL, NS_PEER, DEV_KERNEL, DEV_PEER, [KERNEL_ADDR, JOIN_ADDR],
                    PEER_ADDR, [("limits", "set", "subflows", "2", "add_addr_accepted", "0"),
                                ("endpoint", "add", JOIN_ADDR, "dev", DEV_KERNEL, "subflow")])


def run(scenario: str, gap_s: float, timeout_s: float) -> dict:
    me = [sys.executable, str(Path(__file__).resolve())]
    with replay_lab() as (kernel_mac, peer_mac):
        peer = subprocess.Popen(["ip", "netns", "exec", NS_PEER, *me, "peer",
                                 "--dev", DEV_PEER, "--dst-mac", kernel_mac,
                                 "--src-mac", peer_mac, "--scenario", scenario,
                                 "--gap-s", str(gap_s)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(0.5)  # the peer's packet socket is bound before the SYN goes out
            client = subprocess.run(["ip", "netns", "exec", NS_KERNEL, *me, "connect",
                                     "--size", str(2 * MSS), "--timeout-s", str(timeout_s)],
                                    capture_output=True, text=True, timeout=timeout_s + 60)
            if client.returncode != 0:
                raise RuntimeError(f"client exited {client.returncode}: {client.stderr[-2000:]}")
            out, err = peer.communicate(timeout=60)
            if peer.returncode != 0:
                raise RuntimeError(f"peer exited {peer.returncode}: {err[-2000:]}")
        finally:
            if peer.poll() is None:
                peer.kill()
                peer.wait()
    got = json.loads(client.stdout.strip().splitlines()[-1])
    played = json.loads(out)
    t0 = played["third_ack_at"]

    def rel(t: float | None) -> float | None:
        return None if t is None else round(t - t0, 6)

    first = played["first_reply"]
    return {
        "kernel_release": os.uname().release,
        "scenario": scenario, "gap_s": gap_s,
        "bytes_expected": 2 * MSS, "bytes_received": got["bytes"],
        # seconds after the joined subflow's third ACK reached the server
        "received_all_after_s": rel(got["done_at"]),
        "join_reset": played["join_reset"],
        "reset_after_s": rel(played["reset_at"]),
        "reset_reason": played["reset_reason"],
        "first_reply": None if first is None else {**first, "at": rel(first["at"])},
        "both_acked_after_s": rel(played["both_acked_at"]),
        "sent": [{**s, "at": rel(s["at"])} for s in played["sent"]],
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("run")
    r.add_argument("--scenario", choices=SCENARIOS, default="lost-first")
    r.add_argument("--gap-s", type=float, default=0.3,
                   help="seconds between the third ACK and the second segment sent")
    r.add_argument("--timeout-s", type=float, default=10.0,
                   help="the client application's deadline after connect()")
    c = sub.add_parser("connect")
    c.add_argument("--size", type=int, required=True)
    c.add_argument("--timeout-s", type=float, required=True)
    pe = sub.add_parser("peer")
    pe.add_argument("--dev", required=True)
    pe.add_argument("--dst-mac", required=True)
    pe.add_argument("--src-mac", required=True)
    pe.add_argument("--scenario", choices=SCENARIOS, required=True)
    pe.add_argument("--gap-s", type=float, required=True)
    args = p.parse_args(argv)
    if args.mode == "run":
        result = run(args.scenario, args.gap_s, args.timeout_s)
    elif args.mode == "connect":
        result = connect(args.size, args.timeout_s)
    else:
        result = run_peer(args)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
