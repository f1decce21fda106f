/* Internal: a growable string for traces and lists in messages.
 *
 * Layer 1 of libkvrt (core/text/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_STRBUF_H
#define KVRT_CORE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "format.h"

struct kvrt_strbuf {
    char *data; /* always NUL-terminated once anything was appended */
    size_t len;
    size_t cap;
};

/* Append; false when the text could not be kept (allocation failure), which
 * most callers may ignore: a trace that lost a line is better than an
 * operation that failed for it. */
bool kvrt_strbuf_appendf(struct kvrt_strbuf *sb, const char *fmt, ...) KVRT_PRINTF(2, 3);
const char *kvrt_strbuf_str(const struct kvrt_strbuf *sb);
void kvrt_strbuf_reset(struct kvrt_strbuf *sb);
void kvrt_strbuf_free(struct kvrt_strbuf *sb);

#endif
