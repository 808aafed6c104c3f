// SPDX-License-Identifier: GPL-2.0
/* User-space driver for net/mptcp/cc_olia_inc.c (the window arithmetic of
 * the olia coupled congestion control), used by tests/unit/test_olia_inc.py.
 *
 * Reads one line per question on stdin and answers one line on stdout:
 *   OWN CWND:RTT_US:ELL ...   -> window change per acked packet, 1/2^16
 * OWN is the index of the asking subflow among the listed ones.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_olia_inc.h"

int main(void)
{
	char line[4096];

	while (fgets(line, sizeof(line), stdin)) {
		struct mptcp_olia_path paths[MPTCP_OLIA_MAX_SUBFLOWS];
		char *tok = strtok(line, " \n");
		int own, n = 0;

		if (!tok) {
			printf("error empty line\n");
			fflush(stdout);
			continue;
		}
		own = atoi(tok);
		memset(paths, 0, sizeof(paths));
		while ((tok = strtok(NULL, " \n")) && n < MPTCP_OLIA_MAX_SUBFLOWS) {
			if (sscanf(tok, "%u:%u:%u", &paths[n].cwnd, &paths[n].rtt_us,
				   &paths[n].ell) != 3)
				break;
			n++;
		}
		printf("%d\n", mptcp_olia_increase(paths, MPTCP_OLIA_MAX_SUBFLOWS, own));
		fflush(stdout);
	}
	return 0;
}
