// SPDX-License-Identifier: GPL-2.0
/* User-space driver for net/mptcp/cc_lia_wnd.c (the window arithmetic of
 * the lia coupled congestion control), used by tests/unit/test_lia_wnd.py.
 *
 * Reads one line per question on stdin and answers one line on stdout:
 *   OWN_CWND CWND:RTT_US ...   -> packets acked per one-packet increase
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_lia_wnd.h"

int main(void)
{
	char line[4096];

	while (fgets(line, sizeof(line), stdin)) {
		struct mptcp_lia_path paths[MPTCP_LIA_MAX_SUBFLOWS];
		char *tok = strtok(line, " \n");
		unsigned long own;
		int n = 0;

		if (!tok) {
			printf("error empty line\n");
			fflush(stdout);
			continue;
		}
		own = strtoul(tok, NULL, 10);
		memset(paths, 0, sizeof(paths));
		while ((tok = strtok(NULL, " \n")) && n < MPTCP_LIA_MAX_SUBFLOWS) {
			char *colon = strchr(tok, ':');

			if (!colon)
				break;
			paths[n].cwnd = (u32)strtoul(tok, NULL, 10);
			paths[n].rtt_us = (u32)strtoul(colon + 1, NULL, 10);
			n++;
		}
		printf("%u\n", mptcp_lia_ai_window(paths, MPTCP_LIA_MAX_SUBFLOWS, (u32)own));
		fflush(stdout);
	}
	return 0;
}
