// SPDX-License-Identifier: GPL-2.0
/* User-space driver for net/mptcp/cc_coupled_bbr_cycle.c (when a
 * coupled-bbr subflow's PROBE_BW cycle moves to its next phase), used by
 * tests/unit/test_coupled_bbr_gain.py.
 *
 * It plays one subflow pacing through a path whose round trip is RTT_US
 * (a standing queue makes it longer than the min RTT): packets leave at
 * gain * BW, each is acknowledged one RTT later, and every ACK computes
 * BBR's delivery-rate sample as net/ipv4/tcp_rate.c does (data delivered
 * since the packet left, over the longer of its send and ACK intervals)
 * and BBR's round trips (a round starts when an ACK acknowledges data
 * sent after the previous round started). The cycle's phases pace at
 * 1.25, 0.75 and six times ALPHA and move on either by the kernel's rule
 * (mptcp_cbbr_next_phase(), CLOCK "rounds") or by BBR's own clock, one min
 * RTT per phase (CLOCK "minrtt", what coupled-bbr did before).
 *
 * One line per question on stdin, one answer on stdout:
 *   RTT_US MIN_RTT_US ALPHA_256 CLOCK  ->  "MAXRATE MEANGAIN PHASE_US"
 * MAXRATE: the largest delivery-rate sample of the last cycles over BW,
 * MEANGAIN: the time-weighted mean pacing gain over those cycles, both in
 * 1/1000; PHASE_US: the mean length of a phase.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_coupled_bbr_cycle.h"

#define BW_PKTS_PER_MS	10	/* the subflow's BW_i: 10 packets per ms */
#define MAX_PKTS	(1 << 20)
#define CYCLES		12	/* played; the first 4 are the warm-up */
#define WARMUP		4

struct pkt {
	double tx;		/* sent at */
	double acked_at;	/* its ACK arrives at */
	long delivered;		/* delivered count when it was sent */
	double delivered_at;	/* time of the latest ACK when it was sent */
	double first_tx;	/* send time of the latest acked packet then */
};

static struct pkt pkts[MAX_PKTS];

static double gain_of(int idx, double alpha)
{
	return idx == 0 ? 1.25 : idx == 1 ? 0.75 : alpha;
}

static void play(double rtt, double min_rtt, double alpha, bool rounds,
		 double *max_rate, double *mean_gain, double *phase_len)
{
	double now = 0, next_tx = 0, delivered_at = 0, first_tx = 0;
	double cycle_stamp = 0, gain_time = 0, time_sum = 0;
	long sent = 0, acked = 0, delivered = 0, next_rtt_delivered = 0;
	long phases = 0, counted_phases = 0;
	int idx = 2, cycle = 0;
	double phase_start = 0, best = 0;

	while (cycle < CYCLES && sent < MAX_PKTS) {
		double gain = gain_of(idx, alpha);
		bool ack_first = acked < sent && pkts[acked].acked_at <= next_tx;

		if (!ack_first) {
			/* send one packet at the pacing rate of this phase */
			now = next_tx;
			pkts[sent] = (struct pkt){ now, now + rtt, delivered,
						   delivered_at, first_tx };
			sent++;
			next_tx = now + 1.0 / (gain * BW_PKTS_PER_MS);
			continue;
		}
		/* an ACK: BBR's rate sample and round trips, then the clock */
		{
			struct pkt *p = &pkts[acked++];
			double send_us, ack_us, rate;
			bool round_start = false;

			now = p->acked_at;
			delivered++;
			delivered_at = now;
			first_tx = p->tx;
			send_us = p->tx - p->first_tx;
			ack_us = now - p->delivered_at;
			if (send_us < ack_us)
				send_us = ack_us;
			rate = send_us > 0 ?
			       (delivered - p->delivered) / send_us : 0;
			if (cycle >= WARMUP && rate > best)
				best = rate;
			if (p->delivered >= next_rtt_delivered) {
				next_rtt_delivered = delivered;
				round_start = true;
			}
			if (rounds ?
			    mptcp_cbbr_next_phase(round_start,
						  (unsigned long long)((now - cycle_stamp) * 1000),
						  (unsigned int)(min_rtt * 1000)) :
			    now - cycle_stamp > min_rtt) {
				if (cycle >= WARMUP) {
					gain_time += gain * (now - phase_start);
					time_sum += now - phase_start;
					counted_phases++;
				}
				phases++;
				phase_start = now;
				cycle_stamp = delivered_at;
				idx = (idx + 1) % 8;
				if (idx == 0)
					cycle++;
				/* the new gain paces from here on */
				next_tx = now + 1.0 /
					  (gain_of(idx, alpha) * BW_PKTS_PER_MS);
			}
		}
	}
	*max_rate = best / BW_PKTS_PER_MS;
	*mean_gain = time_sum > 0 ? gain_time / time_sum : 0;
	*phase_len = counted_phases ? time_sum / counted_phases : 0;
}

int main(void)
{
	char line[256], clock[32];
	unsigned int rtt_us, min_rtt_us, alpha;

	while (fgets(line, sizeof(line), stdin)) {
		double max_rate, mean_gain, phase_len;

		if (sscanf(line, "%u %u %u %31s", &rtt_us, &min_rtt_us, &alpha,
			   clock) != 4 || !alpha || rtt_us < min_rtt_us) {
			printf("error: RTT_US MIN_RTT_US ALPHA_256 rounds|minrtt\n");
			fflush(stdout);
			continue;
		}
		play(rtt_us / 1000.0, min_rtt_us / 1000.0, alpha / 256.0,
		     !strcmp(clock, "rounds"), &max_rate, &mean_gain,
		     &phase_len);
		printf("%.0f %.0f %.0f\n", max_rate * 1000, mean_gain * 1000,
		       phase_len * 1000);
		fflush(stdout);
	}
	return 0;
}
