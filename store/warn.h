/*
 * How libkvrt-store fails and warns: BASE_FAIL and ULL (base/fail.h), and
 * one warning line under the store's name through the log it was given
 * (base/log.h), whatever bytes a path or a server put in it.
 *
 * Layer 0 of libkvrt-store: every layer includes it.
 */
#ifndef KVRT_STORE_WARN_H
#define KVRT_STORE_WARN_H

#include <kvrt/store.h>

#include "base/fail.h"
#include "base/log.h"

/* One warning line through `log` (a const struct base_log *). */
#define store_warn(log, ...) base_log((log), "kvrt-store", KVRT_LOG_WARNING, __VA_ARGS__)

#endif
