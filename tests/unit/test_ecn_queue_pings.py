"""benchmarks/ecn_queue.py reads the queue on bmv2 from ping delays: only the pings sent
while both senders were past slow start count (the window the nftables plane samples)."""

from __future__ import annotations

from tests.conftest import load_script

ecn_queue = load_script("benchmarks/ecn_queue.py")

PING = """PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.
64 bytes from 10.0.0.2: icmp_seq=1 ttl=61 time=0.512 ms
64 bytes from 10.0.0.2: icmp_seq=2 ttl=61 time=3.10 ms
64 bytes from 10.0.0.2: icmp_seq=4 ttl=61 time=9.87 ms
64 bytes from 10.0.0.2: icmp_seq=5 ttl=61 time=11.2 ms

--- 10.0.0.2 ping statistics ---
5 packets transmitted, 4 received, 20% packet loss, time 403ms
rtt min/avg/max/mdev = 0.512/6.170/11.200/4.448 ms
"""


def test_replies_keep_their_sequence_numbers_and_skip_the_lost_ping():
    assert ecn_queue.ping_replies(PING) == [(1, 0.512), (2, 3.10), (4, 9.87), (5, 11.2)]


def test_only_pings_sent_inside_the_window_count():
    replies = ecn_queue.ping_replies(PING)
    # sent at 0, 0.1, 0.3, 0.4 s: a window from 0.25 s to 0.4 s keeps the last two
    assert ecn_queue.steady_rtts_ms(replies, 0.1, 0.25, 0.4) == [9.87, 11.2]
    assert ecn_queue.steady_rtts_ms(replies, 0.1, 0.0, 10.0) == [0.512, 3.10, 9.87, 11.2]
