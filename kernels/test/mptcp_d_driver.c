// SPDX-License-Identifier: GPL-2.0
/* User-space driver for net/mptcp/cc_mptcp_d_alg.c (the arithmetic of the
 * mptcp-d congestion control), used by tests/unit/test_mptcp_d.py.
 *
 * Reads one command per line on stdin and answers one line on stdout:
 *   W SELF CWND:RTT_US ...     -> packets acked per one-packet increase
 *                                 of slot SELF (0-based)
 *   P CANDIDATES ALPHA_PCT BETA_PCT
 *                              -> "ok"; a new connection with these
 *                                 parameters (no subflow state, TRIG off)
 *   S SLOT RTT_US              -> "keep", "trigger" or "close" for one RTT
 *                                 sample of subflow SLOT (1-based), with
 *                                 the connection updated as the kernel
 *                                 does: a trigger sets the reference, a
 *                                 closed subflow takes no more samples
 *                                 ("closed")
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_mptcp_d_alg.h"

static struct mptcp_d_ese_sub subs[MPTCP_D_MAX_SUBFLOWS + 1];
static int closed[MPTCP_D_MAX_SUBFLOWS + 1];
static u32 word, candidates = 80, alpha_pct = 130, beta_pct = 10;

static void window(char *rest)
{
	struct mptcp_d_path paths[MPTCP_D_MAX_SUBFLOWS];
	char *tok = strtok(rest, " \n");
	int self, n = 0;

	if (!tok) {
		printf("error no slot\n");
		return;
	}
	self = atoi(tok);
	memset(paths, 0, sizeof(paths));
	while ((tok = strtok(NULL, " \n")) && n < MPTCP_D_MAX_SUBFLOWS) {
		char *colon = strchr(tok, ':');

		if (!colon)
			break;
		paths[n].cwnd = (u32)strtoul(tok, NULL, 10);
		paths[n].rtt_us = (u32)strtoul(colon + 1, NULL, 10);
		n++;
	}
	printf("%u\n", mptcp_d_ai_window(paths, n, self));
}

static void sample(char *rest)
{
	unsigned long slot, rtt;

	if (sscanf(rest, "%lu %lu", &slot, &rtt) != 2 || !slot ||
	    slot > MPTCP_D_MAX_SUBFLOWS) {
		printf("error bad sample\n");
		return;
	}
	if (closed[slot]) {
		printf("closed\n");
		return;
	}
	switch (mptcp_d_ese_sample(&subs[slot], word, (u32)slot, (u32)rtt,
				   candidates, alpha_pct, beta_pct)) {
	case MPTCP_D_TRIGGER:
		word = mptcp_d_ese_word((u32)slot, (u32)rtt);
		printf("trigger\n");
		break;
	case MPTCP_D_CLOSE:
		closed[slot] = 1;
		printf("close\n");
		break;
	default:
		printf("keep\n");
	}
}

int main(void)
{
	char line[4096];

	while (fgets(line, sizeof(line), stdin)) {
		unsigned long c, a, b;

		if (line[0] == 'W') {
			window(line + 1);
		} else if (line[0] == 'S') {
			sample(line + 1);
		} else if (line[0] == 'P' &&
			   sscanf(line + 1, "%lu %lu %lu", &c, &a, &b) == 3) {
			memset(subs, 0, sizeof(subs));
			memset(closed, 0, sizeof(closed));
			word = 0;
			candidates = (u32)c;
			alpha_pct = (u32)a;
			beta_pct = (u32)b;
			printf("ok\n");
		} else {
			printf("error unknown command\n");
		}
		fflush(stdout);
	}
	return 0;
}
