"""analysis/capture/dss.py: MPTCP's DSS fields and window scales of scapy-crafted frames."""

from __future__ import annotations

from pathlib import Path

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import PcapWriter

from pathdiv.analysis.capture.dss import dss_fields
from pathdiv.analysis.capture.pcap import read_pcap
from tests.support.pcap_synth import dss

ETH = Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02")


def write(path: Path, frames: list, start: float = 1700000000.0, step: float = 0.001) -> None:
    w = PcapWriter(str(path), linktype=1, snaplen=128)
    w.write_header(None)
    for i, p in enumerate(frames):
        raw = bytes(p)
        t = start + i * step
        w.write_packet(raw[:128], sec=int(t), usec=round((t - int(t)) * 1e6), wirelen=len(raw))
    w.close()


def test_dss_fields_read_mappings_data_acks_and_window_scales(tmp_path: Path) -> None:
    frames = [
        ETH / IP(src="10.1.1.2", dst="10.0.0.2") / TCP(sport=4000, dport=80, flags="S",
                                                       options=[("WScale", 7)]),
        ETH / IP(src="10.0.0.2", dst="10.1.1.2") / TCP(
            sport=80, dport=4000, flags="PA", window=500,
            options=[dss(dack=11, dsn=2**32 + 1000, dlen=1448, wide_dsn=True)]) / Raw(b"x" * 20),
        ETH / IP(src="10.1.1.2", dst="10.0.0.2") / TCP(
            sport=4000, dport=80, flags="A", window=29,
            options=[("NOP", None), ("NOP", None), dss(dack=2**40 + 2448, wide_ack=True)]),
        ETH / IP(src="10.1.1.2", dst="10.0.0.2") / TCP(sport=4000, dport=80, flags="A"),
    ]
    write(tmp_path / "x.pcap", frames)
    f = dss_fields(tmp_path / "x.pcap")
    assert len(f) == len(read_pcap(tmp_path / "x.pcap")) == 4
    assert f["wscale"].tolist() == [7, -1, -1, -1]
    # sequence numbers in their low 32 bits, whatever width the sender chose
    assert f["dsn"].tolist() == [-1, 1000, -1, -1]
    assert f["dlen"].tolist() == [0, 1448, 0, 0]
    assert f["dack"].tolist() == [-1, 11, 2448, -1]
    assert f["win"].tolist()[1:3] == [500, 29]
