// SPDX-License-Identifier: GPL-2.0
/* User-space driver for net/mptcp/cc_coupled_bbr_gain.c (the pacing gain
 * arithmetic of the coupled-bbr congestion control), used by
 * tests/unit/test_coupled_bbr_gain.py.
 *
 * Reads one line per question on stdin and answers one line on stdout:
 *   OWN BDP_PKTS BW ...   -> "BETA ALPHA GAIN" (1/2^16, 1/256, 1/256)
 *   cycle GAIN            -> the mean gain of a PROBE_BW cycle (1/256)
 * OWN is the index of the asking subflow among the listed bandwidths.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_coupled_bbr_gain.h"

int main(void)
{
	char line[4096];

	while (fgets(line, sizeof(line), stdin)) {
		u32 bw[MPTCP_CBBR_MAX_SUBFLOWS];
		char *own_tok = strtok(line, " \n");
		char *bdp_tok = strtok(NULL, " \n");
		char *tok;
		u32 beta;
		int n = 0, own;

		if (!own_tok || !bdp_tok) {
			printf("error: OWN BDP BW...\n");
			fflush(stdout);
			continue;
		}
		if (!strcmp(own_tok, "cycle")) {
			printf("%u\n", mptcp_cbbr_cycle_gain(
				       (u32)strtoul(bdp_tok, NULL, 10)));
			fflush(stdout);
			continue;
		}
		own = atoi(own_tok);
		memset(bw, 0, sizeof(bw));
		while ((tok = strtok(NULL, " \n")) && n < MPTCP_CBBR_MAX_SUBFLOWS)
			bw[n++] = (u32)strtoul(tok, NULL, 10);
		beta = mptcp_cbbr_beta(bw, MPTCP_CBBR_MAX_SUBFLOWS, own);
		printf("%u %d %u\n", beta, mptcp_cbbr_alpha(beta),
		       mptcp_cbbr_gain(bw, MPTCP_CBBR_MAX_SUBFLOWS, own,
				       (u32)strtoul(bdp_tok, NULL, 10)));
		fflush(stdout);
	}
	return 0;
}
