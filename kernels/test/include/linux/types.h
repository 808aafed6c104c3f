/* SPDX-License-Identifier: GPL-2.0 */
/* User-space stand-in for <linux/types.h>: just what sched_rb_alloc.[ch]
 * use, so the kernel's allocation code compiles unchanged in the test
 * driver (rb_alloc_driver.c).
 */
#ifndef PATHDIV_TEST_LINUX_TYPES_H
#define PATHDIV_TEST_LINUX_TYPES_H

#include <stdbool.h>
#include <stdint.h>

typedef uint8_t u8;
typedef uint32_t u32;
typedef uint64_t u64;

#endif
