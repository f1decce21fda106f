/* Internal: setting the thread's error message. */
#ifndef KVRT_CORE_ERROR_H
#define KVRT_CORE_ERROR_H

#include <kvrt/common.h>

#if defined(__GNUC__) || defined(__clang__)
#define KVRT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define KVRT_PRINTF(a, b)
#endif

/* Record a failure for this thread and return `status`, so that a call site
 * reads `return kvrt_fail(KVRT_ERR_INVALID, "...", ...);`. */
int kvrt_fail(int status, const char *fmt, ...) KVRT_PRINTF(2, 3);

/* Prefix the current message with "<context>: " (keeps the status). */
int kvrt_fail_context(int status, const char *fmt, ...) KVRT_PRINTF(2, 3);

/* Clear this thread's message (on success paths of public entry points). */
void kvrt_clear_error(void);

#endif
