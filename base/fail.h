/*
 * How a failure reads: set the thread's kvrt message (kvrt_error_report,
 * libkvrt's entry point for companion libraries) and yield the status,
 * visibly at the call site (as the core's kvrt_fail), so that analysers see
 * a failing helper never returns KVRT_OK.  ULL prints a size with %llu
 * whatever the width of uint64_t.
 *
 * Base of libkvrt-xfer and libkvrt-store: below every layer of both.
 */
#ifndef KVRT_BASE_FAIL_H
#define KVRT_BASE_FAIL_H

#include <kvrt/common.h>

#define BASE_FAIL(status, ...) (kvrt_error_report(KVRT_OK, __VA_ARGS__), (status))
#define ULL(x) ((unsigned long long)(x))

#endif
