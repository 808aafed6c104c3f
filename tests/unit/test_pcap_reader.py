"""The pcap reader against scapy's own dissection of scapy-crafted captures."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Raw
from scapy.utils import PcapWriter

from pathdiv.analysis.capture.pcap import (
    RECORD_HEADER,
    CaptureFormatError,
    TruncatedCaptureWarning,
    int_to_ip,
    ip_to_int,
    mptcp_token,
    read_pcap,
    read_records,
)
from tests.support.pcap_synth import mp_capable, mp_join_syn

KEY_A, KEY_B = 0x0102030405060708, 0xA1A2A3A4A5A6A7A8


def crafted() -> list:
    """A mix of frames: options, VLAN, IP options, UDP, ARP, a big (truncated) segment."""
    base = Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02")
    return [
        base / IP(src="10.0.0.2", dst="10.3.1.3", id=7) / TCP(sport=40000, dport=80, flags="S",
                                                              seq=1, options=[mp_capable()]),
        base / IP(src="10.3.1.3", dst="10.0.0.2", id=8)
        / TCP(sport=80, dport=40000, flags="SA", seq=99, ack=2, options=[mp_capable(KEY_B)]),
        base / IP(src="10.0.0.2", dst="10.3.1.3")
        / TCP(sport=40000, dport=80, flags="A", seq=2, ack=100,
              options=[("NOP", None), ("NOP", None), ("Timestamp", (5, 6)),
                       mp_capable(KEY_A, KEY_B)]),
        base / IP(src="10.0.0.34", dst="10.3.1.3")
        / TCP(sport=40001, dport=80, flags="S", seq=4000000000,
              options=[("MSS", 1460), mp_join_syn(mptcp_token(KEY_B), 77, 1)]),
        base / IP(src="10.3.1.3", dst="10.0.0.2", id=65535)
        / TCP(sport=80, dport=40000, flags="PA", seq=4294967000, ack=100)
        / Raw(b"x" * 1448),
        base / Dot1Q(vlan=5) / IP(src="10.1.0.2", dst="10.2.0.3", options=[b"\x01" * 4])
        / TCP(sport=1, dport=2, flags="FA") / Raw(b"abc"),
        base / IP(src="10.0.0.2", dst="10.0.0.3") / UDP(sport=5, dport=6) / Raw(b"u" * 30),
        base / ARP(psrc="10.0.0.2", pdst="10.0.0.3"),
    ]


def write(path: Path, packets: list, snaplen: int = 160, **kw) -> list[float]:
    times = [1700000000 + i * 0.001 + 0.000001 * i for i in range(len(packets))]
    w = PcapWriter(str(path), linktype=1, snaplen=snaplen, **kw)
    w.write_header(None)
    for t, p in zip(times, packets, strict=True):
        raw = bytes(p)
        sec = int(t)
        frac = round((t - sec) * (1e9 if kw.get("nano") else 1e6))
        w.write_packet(raw[:snaplen], sec=sec, usec=frac, wirelen=len(raw))
    w.close()
    return times


@pytest.mark.parametrize(
    "kw", [{}, {"nano": True}, {"endianness": ">"}], ids=["usec-le", "nsec", "big-endian"]
)
def test_fields_match_scapy_dissection(tmp_path: Path, kw: dict) -> None:
    packets = crafted()
    times = write(tmp_path / "x.pcap", packets, **kw)
    t = read_pcap(tmp_path / "x.pcap")
    assert len(t) == len(packets)
    np.testing.assert_allclose(t["ts"], times, atol=1.5e-6, rtol=0)
    for row, pkt in zip(t.itertuples(), packets, strict=True):
        assert row.wire_len == len(pkt)
        if IP not in pkt:
            assert row.proto == 0 and not row.tcp_ok
            continue
        ip = IP(bytes(pkt[IP]))  # rebuilt, so computed fields (len, ihl) are filled in
        assert (int_to_ip(row.src), int_to_ip(row.dst)) == (ip.src, ip.dst)
        assert (row.proto, row.ip_id, row.ip_len) == (ip.proto, ip.id, ip.len)
        assert row.tcp_ok == (TCP in ip)
        if TCP in ip:
            tcp = ip[TCP]
            assert (row.sport, row.dport, row.seq, row.ack) == (
                tcp.sport, tcp.dport, tcp.seq, tcp.ack
            )
            assert row.flags == int(tcp.flags)
            assert row.tcp_hlen == tcp.dataofs * 4
            assert row.payload == len(tcp.payload)


def test_mptcp_keys_and_join_token(tmp_path: Path) -> None:
    write(tmp_path / "x.pcap", crafted())
    t = read_pcap(tmp_path / "x.pcap")
    assert list(t["mp_subtype"][:5]) == [0, 0, 0, 1, -1]
    assert list(t["mp_key_a"][:3]) == [0, KEY_B, KEY_A]
    assert list(t["mp_key_b"][:3]) == [0, 0, KEY_B]
    assert t["mp_token"][3] == mptcp_token(KEY_B)


def test_keys_agree_with_tshark(tmp_path: Path) -> None:
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed (Debian package tshark)")
    write(tmp_path / "x.pcap", crafted())
    out = subprocess.run(
        ["tshark", "-n", "-r", str(tmp_path / "x.pcap"), "-T", "fields",
         "-e", "tcp.options.mptcp.sendkey", "-e", "tcp.options.mptcp.recvtok"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    t = read_pcap(tmp_path / "x.pcap")
    for line, key, token in zip(out, t["mp_key_a"], t["mp_token"], strict=False):
        sendkey, _, recvtok = line.partition("\t")
        assert (int(sendkey, 0) if sendkey else 0) == key
        assert (int(recvtok, 0) if recvtok else 0) == token


def test_truncated_file_warns_and_keeps_packets_before_the_cut(tmp_path: Path) -> None:
    packets = crafted()
    write(tmp_path / "full.pcap", packets)
    whole = read_pcap(tmp_path / "full.pcap")
    data = (tmp_path / "full.pcap").read_bytes()
    # Cut inside the 5th record: 24-byte header, then 16 + incl bytes per record.
    offset = 24
    for p in packets[:4]:
        offset += 16 + min(len(p), 160)
    (tmp_path / "cut.pcap").write_bytes(data[: offset + 30])
    with pytest.warns(TruncatedCaptureWarning, match=rf"cut at byte {offset} .*kept the 4 packets"):
        cut = read_pcap(tmp_path / "cut.pcap")
    assert cut.equals(whole.iloc[:4])


def test_file_cut_inside_header_or_empty_gives_no_packets(tmp_path: Path) -> None:
    (tmp_path / "empty.pcap").write_bytes(b"")
    (tmp_path / "short.pcap").write_bytes(b"\xd4\xc3\xb2\xa1\x02\x00")
    for name in ("empty.pcap", "short.pcap"):
        with pytest.warns(TruncatedCaptureWarning):
            assert read_pcap(tmp_path / name).empty


def test_pcapng_and_unknown_files_are_refused_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "a.pcapng").write_bytes(b"\x0a\x0d\x0d\x0a" + bytes(40))
    with pytest.raises(CaptureFormatError, match=r"is pcapng; .*editcap -F pcap"):
        read_pcap(tmp_path / "a.pcapng")
    (tmp_path / "b.pcap").write_bytes(b"hello world, not a capture")
    with pytest.raises(CaptureFormatError, match=r"unknown magic 68656c6c"):
        read_pcap(tmp_path / "b.pcap")


def test_address_conversion_round_trips() -> None:
    assert ip_to_int("10.3.1.3") == (10 << 24) | (3 << 16) | (1 << 8) | 3
    assert int_to_ip(ip_to_int("192.168.255.1")) == "192.168.255.1"


def test_mptcp_tokens_match_wireshark() -> None:
    # Wireshark's mptcp.expected_token: a Linux 6.18 (MPTCP v1, SHA-256) server key and
    # the join token its client sent; and a crafted v0 (SHA-1) MP_CAPABLE key.
    assert mptcp_token(2433742806934540232) == 3060958171
    assert mptcp_token(0x0102030405060708, version=0) == 3713500092


def test_short_frame_at_the_end_of_the_file(tmp_path: Path) -> None:
    from scapy.layers.inet import ICMP

    icmp = Ether() / IP(src="10.0.0.2", dst="10.3.1.3") / ICMP()  # 42 bytes, no TCP
    write(tmp_path / "x.pcap", [crafted()[0], icmp])
    t = read_pcap(tmp_path / "x.pcap")
    assert list(t["proto"]) == [6, 1] and list(t["tcp_ok"]) == [True, False]
    assert t["ack"][1] == 0 and t["wire_len"][1] == 42


@pytest.mark.parametrize("kw", [{}, {"endianness": ">"}], ids=["little", "big-endian"])
def test_read_records_gives_each_frame_row_for_row_with_read_pcap(tmp_path: Path,
                                                                  kw: dict) -> None:
    """What scripts walk beyond the table (every TCP option): the i-th record's frame is
    the i-th row's packet, a cut last record is left out as read_pcap leaves it out, and
    what read_pcap refuses is refused."""
    packets = crafted()
    write(tmp_path / "x.pcap", packets, **kw)
    data, offsets, link_header = read_records(tmp_path / "x.pcap")
    assert link_header == 14 and len(offsets) == len(read_pcap(tmp_path / "x.pcap"))
    for off, pkt in zip(offsets, packets, strict=True):
        frame = data[int(off) + RECORD_HEADER:][:min(len(pkt), 160)]
        assert frame == bytes(pkt)[:160]
    (tmp_path / "cut.pcap").write_bytes(data[:int(offsets[-1]) + 20])
    assert len(read_records(tmp_path / "cut.pcap").offsets) == len(packets) - 1
    (tmp_path / "empty.pcap").write_bytes(b"")
    assert len(read_records(tmp_path / "empty.pcap").offsets) == 0
    (tmp_path / "a.pcapng").write_bytes(b"\x0a\x0d\x0d\x0a" + bytes(40))
    with pytest.raises(CaptureFormatError, match="is pcapng"):
        read_records(tmp_path / "a.pcapng")
