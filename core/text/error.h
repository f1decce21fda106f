/* Internal: setting the thread's error message.
 *
 * Layer 1 of libkvrt (core/text/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_ERROR_H
#define KVRT_CORE_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#include <kvrt/common.h>

#include "format.h"

/* Format into `out` as one line: printf, then control bytes escaped (the
 * text may quote plugins, files and the environment). */
void kvrt_vformat_line(char *out, size_t size, const char *fmt, va_list ap) KVRT_PRINTF(3, 0);

/* A value to quote in a message ("...%s..."): kvrt_escape_controls's rule,
 * and '"' and '\' escaped too, so the value reads back exactly and the
 * message stays one line.  Long values are cut to fit `size`.  Returns the
 * length written. */
size_t kvrt_quote(char *dst, size_t size, const char *src);

/* Set this thread's message. */
void kvrt_error_set(const char *fmt, ...) KVRT_PRINTF(1, 2);

/* Prefix this thread's message with "<context>: ". */
void kvrt_error_prefix(const char *fmt, ...) KVRT_PRINTF(1, 2);

/* Record a failure and yield `status`, so that a call site reads
 * `return kvrt_fail(KVRT_ERR_INVALID, "...", ...);`.  kvrt_fail_context
 * prefixes the current message instead and keeps the status.
 *
 * Macros, not functions, so that the status is visible at the call site:
 * a static analyser that cannot see into error.c would otherwise assume a
 * failing helper might return KVRT_OK without filling its outputs, and
 * report every caller that trusts them. */
#define kvrt_fail(status, ...) (kvrt_error_set(__VA_ARGS__), (status))
#define kvrt_fail_context(status, ...) (kvrt_error_prefix(__VA_ARGS__), (status))

/* Clear this thread's message (on success paths of public entry points). */
void kvrt_clear_error(void);

#endif
