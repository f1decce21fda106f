/* Internal: a growable string for traces and lists in messages. */
#ifndef KVRT_CORE_STRBUF_H
#define KVRT_CORE_STRBUF_H

#include <stddef.h>

#if defined(__GNUC__) || defined(__clang__)
#define KVRT_STRBUF_PRINTF __attribute__((format(printf, 2, 3)))
#else
#define KVRT_STRBUF_PRINTF
#endif

struct kvrt_strbuf {
    char *data;  /* always NUL-terminated once anything was appended */
    size_t len;
    size_t cap;
};

/* Append; on allocation failure the text is silently truncated (a trace
 * that lost a line is better than an operation that failed for it). */
void kvrt_strbuf_appendf(struct kvrt_strbuf *sb, const char *fmt, ...) KVRT_STRBUF_PRINTF;
const char *kvrt_strbuf_str(const struct kvrt_strbuf *sb);
void kvrt_strbuf_reset(struct kvrt_strbuf *sb);
void kvrt_strbuf_free(struct kvrt_strbuf *sb);

#endif
