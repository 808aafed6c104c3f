// SPDX-License-Identifier: GPL-2.0
/* User-space driver for net/mptcp/sched_rb_strict.h (the rbstrict
 * scheduler's sending decision) on top of sched_rb_alloc.c, used by
 * tests/unit/test_rb_strict.py.
 *
 * Reads one command per line on stdin and answers one line on stdout:
 *   compute ID:RTT_US ...   -> slot subflow indices of a new pattern
 *   strict ROOM_MASK        -> rbstrict's subflow for the next packet, -1
 *   next ROOM_MASK          -> rb's subflow for the next packet, -1
 *   pos                     -> the pattern position of the next packet
 * Masks are decimal bit masks over subflow indices. The tunables are rb's
 * defaults (resolution 4, equal_pct 20).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_rb_strict.h"

int main(void)
{
	struct mptcp_rb_params params = {
		.resolution = 4, .equal_pct = 20, .refresh_srtts = 4, .default_rtt_us = 1000,
	};
	struct mptcp_rb_alloc alloc;
	char line[4096];

	memset(&alloc, 0, sizeof(alloc));
	while (fgets(line, sizeof(line), stdin)) {
		u32 ids[MPTCP_RB_MAX_SUBFLOWS], rtt[MPTCP_RB_MAX_SUBFLOWS];
		char *cmd = strtok(line, " \n"), *tok;
		unsigned int nr = 0;
		int k, len;

		if (!cmd)
			continue;
		if (!strcmp(cmd, "compute")) {
			while ((tok = strtok(NULL, " \n")) && nr < MPTCP_RB_MAX_SUBFLOWS) {
				char *colon = strchr(tok, ':');

				ids[nr] = strtoul(tok, NULL, 10);
				rtt[nr] = colon ? strtoul(colon + 1, NULL, 10) : 0;
				nr++;
			}
			len = mptcp_rb_alloc_compute(&alloc, &params, ids, rtt, nr, 0);
			for (k = 0; k < len; k++)
				printf(k ? " %u" : "%u", alloc.slot[k]);
			printf("\n");
		} else if (!strcmp(cmd, "strict")) {
			printf("%d\n", mptcp_rb_alloc_next_strict(
				&alloc, strtoul(strtok(NULL, " \n"), NULL, 10)));
		} else if (!strcmp(cmd, "next")) {
			printf("%d\n", mptcp_rb_alloc_next(
				&alloc, strtoul(strtok(NULL, " \n"), NULL, 10), 0));
		} else if (!strcmp(cmd, "pos")) {
			printf("%u\n", alloc.pos);
		} else {
			printf("error: unknown command %s\n", cmd);
		}
		fflush(stdout);
	}
	return 0;
}
