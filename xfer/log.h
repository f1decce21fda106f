/*
 * The agent's log: one line per event a user should see (a peer refused, a
 * message that failed a check), to the caller's callback, or to stderr.
 *
 * Layer 0 of libkvrt-xfer: every layer may log.
 */
#ifndef KVRT_XFER_LOG_H
#define KVRT_XFER_LOG_H

#include <kvrt/runtime.h>

#include "base.h"

struct xfer_log {
    void (*fn)(void *user, enum kvrt_log_level level, const char *message);
    void *user;
};

void xfer_log(const struct xfer_log *log, enum kvrt_log_level level, const char *fmt, ...) KVRT_PRINTF(3, 4);

#endif
