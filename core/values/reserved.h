/* Internal: the reserved bytes at the end of the structs an engine passes in.
 * They must be zero, so that a later API minor can give them a meaning
 * (zero = today's behaviour) and an engine built against that later header
 * gets a clear refusal from an older libkvrt instead of being ignored.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_RESERVED_H
#define KVRT_CORE_RESERVED_H

#include <stddef.h>
#include <stdint.h>

/* KVRT_OK, or KVRT_ERR_INVALID naming `what` (e.g. "kvrt_spec") and the
 * first non-zero byte. */
int kvrt_check_reserved(const uint8_t *bytes, size_t n, const char *what);

#endif
