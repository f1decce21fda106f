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

#include "base/prom.h"
#include "limits.h"

static void seconds(struct base_prom *p, const char *name, const char *help, double v)
{
    base_prom_family(p, name, "gauge", help);
    base_prom_put(p, "%s %.9g\n", name, v);
}

static void render(const struct kvrt_xfer_stats *st, struct base_prom *p)
{
    base_prom_one(p, "kvrt_xfer_peers", "gauge", "Peers not yet closed (any state).", st->peers);
    base_prom_one(p, "kvrt_xfer_peers_read_in_place", "gauge",
                  "Peers on this host whose memory this agent reads in place.", st->peers_read_in_place);
    base_prom_one(p, "kvrt_xfer_handles", "gauge", "Transfer handles not yet released.", st->handles);
    base_prom_family(p, "kvrt_xfer_transfers_in_flight", "gauge", "Transfers under way, by direction.");
    base_prom_sample(p, "kvrt_xfer_transfers_in_flight", "direction=\"outgoing\"", st->outgoing);
    base_prom_sample(p, "kvrt_xfer_transfers_in_flight", "direction=\"incoming\"", st->incoming);
    base_prom_family(p, "kvrt_xfer_transfers_total", "counter", "Transfers ended, either role, by result.");
    base_prom_sample(p, "kvrt_xfer_transfers_total", "result=\"completed\"", st->completed);
    base_prom_sample(p, "kvrt_xfer_transfers_total", "result=\"failed\"", st->failed);
    base_prom_one(p, "kvrt_xfer_sent_bytes_total", "counter", "Payload bytes whose sending completed.", st->bytes_sent);
    base_prom_one(p, "kvrt_xfer_received_bytes_total", "counter", "Payload bytes received.", st->bytes_received);
    base_prom_one(p, "kvrt_xfer_read_in_place_bytes_total", "counter",
                  "Payload bytes received by reading a peer's memory on this host.", st->bytes_read_in_place);
    static const char failures[] = "kvrt_xfer_failures_total";
    base_prom_family(p, failures, "counter", "Transfers failed, either role, by reason (they add up to the failed).");
    base_prom_sample(p, failures, "reason=\"timeout\"", st->failed_timeout);
    base_prom_sample(p, failures, "reason=\"peer_closed\"", st->failed_peer_closed);
    base_prom_sample(p, failures, "reason=\"connection\"", st->failed_connection);
    base_prom_sample(p, failures, "reason=\"violation\"", st->failed_violation);
    base_prom_sample(p, failures, "reason=\"refused\"", st->failed_refused);
    base_prom_sample(p, failures, "reason=\"released\"", st->failed_released);
    base_prom_sample(p, failures, "reason=\"other\"", st->failed_other);
    /* What the agent refused, one sample per kind (connections as one,
     * as before 1.4), then the connections by reason (they add up to it). */
    static const char refusals[] = "kvrt_xfer_refusals_total";
    base_prom_family(p, refusals, "counter", "What the agent refused, by reason.");
    base_prom_sample(p, refusals, "reason=\"connection\"", st->refused);
    base_prom_sample(p, refusals, "reason=\"protocol\"", st->violations);
    base_prom_sample(p, refusals, "reason=\"stranger\"", st->strangers);
    base_prom_sample(p, refusals, "reason=\"not_granted\"", st->denied);
    base_prom_sample(p, refusals, "reason=\"limit\"", st->refused_limit);
    static const char conns[] = "kvrt_xfer_connection_refusals_total";
    base_prom_family(p, conns, "counter", "Connections refused, by reason (they add up to the connection refusals).");
    base_prom_sample(p, conns, "reason=\"auth\"", st->refused_auth);
    base_prom_sample(p, conns, "reason=\"allow_list\"", st->refused_allow);
    base_prom_sample(p, conns, "reason=\"busy\"", st->refused_busy);
    base_prom_sample(p, conns, "reason=\"metadata\"", st->refused_metadata);
    base_prom_sample(p, conns, "reason=\"malformed\"", st->refused_malformed);
    base_prom_sample(p, conns, "reason=\"other\"", st->refused_other);
    base_prom_one(p, "kvrt_xfer_notifications", "gauge", "Notifications queued and not yet taken.", st->notifications);
    base_prom_one(p, "kvrt_xfer_ucx_requests", "gauge", "UCX operations not yet complete.", st->ucx_requests);
    base_prom_family(p, "kvrt_xfer_staging_chunks", "gauge", "Staging chunks, by state.");
    base_prom_sample(p, "kvrt_xfer_staging_chunks", "state=\"busy\"", st->staging_busy);
    base_prom_sample(p, "kvrt_xfer_staging_chunks", "state=\"all\"", st->staging_chunks);
    base_prom_one(p, "kvrt_xfer_staging_chunk_bytes", "gauge", "Bytes of one staging chunk.", st->chunk_bytes);
    base_prom_one(p, "kvrt_xfer_registered_bytes", "gauge", "Cache and staging pool bytes registered with UCX.",
                  st->registered_bytes);
    base_prom_one(p, "kvrt_xfer_handler_bytes", "gauge", "Memory the refusing active-message handlers hold.",
                  st->handler_bytes);
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
    struct base_prom p = {NULL, 0, 0, false};
    render(&st, &p);
    return base_prom_finish(&p, "kvrt_xfer_agent_metrics", buf, size, needed);
}
