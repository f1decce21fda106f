/*
 * Grants: which blocks of this cache a peer may write and read, given to
 * one peer or to every peer of the agent (those to come too: a peer may
 * push as soon as its kvrt_xfer_connect returns, before the application
 * has its peer from kvrt_xfer_accept).  Checked against every block a
 * peer's BEGIN names, before any byte moves, when the agent requires
 * grants.
 *
 * Layer 6 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdlib.h>
#include <string.h>

#include "agent.h"

static bool has(const struct xfer_grants *g, int64_t id, bool write)
{
    const uint8_t *bits = write ? g->write : g->read;
    return bits && (bits[(uint64_t)id / 8] & (1u << ((uint64_t)id % 8)));
}

bool xfer_granted(void *peer, int64_t id, bool write)
{
    const kvrt_xfer_peer *p = peer;
    return has(&p->grants, id, write) || has(&p->agent->grants, id, write);
}

void xfer_grants_free(struct xfer_grants *g)
{
    free(g->write);
    free(g->read);
    memset(g, 0, sizeof(*g));
}

static int change(kvrt_xfer_agent *a, struct xfer_grants *g, unsigned access, const int64_t *ids, size_t count,
                  bool give, const char *fn)
{
    if (access == 0 || (access & ~(unsigned)(KVRT_XFER_GRANT_READ | KVRT_XFER_GRANT_WRITE)))
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "%s: access 0x%x; valid are KVRT_XFER_GRANT_READ (0x1), KVRT_XFER_GRANT_WRITE (0x2) or both",
                         fn, access);
    base_lock(&a->lock);
    uint64_t blocks = a->local.desc.num_blocks;
    int rc = KVRT_OK;
    if (!(ids == NULL && count == 0 && !give))
        rc = xfer_check_ids(ids, count, blocks, "local", "ids", false);
    size_t bytes = (size_t)(blocks / 8 + 1);
    uint8_t **sets[2] = {(access & KVRT_XFER_GRANT_WRITE) ? &g->write : NULL,
                         (access & KVRT_XFER_GRANT_READ) ? &g->read : NULL};
    for (int k = 0; k < 2 && rc == KVRT_OK; k++) {
        if (!sets[k])
            continue;
        if (!*sets[k] && give && !(*sets[k] = calloc(bytes, 1)))
            rc = BASE_FAIL(KVRT_ERR_NOMEM, "%s: out of memory", fn);
        if (rc != KVRT_OK || !*sets[k])
            continue;
        uint8_t *b = *sets[k];
        if (!ids) {
            memset(b, 0, bytes);
            continue;
        }
        for (size_t i = 0; i < count; i++) {
            uint64_t id = (uint64_t)ids[i];
            if (give)
                b[id / 8] |= (uint8_t)(1u << (id % 8));
            else
                b[id / 8] &= (uint8_t) ~(1u << (id % 8));
        }
    }
    base_unlock(&a->lock);
    if (rc == KVRT_OK)
        kvrt_error_report(KVRT_OK, NULL);
    else
        rc = kvrt_error_report(rc, "%s: %s", fn, kvrt_error_message());
    return rc;
}

static int peer_change(kvrt_xfer_peer *p, unsigned access, const int64_t *ids, size_t count, bool give, const char *fn)
{
    if (!p)
        return BASE_FAIL(KVRT_ERR_INVALID, "%s: peer is NULL", fn);
    return change(p->agent, &p->grants, access, ids, count, give, fn);
}

static int agent_change(kvrt_xfer_agent *a, unsigned access, const int64_t *ids, size_t count, bool give,
                        const char *fn)
{
    if (!a)
        return BASE_FAIL(KVRT_ERR_INVALID, "%s: agent is NULL", fn);
    return change(a, &a->grants, access, ids, count, give, fn);
}

int kvrt_xfer_grant(kvrt_xfer_peer *p, unsigned access, const int64_t *ids, size_t count)
{
    return peer_change(p, access, ids, count, true, "kvrt_xfer_grant");
}

int kvrt_xfer_revoke(kvrt_xfer_peer *p, unsigned access, const int64_t *ids, size_t count)
{
    return peer_change(p, access, ids, count, false, "kvrt_xfer_revoke");
}

int kvrt_xfer_expect(kvrt_xfer_peer *p, const int64_t *ids, size_t count)
{
    return peer_change(p, KVRT_XFER_GRANT_WRITE, ids, count, true, "kvrt_xfer_expect");
}

int kvrt_xfer_agent_grant(kvrt_xfer_agent *a, unsigned access, const int64_t *ids, size_t count)
{
    return agent_change(a, access, ids, count, true, "kvrt_xfer_agent_grant");
}

int kvrt_xfer_agent_revoke(kvrt_xfer_agent *a, unsigned access, const int64_t *ids, size_t count)
{
    return agent_change(a, access, ids, count, false, "kvrt_xfer_agent_revoke");
}
