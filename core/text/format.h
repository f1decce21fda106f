/* Internal: printf-style helpers shared by the core's messages
 * (KVRT_PRINTF itself is public, in kvrt/common.h).
 *
 * Layer 1 of libkvrt (core/text/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_FORMAT_H
#define KVRT_CORE_FORMAT_H

#include <kvrt/common.h>

/* uint64_t for "%llu": the one portable spelling across LP64 and LLP64. */
#define ULL(x) ((unsigned long long)(x))

#endif
