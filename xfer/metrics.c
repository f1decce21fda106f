/*
 * An agent's counters in Prometheus' text exposition format (0.0.4), for
 * operators: kvrt_xfer_agent_metrics renders kvrt_xfer_agent_stats, each
 * family with its HELP and TYPE lines (docs/xfer.md, "Metrics").  It reads
 * the stats through the public call alone.
 *
 * Layer 7 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/xfer.h>

#include "limits.h"

/* A growing text; `failed` once out of memory or past SIZE_MAX. */
struct prom {
    char *buf;
    size_t len, cap;
    bool failed;
};

static void put(struct prom *p, const char *fmt, ...) KVRT_PRINTF(2, 3);
static void put(struct prom *p, const char *fmt, ...)
{
    if (p->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(p->buf ? p->buf + p->len : NULL, p->buf ? p->cap - p->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            p->failed = true;
            return;
        }
        if (p->buf && (size_t)n < p->cap - p->len) {
            p->len += (size_t)n;
            return;
        }
        size_t want = p->len + (size_t)n + 1;
        if (want < p->len || want > SIZE_MAX / 2) {
            p->failed = true;
            return;
        }
        size_t cap = p->cap ? p->cap : 4096;
        while (cap < want)
            cap *= 2;
        char *b = realloc(p->buf, cap);
        if (!b) {
            p->failed = true;
            return;
        }
        p->buf = b;
        p->cap = cap;
    }
}

static void family(struct prom *p, const char *name, const char *type, const char *help)
{
    put(p, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample(struct prom *p, const char *name, const char *labels, unsigned long long v)
{
    if (labels)
        put(p, "%s{%s} %llu\n", name, labels, v);
    else
        put(p, "%s %llu\n", name, v);
}

static void one(struct prom *p, const char *name, const char *type, const char *help, unsigned long long v)
{
    family(p, name, type, help);
    sample(p, name, NULL, v);
}

static void seconds(struct prom *p, const char *name, const char *help, double v)
{
    family(p, name, "gauge", help);
    put(p, "%s %.9g\n", name, v);
}

static void render(const struct kvrt_xfer_stats *st, struct prom *p)
{
    one(p, "kvrt_xfer_peers", "gauge", "Peers not yet closed (any state).", st->peers);
    one(p, "kvrt_xfer_peers_read_in_place", "gauge", "Peers on this host whose memory this agent reads in place.",
        st->peers_read_in_place);
    one(p, "kvrt_xfer_handles", "gauge", "Transfer handles not yet released.", st->handles);
    family(p, "kvrt_xfer_transfers_in_flight", "gauge", "Transfers under way, by direction.");
    sample(p, "kvrt_xfer_transfers_in_flight", "direction=\"outgoing\"", st->outgoing);
    sample(p, "kvrt_xfer_transfers_in_flight", "direction=\"incoming\"", st->incoming);
    family(p, "kvrt_xfer_transfers_total", "counter", "Transfers ended, either role, by result.");
    sample(p, "kvrt_xfer_transfers_total", "result=\"completed\"", st->completed);
    sample(p, "kvrt_xfer_transfers_total", "result=\"failed\"", st->failed);
    one(p, "kvrt_xfer_sent_bytes_total", "counter", "Payload bytes whose sending completed.", st->bytes_sent);
    one(p, "kvrt_xfer_received_bytes_total", "counter", "Payload bytes received.", st->bytes_received);
    one(p, "kvrt_xfer_read_in_place_bytes_total", "counter",
        "Payload bytes received by reading a peer's memory on this host.", st->bytes_read_in_place);
    family(p, "kvrt_xfer_refusals_total", "counter", "What the agent refused, by reason.");
    sample(p, "kvrt_xfer_refusals_total", "reason=\"connection\"", st->refused);
    sample(p, "kvrt_xfer_refusals_total", "reason=\"protocol\"", st->violations);
    sample(p, "kvrt_xfer_refusals_total", "reason=\"stranger\"", st->strangers);
    sample(p, "kvrt_xfer_refusals_total", "reason=\"not_granted\"", st->denied);
    one(p, "kvrt_xfer_notifications", "gauge", "Notifications queued and not yet taken.", st->notifications);
    one(p, "kvrt_xfer_ucx_requests", "gauge", "UCX operations not yet complete.", st->ucx_requests);
    family(p, "kvrt_xfer_staging_chunks", "gauge", "Staging chunks, by state.");
    sample(p, "kvrt_xfer_staging_chunks", "state=\"busy\"", st->staging_busy);
    sample(p, "kvrt_xfer_staging_chunks", "state=\"all\"", st->staging_chunks);
    one(p, "kvrt_xfer_staging_chunk_bytes", "gauge", "Bytes of one staging chunk.", st->chunk_bytes);
    one(p, "kvrt_xfer_registered_bytes", "gauge", "Cache and staging pool bytes registered with UCX.",
        st->registered_bytes);
    one(p, "kvrt_xfer_handler_bytes", "gauge", "Memory the refusing active-message handlers hold.", st->handler_bytes);
    seconds(p, "kvrt_xfer_registration_seconds", "Time the registration with UCX took (once).", st->registration_s);
    seconds(p, "kvrt_xfer_handlers_seconds", "Time registering the active-message handlers took (once).",
            st->handlers_s);
}

int kvrt_xfer_agent_metrics(kvrt_xfer_agent *a, char *buf, size_t size, size_t *needed)
{
    if (needed)
        *needed = 0;
    if (!a || (!buf && size))
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_agent_metrics: the agent is required, and buf for size %zu",
                         size);
    struct kvrt_xfer_stats st;
    st.size = sizeof(st);
    int rc = kvrt_xfer_agent_stats(a, &st);
    if (rc != KVRT_OK)
        return rc;
    struct prom p = {NULL, 0, 0, false};
    render(&st, &p);
    if (p.failed) {
        free(p.buf);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_agent_metrics: out of memory");
    }
    size_t need = p.len + 1;
    if (needed)
        *needed = need;
    if (buf && size >= need)
        memcpy(buf, p.buf, need);
    else if (buf) {
        buf[0] = '\0';
        rc = BASE_FAIL(KVRT_ERR_INVALID,
                       "kvrt_xfer_agent_metrics: the text needs %zu bytes (with its NUL); buf has %zu", need, size);
    }
    free(p.buf);
    return rc;
}
