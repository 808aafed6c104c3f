// SPDX-License-Identifier: GPL-2.0
/* User-space driver for net/mptcp/sched_arp_plan.c (the decisions of the
 * AR&P scheduler), used by tests/unit/test_arp_plan.py.
 *
 * Reads one line per question on stdin and answers one line on stdout:
 *   split RATE:RTT_US:INFLIGHT ...      -> mask of non-redundant subflows
 *   pick MASK RATE:RTT_US:QUEUED ...    -> chosen index (-1: none)
 *   window MASK RATE:RTT_US[:BW] ...    -> scheduling window, bytes
 *   best RATE:RTT_US ...                -> largest rate / RTT (-1: none)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_arp_plan.h"

int main(void)
{
	char line[4096];

	while (fgets(line, sizeof(line), stdin)) {
		struct mptcp_arp_path paths[MPTCP_ARP_MAX_SUBFLOWS];
		u64 queued[MPTCP_ARP_MAX_SUBFLOWS];
		char *cmd = strtok(line, " \n");
		unsigned long mask = 0;
		char *tok;
		int n = 0;

		memset(paths, 0, sizeof(paths));
		memset(queued, 0, sizeof(queued));
		if (!cmd) {
			printf("error empty line\n");
			fflush(stdout);
			continue;
		}
		if (strcmp(cmd, "split") && strcmp(cmd, "best")) {
			tok = strtok(NULL, " \n");
			mask = tok ? strtoul(tok, NULL, 0) : 0;
		}
		while ((tok = strtok(NULL, " \n")) && n < MPTCP_ARP_MAX_SUBFLOWS) {
			unsigned long long third = 0;

			if (sscanf(tok, "%u:%u:%llu", &paths[n].rate,
				   &paths[n].rtt_us, &third) < 2)
				break;
			paths[n].inflight = (u32)third;
			queued[n] = third;
			if (!strcmp(cmd, "window"))
				paths[n].bw = (u32)third;
			n++;
		}
		if (!strcmp(cmd, "split"))
			printf("%u\n", mptcp_arp_split(paths, n));
		else if (!strcmp(cmd, "pick"))
			printf("%d\n", mptcp_arp_pick(paths, n, (u32)mask, queued));
		else if (!strcmp(cmd, "best"))
			printf("%d\n", mptcp_arp_best(paths, n));
		else if (!strcmp(cmd, "window"))
			printf("%llu\n", (unsigned long long)
			       mptcp_arp_window(paths, n, (u32)mask));
		else
			printf("error unknown command\n");
		fflush(stdout);
	}
	return 0;
}
