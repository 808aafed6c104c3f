/* SPDX-License-Identifier: GPL-2.0 */
/* User-space stand-in for <linux/types.h>: just what the patches' pure
 * arithmetic files (sched_rb_alloc, cc_lia_wnd, cc_olia_inc, juggler_queue,
 * ...) use, so they compile unchanged in the test drivers in kernels/test/.
 */
#ifndef PATHDIV_TEST_LINUX_TYPES_H
#define PATHDIV_TEST_LINUX_TYPES_H

#include <stdbool.h>
#include <stdint.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int32_t s32;
typedef int64_t s64;

#endif
