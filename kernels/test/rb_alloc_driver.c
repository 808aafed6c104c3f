// SPDX-License-Identifier: GPL-2.0
/* User-space driver for net/mptcp/sched_rb_alloc.c (the rb scheduler's
 * allocation arithmetic), used by tests/unit/test_rb_alloc.py.
 *
 * Reads one command per line on stdin and answers one line on stdout:
 *   params RESOLUTION EQUAL_PCT REFRESH_SRTTS DEFAULT_RTT_US   -> ok
 *   compute NOW_US ID:RTT_US ...    -> slot subflow indices of the pattern
 *   equal NOW_US ID ...             -> same, equal shares (roundrobin)
 *   stale NOW_US ID ...             -> 1 when the pattern must be recomputed
 *   next ROOM_MASK QUEUE_MASK       -> subflow index for the next packet, -1
 * Masks are decimal bit masks over subflow indices.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_rb_alloc.h"

static void print_pattern(const struct mptcp_rb_alloc *alloc, int len)
{
	int k;

	for (k = 0; k < len; k++)
		printf(k ? " %u" : "%u", alloc->slot[k]);
	printf("\n");
}

int main(void)
{
	struct mptcp_rb_params params = {
		.resolution = 4, .equal_pct = 20, .refresh_srtts = 4, .default_rtt_us = 1000,
	};
	struct mptcp_rb_alloc alloc;
	char line[4096];

	memset(&alloc, 0, sizeof(alloc));
	while (fgets(line, sizeof(line), stdin)) {
		u32 ids[MPTCP_RB_MAX_SUBFLOWS + 1], rtt[MPTCP_RB_MAX_SUBFLOWS + 1];
		char *cmd = strtok(line, " \n"), *tok;
		unsigned long long now = 0;
		unsigned int nr = 0;

		if (!cmd)
			continue;
		if (!strcmp(cmd, "params")) {
			params.resolution = strtoul(strtok(NULL, " \n"), NULL, 10);
			params.equal_pct = strtoul(strtok(NULL, " \n"), NULL, 10);
			params.refresh_srtts = strtoul(strtok(NULL, " \n"), NULL, 10);
			params.default_rtt_us = strtoul(strtok(NULL, " \n"), NULL, 10);
			printf("ok\n");
		} else if (!strcmp(cmd, "next")) {
			u32 room = strtoul(strtok(NULL, " \n"), NULL, 10);
			u32 queue = strtoul(strtok(NULL, " \n"), NULL, 10);

			printf("%d\n", mptcp_rb_alloc_next(&alloc, room, queue));
		} else if (!strcmp(cmd, "compute") || !strcmp(cmd, "equal") ||
			   !strcmp(cmd, "stale")) {
			now = strtoull(strtok(NULL, " \n"), NULL, 10);
			while ((tok = strtok(NULL, " \n")) && nr <= MPTCP_RB_MAX_SUBFLOWS) {
				char *colon = strchr(tok, ':');

				ids[nr] = strtoul(tok, NULL, 10);
				rtt[nr] = colon ? strtoul(colon + 1, NULL, 10) : 0;
				nr++;
			}
			if (!strcmp(cmd, "stale"))
				printf("%d\n", mptcp_rb_alloc_stale(&alloc, ids, nr, now));
			else
				print_pattern(&alloc, mptcp_rb_alloc_compute(&alloc, &params, ids,
						!strcmp(cmd, "equal") ? NULL : rtt, nr, now));
		} else {
			printf("error: unknown command %s\n", cmd);
		}
		fflush(stdout);
	}
	return 0;
}
