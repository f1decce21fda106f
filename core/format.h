/* Internal: printf-style helpers shared by the core's messages. */
#ifndef KVRT_CORE_FORMAT_H
#define KVRT_CORE_FORMAT_H

/* Checks a function's format string against its arguments. */
#if defined(__GNUC__) || defined(__clang__)
#define KVRT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define KVRT_PRINTF(a, b)
#endif

/* uint64_t for "%llu": the one portable spelling across LP64 and LLP64. */
#define ULL(x) ((unsigned long long)(x))

#endif
