// SPDX-License-Identifier: GPL-2.0
/* User-space driver for net/core/juggler_queue.c (Juggler's decisions),
 * used by tests/unit/test_juggler.py. It keeps JUGGLER_MAX_FLOWS flow slots
 * (flow F has the key {F, 0, 0}); a packet is a number the test chooses.
 * One command per line, one answer per line (times in ns):
 *   times INSEQ_NS OOO_NS              -> ok
 *   start F SEQ NOW                    -> ok (the slot gets flow F's state)
 *   free F                             -> ok (the slot is empty again)
 *   arrive F SEQ LEN FIN PKT NOW       -> JUGGLER_PASS/_HELD/_HELD_OOO
 *   due F NOW                          -> COUNT DEADLINE
 *   pop F NOW                          -> PKT HELD_NS
 *   state F                            -> SEQ_NEXT HELD SYNCED
 *   skips F                            -> 1 when the next pop gives up a hole
 *   slot N KEY NOW IDLE_NS             -> INDEX KIND (among slots 0..N-1)
 *   max                                -> JUGGLER_MAX_HELD JUGGLER_MAX_FLOWS
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "juggler_queue.h"

static struct juggler_flow flows[JUGGLER_MAX_FLOWS];
static struct juggler_flow *slots[JUGGLER_MAX_FLOWS];

static struct juggler_flow *flow(unsigned long long f)
{
	if (f >= JUGGLER_MAX_FLOWS || !slots[f])
		return NULL;
	return slots[f];
}

int main(void)
{
	struct juggler_times times = { 0, 1000000 };
	char line[256];

	while (fgets(line, sizeof(line), stdin)) {
		unsigned long long a[6] = { 0 };
		struct juggler_flow *f;
		char cmd[16];
		int n = sscanf(line, "%15s %llu %llu %llu %llu %llu %llu", cmd,
			       &a[0], &a[1], &a[2], &a[3], &a[4], &a[5]) - 1;

		f = n >= 1 ? flow(a[0]) : NULL;
		if (n == 2 && !strcmp(cmd, "times")) {
			times.inseq_ns = a[0];
			times.ooo_ns = a[1];
			printf("ok\n");
		} else if (n == 3 && !strcmp(cmd, "start") &&
			   a[0] < JUGGLER_MAX_FLOWS) {
			u32 key[3] = { (u32)a[0], 0, 0 };

			slots[a[0]] = &flows[a[0]];
			juggler_flow_start(slots[a[0]], key, (u32)a[1], a[2]);
			printf("ok\n");
		} else if (n == 1 && !strcmp(cmd, "free") && f) {
			slots[a[0]] = NULL;
			printf("ok\n");
		} else if (n == 6 && !strcmp(cmd, "arrive") && f &&
			   !juggler_full(f)) {
			printf("%d\n", juggler_arrive(f, (u32)a[1], (u32)a[2],
						      a[3] != 0,
						      (void *)(uintptr_t)a[4],
						      a[5]));
		} else if (n == 2 && !strcmp(cmd, "due") && f) {
			u64 deadline;
			unsigned int due = juggler_due(f, a[1], &times, &deadline);

			printf("%u %llu\n", due, (unsigned long long)deadline);
		} else if (n == 2 && !strcmp(cmd, "pop") && f && f->held) {
			u64 held_ns;
			void *pkt = juggler_pop(f, a[1], &held_ns);

			printf("%llu %llu\n", (unsigned long long)(uintptr_t)pkt,
			       (unsigned long long)held_ns);
		} else if (n == 1 && !strcmp(cmd, "skips") && f) {
			printf("%d\n", juggler_skips_hole(f));
		} else if (n == 1 && !strcmp(cmd, "state") && f) {
			printf("%u %u %u\n", f->seq_next, f->held, f->synced);
		} else if (n == 4 && !strcmp(cmd, "slot") &&
			   a[0] <= JUGGLER_MAX_FLOWS) {
			u32 key[3] = { (u32)a[1], 0, 0 };
			int kind, i = juggler_slot(slots, (unsigned int)a[0],
						   key, a[2], a[3], &kind);

			printf("%d %d\n", i, kind);
		} else if (n == 0 && !strcmp(cmd, "max")) {
			printf("%d %d\n", JUGGLER_MAX_HELD, JUGGLER_MAX_FLOWS);
		} else {
			printf("error %s", line);
		}
		fflush(stdout);
	}
	return 0;
}
