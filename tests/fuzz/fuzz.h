/*
 * Shared by the fuzz targets and their replay driver.
 *
 * Each target defines LLVMFuzzerTestOneInput.  Under libFuzzer it is driven
 * by coverage; in the replay driver (replay.c) it is called once per file of
 * the seed corpus and of the crash regressions, with any compiler.  A broken
 * invariant calls abort(), which libFuzzer turns into a saved crash input and
 * the replay test into an error.
 */
#ifndef KVRT_TESTS_FUZZ_H
#define KVRT_TESTS_FUZZ_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/common.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#if defined(__GNUC__) || defined(__clang__)
#define FUZZ_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define FUZZ_NORETURN __attribute__((noreturn))
#else
#define FUZZ_PRINTF(a, b)
#define FUZZ_NORETURN
#endif

static inline FUZZ_NORETURN FUZZ_PRINTF(4, 5) void fuzz_fail(const char *file, int line, const char *cond,
                                                             const char *fmt, ...);
static inline void fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n  ", file, line, cond);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n  last kvrt message: %s\n", kvrt_error_message());
    abort();
}

#define FUZZ_CHECK(cond, ...)                                                                                          \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            fuzz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                                                         \
    } while (0)

/* Build with -DFUZZ_TRACE to see which path each input takes. */
#ifdef FUZZ_TRACE
#define FUZZ_LOG(...) fprintf(stderr, __VA_ARGS__)
#else
#define FUZZ_LOG(...) ((void)0)
#endif

/* Every failure of a kvrt call must be one of the documented codes and come
 * with a message a user can act on. */
static inline void fuzz_check_error(int rc, const char *call)
{
    /* KVRT_ERR_INTERNAL means "a bug in kvrt": never acceptable here. */
    FUZZ_CHECK(rc < 0 && rc > KVRT_ERR_INTERNAL, "%s returned %d (%s), not a documented error status", call, rc,
               kvrt_status_name(rc));
    FUZZ_CHECK(kvrt_error_message()[0] != '\0', "%s failed with %s but left no message", call, kvrt_status_name(rc));
}

/* Reads the input front to back; past its end every read yields zeros, so
 * any input, even an empty one, is a complete test case. */
struct fuzz_input {
    const uint8_t *data;
    size_t size;
};

static inline uint8_t fuzz_u8(struct fuzz_input *in)
{
    if (in->size == 0)
        return 0;
    uint8_t v = in->data[0];
    in->data++;
    in->size--;
    return v;
}

static inline uint64_t fuzz_bytes_u64(struct fuzz_input *in, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)fuzz_u8(in) << (8 * i);
    return v;
}

/*
 * A 64-bit value biased towards the numbers that matter for sizes: small
 * ones, powers of two and their neighbours, KVRT_UNSET and the top of the
 * range; a fully random 64-bit value otherwise.  Uniform 64-bit values would
 * almost never get past the first validation.
 */
static inline uint64_t fuzz_value(struct fuzz_input *in)
{
    const uint8_t sel = fuzz_u8(in);
    switch (sel & 7) {
    case 0:
    case 1:
    case 2: return fuzz_u8(in) & 0x1f;
    case 3: return fuzz_bytes_u64(in, 2);
    case 4: {
        const uint8_t b = fuzz_u8(in);
        const uint64_t p = (uint64_t)1 << (b & 63);
        return (b & 0x40) ? p - 1 : (b & 0x80) ? p + 1 : p;
    }
    case 5: return KVRT_UNSET;
    case 6: return UINT64_MAX - (fuzz_u8(in) & 0xf) - 1;
    default: return fuzz_bytes_u64(in, 8);
    }
}

/* Does `hay` contain `needle`? (Both NUL-terminated.) */
static inline int fuzz_contains(const char *hay, const char *needle)
{
    return strstr(hay, needle) != NULL;
}

#endif
