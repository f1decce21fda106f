/*
 * The one clock deadlines and timings are measured on: monotonic seconds,
 * which a change of the wall clock never moves.
 *
 * Base of libkvrt-xfer and libkvrt-store: below every layer of both.
 */
#ifndef KVRT_BASE_CLOCK_H
#define KVRT_BASE_CLOCK_H

/* CLOCK_MONOTONIC in seconds (an arbitrary start). */
double base_now(void);

#endif
