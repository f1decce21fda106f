/*
 * kvrt — common definitions: visibility, status codes, error messages.
 *
 * Every kvrt function that can fail returns an int status: KVRT_OK (0) or one
 * of the negative kvrt_status codes below.  On failure the calling thread's
 * error message (kvrt_error_message()) says what was wrong, with which value,
 * and what is valid.  The message is always one line: control bytes from
 * any source (names, files, plugins) appear as \n, \t, \r or \xNN.
 *
 * NULL arguments, one rule for every function:
 *   - An output pointer is required unless its comment says "may be NULL".
 *     A required output that is NULL is KVRT_ERR_INVALID with a message
 *     naming the function, and nothing else happens.
 *   - The void *_default() functions do nothing when given NULL.
 *   - Accessors that return a value instead of a status (counts, names,
 *     flags) return 0, NULL or false for a NULL handle.
 *   - Destroy and close functions accept NULL and do nothing.
 */
#ifndef KVRT_COMMON_H
#define KVRT_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define KVRT_API __attribute__((visibility("default")))
/* Marks a printf-style function: argument `fmt` is the format, variadic
 * arguments start at `first`, and the compiler checks them against it. */
#define KVRT_PRINTF(fmt, first) __attribute__((format(printf, fmt, first)))
#else
#define KVRT_API
#define KVRT_PRINTF(fmt, first)
#endif

/*
 * The API version: libkvrt's soname is libkvrt.so.<KVRT_API_VERSION_MAJOR>.
 * The major changes when an engine built against these headers could break
 * (a function removed or changed, a struct's size or field offsets moved);
 * the minor when something is added (a function, or a field carved from a
 * struct's reserved bytes, whose all-zero value means the old behaviour).
 * meson.build reads both from here: this is their one source.
 */
#define KVRT_API_VERSION_MAJOR 1
#define KVRT_API_VERSION_MINOR 1

/* Marker for "this optional value is not set" in transparent structs. */
#define KVRT_UNSET UINT64_MAX

/* Status codes.  The values are part of the ABI (locked by tests). */
enum kvrt_status {
    KVRT_OK = 0,
    KVRT_ERR_INVALID = -1,     /* invalid argument: bad name, bad number, misuse */
    KVRT_ERR_OVERFLOW = -2,    /* a size does not fit in 64 bits */
    KVRT_ERR_NOMEM = -3,       /* host memory exhausted */
    KVRT_ERR_REFUSED = -4,     /* layout refused or unsatisfiable */
    KVRT_ERR_NODEV = -5,       /* no backend or no device available */
    KVRT_ERR_STATE = -6,       /* operation not allowed in the current state */
    KVRT_ERR_DEVICE = -7,      /* the device or its driver failed */
    KVRT_ERR_UNSUPPORTED = -8, /* backend does not support this operation/type */
    KVRT_ERR_PLUGIN = -9,      /* a plugin is malformed or misbehaved */
    KVRT_ERR_INTERNAL = -10,   /* a bug in kvrt */
};

/**
 * The message of the last failure on this thread ("" if none).  The string
 * stays valid until the next kvrt call on the same thread.
 */
KVRT_API const char *kvrt_error_message(void);

/**
 * Set this thread's error message (printf-style) and return `status`, for
 * libraries built on kvrt (libkvrt-xfer) so that kvrt_error_message()
 * reports their failures too.  A NULL fmt clears the message.
 */
KVRT_API int kvrt_error_report(int status, const char *fmt, ...) KVRT_PRINTF(2, 3);

/**
 * Copy `src` (NULL: "") into `dst`, `size` bytes, always terminated; bytes
 * below 0x20 and 0x7f are written as \n, \t, \r or \xNN, and an escape
 * that does not fit is left out whole.  Returns the length written (0 when
 * dst is NULL or size is 0).  kvrt's own messages pass through it; use it
 * for names, paths and text from plugins or files before printing them as
 * one line.
 */
KVRT_API size_t kvrt_escape_controls(char *dst, size_t size, const char *src);

/**
 * `len` bytes of `src` as well-formed UTF-8: each byte that does not start
 * a well-formed sequence (overlong forms, surrogates and values past
 * U+10FFFF included) becomes U+FFFD.  Writes into `dst` what fits in
 * `size` bytes, always terminated, leaving out whole a sequence that does
 * not fit (dst may be NULL when size is 0), and returns the length of the
 * whole repaired text, as snprintf does: it equals `len` exactly when the
 * text was well-formed.  Paths and names can hold any bytes; kvrt writes
 * them into JSON through it.
 */
KVRT_API size_t kvrt_utf8_repair(char *dst, size_t size, const char *src, size_t len);

/** A short constant name for a status code ("KVRT_ERR_INVALID", ...). */
KVRT_API const char *kvrt_status_name(int status);

/** Free memory that kvrt returned to the caller (arrays, strings). */
KVRT_API void kvrt_free(void *ptr);

/** libkvrt's version string, e.g. "0.1.0". */
KVRT_API const char *kvrt_version(void);

#ifdef __cplusplus
}
#endif
#endif
