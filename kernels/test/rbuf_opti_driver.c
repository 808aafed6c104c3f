// SPDX-License-Identifier: GPL-2.0
/* User-space driver for net/mptcp/sched_rbuf_opti.h (the decisions of
 * minrtt's receive-buffer optimisation, MPTCP v0.94's), used by
 * tests/unit/test_rbuf_opti.py.
 *
 * Reads one command per line on stdin and answers one line on stdout:
 *   may NOW_US LAST_US FAST_SRTT_US  -> 1 if a penalisation may happen now
 *   halve CWND SSTHRESH              -> the new cwnd and ssthresh
 *   resend CWND SRTT FAST_SRTT       -> 1 if the fast subflow sends it again
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_rbuf_opti.h"

static unsigned long long arg(void)
{
	char *tok = strtok(NULL, " \n");

	return tok ? strtoull(tok, NULL, 10) : 0;
}

int main(void)
{
	char line[256];

	while (fgets(line, sizeof(line), stdin)) {
		char *cmd = strtok(line, " \n");

		if (!cmd)
			continue;
		if (!strcmp(cmd, "may")) {
			u64 now = arg(), last = arg();

			printf("%d\n", mptcp_rbuf_may_penalise(now, last, (u32)arg()));
		} else if (!strcmp(cmd, "halve")) {
			u32 cwnd = (u32)arg(), ssthresh = (u32)arg(), out;

			cwnd = mptcp_rbuf_halve(cwnd, ssthresh, &out);
			printf("%u %u\n", cwnd, out);
		} else if (!strcmp(cmd, "resend")) {
			u32 cwnd = (u32)arg(), srtt = (u32)arg();

			printf("%d\n", mptcp_rbuf_resend(cwnd, srtt, (u32)arg()));
		} else {
			printf("error: unknown command %s\n", cmd);
		}
		fflush(stdout);
	}
	return 0;
}
