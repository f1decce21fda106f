/*
 * Prometheus' text exposition format (0.0.4), written into a growing
 * buffer: families with their HELP and TYPE lines, samples with labels,
 * and the copy out to a caller's buffer in the libraries' snprintf shape
 * (a size query, the text whole or not at all).  libkvrt-store's and
 * libkvrt-xfer's metrics render their counters through it.
 *
 * Base of libkvrt-xfer and libkvrt-store: below every layer of both.
 */
#ifndef KVRT_BASE_PROM_H
#define KVRT_BASE_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvrt/runtime.h>

/* A growing text; `failed` once out of memory or past SIZE_MAX. */
struct base_prom {
    char *buf;
    size_t len, cap;
    bool failed;
};

void base_prom_put(struct base_prom *p, const char *fmt, ...) KVRT_PRINTF(2, 3);
/* "# HELP name help" and "# TYPE name type". */
void base_prom_family(struct base_prom *p, const char *name, const char *type, const char *help);
/* "name{labels} v" (labels NULL or empty: none). */
void base_prom_sample(struct base_prom *p, const char *name, const char *labels, uint64_t v);
/* One family of one sample. */
void base_prom_one(struct base_prom *p, const char *name, const char *type, const char *help, uint64_t v);
/* A label value as the format escapes it: backslash, quote, newline. */
void base_prom_label_value(struct base_prom *p, const char *s);
/* The text into buf (size bytes, NUL included; *needed the bytes it
 * takes), then the text freed.  fn names the caller in the messages:
 * KVRT_ERR_NOMEM when rendering ran out of memory, KVRT_ERR_INVALID when
 * buf is too small (buf then holds ""). */
int base_prom_finish(struct base_prom *p, const char *fn, char *buf, size_t size, size_t *needed);

#endif
