"""rtt_ms: data packet to the ACK covering it, at the sender's link, Karn's rule."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pathdiv.analysis.metrics.transfer import open_subflows, rtt_samples_ms

ISN = 4_294_967_000  # the sequence numbers wrap inside the transfer


def data(rows: list[tuple[int, int, int, float]]) -> pd.DataFrame:
    """(subflow, offset from ISN, payload, ts)."""
    return pd.DataFrame({"subflow": [r[0] for r in rows],
                         "seq": [(ISN + r[1]) % (1 << 32) for r in rows],
                         "payload": [r[2] for r in rows], "ts": [r[3] for r in rows]})


def acks(rows: list[tuple[int, int, float]]) -> pd.DataFrame:
    return pd.DataFrame({"subflow": [r[0] for r in rows],
                         "ack": [(ISN + r[1]) % (1 << 32) for r in rows],
                         "ts": [r[2] for r in rows]})


def test_each_packet_is_timed_to_the_first_ack_covering_its_end() -> None:
    sent = data([(1, 0, 1000, 0.000), (1, 1000, 1000, 0.001), (1, 2000, 1000, 0.002)])
    # a delayed ACK covers the first two at once; the third gets its own
    back = acks([(1, 2000, 0.0050), (1, 3000, 0.0070)])
    assert np.allclose(rtt_samples_ms(sent, back), [5.0, 4.0, 5.0])


def test_a_retransmitted_range_gives_no_sample_neither_copy() -> None:
    sent = data([(1, 0, 1000, 0.000), (1, 1000, 1000, 0.001), (1, 1000, 1000, 0.010)])
    back = acks([(1, 1000, 0.003), (1, 2000, 0.012)])
    assert np.allclose(rtt_samples_ms(sent, back), [3.0])


def test_subflows_are_timed_against_their_own_acks() -> None:
    sent = data([(1, 0, 1000, 0.0), (2, 0, 1000, 0.0)])
    back = acks([(2, 1000, 0.002), (1, 1000, 0.008)])
    assert sorted(rtt_samples_ms(sent, back).round(6)) == [2.0, 8.0]


def test_an_ack_sent_before_the_packet_does_not_count() -> None:
    # the ACK of the handshake covers nothing; an unacknowledged tail gives no sample
    sent = data([(1, 0, 1000, 0.004), (1, 1000, 1000, 0.005)])
    back = acks([(1, 0, 0.001), (1, 1000, 0.006)])
    assert np.allclose(rtt_samples_ms(sent, back), [2.0])


def test_a_window_closed_to_one_packet_is_not_open() -> None:
    # subflow 1 keeps three segments in flight to the end; subflow 2 sends one segment
    # per round trip from the start on (mptcp-d's closed window)
    rows, back = [], []
    for k in range(10):
        t = k * 0.010
        rows += [(1, 3000 * k + 1000 * i, 1000, t + i * 1e-4) for i in range(3)]
        back += [(1, 3000 * (k + 1), t + 0.009)]
        rows += [(2, 1000 * k, 1000, t + 5e-4)]
        back += [(2, 1000 * (k + 1), t + 0.009)]
    sent = data(sorted(rows, key=lambda r: r[3]))
    assert open_subflows(sent, acks(sorted(back, key=lambda r: r[2]))) == 1


def test_data_never_acknowledged_is_in_flight() -> None:
    rows = [(1, 1000 * k, 1000, 0.001 * k) for k in range(10)]  # never acked: all in flight
    assert open_subflows(data(rows), acks([])) == 1
