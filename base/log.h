/*
 * A library's log: one line per event a user should see (a peer refused, a
 * tier that went down), to the caller's callback, or to stderr (warnings
 * and errors only) under the library's name.  Control bytes are escaped:
 * a path, a peer's or a server's words may be in the line.
 *
 * Base of libkvrt-xfer and libkvrt-store: below every layer of both.
 */
#ifndef KVRT_BASE_LOG_H
#define KVRT_BASE_LOG_H

#include <kvrt/runtime.h>

/* Where a library's lines go: fn (NULL: stderr) with user. */
struct base_log {
    void (*fn)(void *user, enum kvrt_log_level level, const char *message);
    void *user;
};

/* One line from `lib` ("kvrt-xfer", "kvrt-store") through log (NULL or no
 * callback: stderr, levels up to warnings). */
void base_log(const struct base_log *log, const char *lib, enum kvrt_log_level level, const char *fmt, ...)
    KVRT_PRINTF(4, 5);

#endif
