"""The sock_diag sampler (experiments/traffic/sockdiag.py): its request and its reading of
the kernel's replies, on crafted netlink bytes laid out as Linux 6.12 writes them; and one
live query of this machine's kernel for a socket pair of our own."""

from __future__ import annotations

import socket
import struct

import pytest

from pathdiv.experiments.traffic import sockdiag


def attr(kind: int, payload: bytes) -> bytes:
    head = struct.pack("=HH", 4 + len(payload), kind)
    pad = (-(4 + len(payload))) % 4
    return head + payload + bytes(pad)


def tcp_info(**fields: int) -> bytes:
    buf = bytearray(248)
    for name, value in fields.items():
        off, fmt = sockdiag.TCP_INFO_FIELDS[name]
        struct.pack_into("=" + fmt, buf, off, value)
    return bytes(buf)


def diag_msg(sport: int, dport: int, src: str, dst: str, attrs: bytes) -> bytes:
    sockid = struct.pack("!HH", sport, dport) + socket.inet_aton(src) + bytes(12) + \
        socket.inet_aton(dst) + bytes(12) + bytes(12)
    body = struct.pack("=BBBB", socket.AF_INET, 1, 0, 0) + sockid + bytes(20) + attrs
    return struct.pack("=IHHII", 16 + len(body), sockdiag.SOCK_DIAG_BY_FAMILY, 2, 1, 0) + body


DONE = struct.pack("=IHHIIi", 20, sockdiag.NLMSG_DONE, 2, 1, 0, 0)


def test_the_request_asks_for_info_cc_name_and_bbr():
    req = sockdiag.request()
    length, kind, flags = struct.unpack_from("=IHH", req)
    assert length == len(req) == 16 + 56
    assert kind == sockdiag.SOCK_DIAG_BY_FAMILY
    assert flags & sockdiag.NLM_F_DUMP == sockdiag.NLM_F_DUMP
    family, proto, ext, states = struct.unpack_from("=BBBxI", req, 16)
    assert (family, proto, states) == (socket.AF_INET, socket.IPPROTO_TCP, 1 << 1)
    # BBR answers the VEGASINFO bit with its own tcp_bbr_info
    assert ext == 0b1010 | 0b0100


def test_a_coupled_bbr_subflow_is_read_with_its_bbr_figures():
    info = tcp_info(snd_cwnd=54, unacked=12, rtt_us=98_500, min_rtt_us=50_000,
                    pacing_rate=1_250_000, delivery_rate=625_000, bytes_acked=10**9 + 7,
                    notsent_bytes=4260, total_retrans=1881, ca_state=3, delivered=700_001)
    # bw 4.58 Mbit/s in bytes/s split in lo/hi words, min RTT, gains 0.36 and 2 (x256)
    bw = 572_500
    bbr = struct.pack("=5I", bw & 0xFFFFFFFF, bw >> 32, 50_000, 92, 512)
    msg = diag_msg(5301, 57541, "10.0.0.2", "10.1.1.2",
                   attr(sockdiag.INET_DIAG_INFO, info) +
                   attr(sockdiag.INET_DIAG_CONG, b"coupled-bbr\0") +
                   attr(sockdiag.INET_DIAG_BBRINFO, bbr))
    samples, done = sockdiag.parse([msg + DONE])
    assert done
    (s,) = samples
    assert (s.local, s.lport, s.remote, s.rport) == ("10.0.0.2", 5301, "10.1.1.2", 57541)
    assert s.cc == "coupled-bbr" and s.ca_state == 3
    assert (s.snd_cwnd, s.unacked, s.rtt_us, s.min_rtt_us) == (54, 12, 98_500, 50_000)
    assert s.pacing_mbps == 10.0 and s.delivery_mbps == 5.0
    assert s.bytes_acked == 10**9 + 7 and s.notsent_bytes == 4260 and s.total_retrans == 1881
    assert s.bbr_bw_mbps == pytest.approx(4.58)
    assert s.bbr_pacing_gain == pytest.approx(92 / 256, abs=1e-4)
    assert s.bbr_cwnd_gain == 2.0 and s.bbr_min_rtt_us == 50_000


def test_a_socket_without_bbr_has_no_bbr_figures_and_short_info_is_skipped():
    cubic = diag_msg(1, 2, "10.0.0.1", "10.0.0.3",
                     attr(sockdiag.INET_DIAG_INFO, tcp_info(snd_cwnd=10)) +
                     attr(sockdiag.INET_DIAG_CONG, b"cubic\0"))
    short = diag_msg(3, 4, "10.0.0.1", "10.0.0.4", attr(sockdiag.INET_DIAG_INFO, bytes(40)))
    samples, done = sockdiag.parse([cubic, short])
    assert not done  # no NLMSG_DONE yet: query() reads on
    assert [(s.cc, s.snd_cwnd, s.bbr_bw_mbps) for s in samples] == [("cubic", 10, None)]


def test_a_kernel_error_is_raised():
    err = struct.pack("=IHHIIi", 36, sockdiag.NLMSG_ERROR, 0, 1, 0, -13) + bytes(16)
    with pytest.raises(OSError, match="sock_diag"):
        sockdiag.parse([err])


def test_this_kernel_answers_for_a_socket_pair_of_ours():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as cli:
            conn, _ = srv.accept()
            with conn:
                conn.sendall(b"x" * 50_000)
                got = 0
                while got < 50_000:
                    got += len(cli.recv(65536))
                with sockdiag.open_diag() as diag:
                    mine = [s for s in sockdiag.query(diag) if port in (s.lport, s.rport)]
    sender = [s for s in mine if s.lport == port]
    assert len(mine) == 2 and len(sender) == 1
    assert sender[0].bytes_acked >= 50_000 and sender[0].snd_cwnd > 0 and sender[0].cc
