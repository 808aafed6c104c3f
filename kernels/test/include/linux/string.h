/* SPDX-License-Identifier: GPL-2.0 */
/* User-space stand-in for <linux/string.h>: memcpy, memmove, memcmp for the
 * patches' pure files (juggler_queue.c) in the test drivers in kernels/test/.
 */
#ifndef PATHDIV_TEST_LINUX_STRING_H
#define PATHDIV_TEST_LINUX_STRING_H

#include <string.h>

#endif
