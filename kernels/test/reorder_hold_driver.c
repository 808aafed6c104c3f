// SPDX-License-Identifier: GPL-2.0
/* User-space driver for net/ipv4/tcp_reorder_hold.h (the decisions of
 * the reorder hold), used by tests/unit/test_reorder_hold.py. One state
 * (one receiving socket); one command per line, one answer per line:
 *   seg OFO_EMPTY RCV_NXT RCV_WUP  -> action number (TCP_RH_PASS ...)
 *   expire                         -> 1 when a hold ended
 *   hides OFO_EMPTY RCV_NXT        -> 1 when an ACK now leaves out SACKs
 *   state                          -> STATE SEQ
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcp_reorder_hold.h"

int main(void)
{
	char line[256];
	u8 state = TCP_RH_IDLE;
	u32 seq = 0;

	while (fgets(line, sizeof(line), stdin)) {
		char cmd[16];
		unsigned long a = 0, b = 0, c = 0;
		int n = sscanf(line, "%15s %lu %lu %lu", cmd, &a, &b, &c);

		if (n >= 4 && !strcmp(cmd, "seg"))
			printf("%d\n", tcp_rh_on_segment(&state, &seq, a != 0,
							 (u32)b, (u32)c));
		else if (n >= 1 && !strcmp(cmd, "expire"))
			printf("%d\n", tcp_rh_expire(&state));
		else if (n >= 3 && !strcmp(cmd, "hides"))
			printf("%d\n", tcp_rh_hides_sacks(state, seq, a != 0, (u32)b));
		else if (n >= 1 && !strcmp(cmd, "state"))
			printf("%u %u\n", state, seq);
		else
			printf("error %s", line);
		fflush(stdout);
	}
	return 0;
}
