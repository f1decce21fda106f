/*
 * The monotonic clock in seconds (clock.h says why one clock).
 *
 * Base of libkvrt-xfer and libkvrt-store: below every layer of both.
 */
#include <time.h>

#include "clock.h"

double base_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
