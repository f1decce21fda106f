/*
 * The wire's messages and their checks.  Headers are fixed-size C structs
 * without padding (asserted below), copied out of UCX's buffers before they
 * are read, so no field is ever read unaligned or past what arrived.
 *
 * Layer 2 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

_Static_assert(sizeof(struct wire_hello) == 40, "wire_hello has no padding");
_Static_assert(sizeof(struct wire_reply) == 72, "wire_reply has no padding");
_Static_assert(sizeof(struct wire_hdr) == 32, "wire_hdr has no padding");
_Static_assert(sizeof(struct wire_begin) == 128, "wire_begin has no padding");
_Static_assert(sizeof(struct wire_data) == 48, "wire_data has no padding");
_Static_assert(sizeof(struct wire_status) == 40, "wire_status has no padding");
_Static_assert(sizeof(struct wire_abort) == 40, "wire_abort has no padding");
_Static_assert(sizeof(struct wire_cma) == 64, "wire_cma has no padding");
_Static_assert(sizeof(struct wire_release) == 48, "wire_release has no padding");
_Static_assert(sizeof(struct wire_ref) == 32, "wire_ref has no padding");

static const char *const names[WIRE_NUM_IDS] = {
    [WIRE_HELLO] = "HELLO", [WIRE_REPLY] = "REPLY",   [WIRE_PROOF] = "PROOF",     [WIRE_ACCEPT] = "ACCEPT",
    [WIRE_READY] = "READY", [WIRE_BEGIN] = "BEGIN",   [WIRE_DATA] = "DATA",       [WIRE_ACK] = "ACK",
    [WIRE_END] = "END",     [WIRE_ABORT] = "ABORT",   [WIRE_NOTIFY] = "NOTIFY",   [WIRE_BYE] = "BYE",
    [WIRE_CMA] = "CMA",     [WIRE_CMA_OK] = "CMA_OK", [WIRE_RELEASE] = "RELEASE",
};

const char *wire_name(unsigned id)
{
    return id > 0 && id < WIRE_NUM_IDS ? names[id] : "an unknown message";
}

bool wire_status_valid(int32_t status)
{
    return status <= KVRT_OK && status >= KVRT_ERR_INTERNAL;
}

struct wire_hdr wire_hdr_make(const struct wire_ident *me, uint64_t xid)
{
    struct wire_hdr h;
    memset(&h, 0, sizeof(h));
    h.from = me->from;
    h.xid = xid;
    memcpy(h.token, me->token, sizeof(h.token));
    return h;
}

/* ---- sessions ------------------------------------------------------------ */

int wire_session_add(struct wire_sessions *s, const struct wire_ident *peer, void *owner, bool await_ready)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        struct wire_session *v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a session");
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (struct wire_session){*peer, owner, await_ready};
    return KVRT_OK;
}

void wire_session_remove(struct wire_sessions *s, void *owner)
{
    for (size_t i = 0; i < s->n;)
        if (s->v[i].owner == owner)
            s->v[i] = s->v[--s->n];
        else
            i++;
}

void wire_sessions_free(struct wire_sessions *s)
{
    free(s->v);
    memset(s, 0, sizeof(*s));
}

void *wire_session_owner(const struct wire_sessions *s, uint64_t from)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].peer.from == from)
            return s->v[i].owner;
    return NULL;
}

/* ---- checks -------------------------------------------------------------- */

static bool bad(char *why, size_t n, const char *fmt, ...) KVRT_PRINTF(3, 4);

static bool bad(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return false;
}

static bool header_size(unsigned id, size_t hlen, size_t want, char *why, size_t n)
{
    if (hlen != want)
        return bad(why, n, "sent %s with a %zu-byte header (it is %zu bytes)", wire_name(id), hlen, want);
    return true;
}

static bool eager(unsigned id, bool rndv, char *why, size_t n)
{
    if (rndv)
        return bad(why, n, "sent %s as a rendezvous message (it is always eager)", wire_name(id));
    return true;
}

static bool status_ok(unsigned id, int32_t status, char *why, size_t n)
{
    if (!wire_status_valid(status))
        return bad(why, n, "sent an invalid status %d in %s (valid are 0 and the kvrt errors -1..-10)", (int)status,
                   wire_name(id));
    return true;
}

static bool zero(unsigned id, uint32_t reserved, char *why, size_t n)
{
    if (reserved)
        return bad(why, n, "sent %s with reserved field 0x%x (it is 0)", wire_name(id), (unsigned)reserved);
    return true;
}

static bool data_at_most(unsigned id, size_t len, uint64_t max, char *why, size_t n)
{
    if (len > max)
        return bad(why, n, "sent %s with %zu bytes of data (at most %llu)", wire_name(id), len, ULL(max));
    return true;
}

static bool check_begin(const struct wire_begin *b, size_t len, char *why, size_t n)
{
    if (b->kind != WIRE_PUSH && b->kind != WIRE_PULL)
        return bad(why, n, "sent BEGIN of kind %u (valid are 1, a push, and 2, a pull)", (unsigned)b->kind);
    if (b->flags & ~(uint16_t)(b->kind == WIRE_PUSH ? WIRE_BEGIN_NOTE : WIRE_BEGIN_REFS))
        return bad(why, n,
                   "sent BEGIN with flags 0x%x (valid: 0x1, a push's notification; 0x2, a pull read by "
                   "reference)",
                   (unsigned)b->flags);
    if (b->order > WIRE_ORDER_STAGING)
        return bad(why, n, "sent BEGIN with byte order %u (valid are 0..5, a layout's, and 6, staging)",
                   (unsigned)b->order);
    if (b->count == 0 || b->count > XFER_MAX_BLOCKS)
        return bad(why, n, "sent BEGIN for %llu blocks (valid are 1..%llu)", ULL(b->count), ULL(XFER_MAX_BLOCKS));
    if (b->num_layers == 0 || b->num_heads == 0)
        return bad(why, n, "sent BEGIN for %llu layers and %llu heads (at least one of each)", ULL(b->num_layers),
                   ULL(b->num_heads));
    if (b->chunk_bytes == 0 || b->chunk_bytes > XFER_MAX_CHUNK)
        return bad(why, n, "sent BEGIN with %llu-byte chunks (valid are 1..%llu)", ULL(b->chunk_bytes),
                   ULL(XFER_MAX_CHUNK));
    if (b->total_bytes == 0)
        return bad(why, n, "sent BEGIN for 0 bytes");
    if (b->note_len > KVRT_XFER_MAX_NOTIFICATION || (!(b->flags & WIRE_BEGIN_NOTE) && b->note_len))
        return bad(why, n, "sent BEGIN with a %llu-byte notification (at most %u, and only with flag 0x1)",
                   ULL(b->note_len), (unsigned)KVRT_XFER_MAX_NOTIFICATION);
    if (len != b->count * sizeof(int64_t) + b->note_len)
        return bad(why, n, "sent BEGIN naming %llu blocks and a %llu-byte notification in %zu bytes", ULL(b->count),
                   ULL(b->note_len), len);
    if (b->h.xid == 0)
        return bad(why, n, "sent BEGIN for stream 0 (streams are numbered from 1)");
    if (b->token_count == 0 && (b->token_first || b->token_seg))
        return bad(why, n, "sent BEGIN for whole blocks with token %llu and %llu-token segments (both must be 0)",
                   ULL(b->token_first), ULL(b->token_seg));
    if (b->token_count && (b->token_first > INT64_MAX || b->token_count > (uint64_t)INT64_MAX - b->token_first ||
                           b->token_seg == 0 || b->token_seg > XFER_MAX_BLOCK_TOKENS || b->order == WIRE_ORDER_STAGING))
        return bad(why, n,
                   "sent BEGIN for tokens %llu+%llu in %llu-token segments, order %u (valid: a range below 2^63, "
                   "segments of 1..%llu tokens, a layout's order)",
                   ULL(b->token_first), ULL(b->token_count), ULL(b->token_seg), (unsigned)b->order,
                   ULL(XFER_MAX_BLOCK_TOKENS));
    return true;
}

static bool check_data(const struct wire_data *d, size_t len, bool rndv, char *why, size_t n)
{
    if (!zero(WIRE_DATA, d->reserved, why, n))
        return false;
    if (d->flags & ~(uint32_t)(WIRE_DATA_REPLY | WIRE_DATA_REF))
        return bad(why, n, "sent DATA with flags 0x%x (valid: 0x1, a pull's reply; 0x2, by reference)",
                   (unsigned)d->flags);
    if ((d->flags & WIRE_DATA_REF) && (rndv || len != sizeof(struct wire_ref)))
        return bad(why, n, "sent DATA by reference with %zu bytes%s (it is one %zu-byte eager reference)", len,
                   rndv ? " as a rendezvous" : "", sizeof(struct wire_ref));
    if (len == 0 || len > XFER_MAX_CHUNK)
        return bad(why, n, "sent DATA of %zu bytes (valid are 1..%llu)", len, ULL(XFER_MAX_CHUNK));
    if (d->h.xid == 0)
        return bad(why, n, "sent DATA for stream 0 (streams are numbered from 1)");
    return true;
}

static bool check_status(unsigned id, const struct wire_status *st, size_t len, char *why, size_t n)
{
    if (!zero(id, st->reserved, why, n) || !status_ok(id, st->status, why, n) ||
        !data_at_most(id, len, XFER_MAX_REASON, why, n))
        return false;
    if (id == WIRE_END && st->status == KVRT_OK)
        return bad(why, n, "sent END with status 0 (an END reports a failure)");
    if (st->h.xid == 0)
        return bad(why, n, "sent %s for stream 0 (streams are numbered from 1)", wire_name(id));
    return true;
}

/* ABORT and RELEASE: one flag (a pull, 0x1), no data, a numbered stream. */
static bool check_pull_flagged(unsigned id, uint32_t reserved, uint32_t flags, uint64_t xid, size_t len, char *why,
                               size_t n)
{
    if (!zero(id, reserved, why, n))
        return false;
    if (flags & ~(uint32_t)1u)
        return bad(why, n, "sent %s with flags 0x%x (valid: 0x1, a pull)", wire_name(id), (unsigned)flags);
    if (len)
        return bad(why, n, "sent %s with %zu bytes of data (it has none)", wire_name(id), len);
    if (xid == 0)
        return bad(why, n, "sent %s for stream 0 (streams are numbered from 1)", wire_name(id));
    return true;
}

static bool check_abort(const struct wire_abort *a, size_t len, char *why, size_t n)
{
    _Static_assert(WIRE_ABORT_PULL == 1u, "ABORT's one flag");
    return check_pull_flagged(WIRE_ABORT, a->reserved, a->flags, a->h.xid, len, why, n);
}

static bool check_cma(const struct wire_cma *c, size_t len, char *why, size_t n)
{
    if (!zero(WIRE_CMA, c->reserved, why, n))
        return false;
    if (len)
        return bad(why, n, "sent CMA with %zu bytes of data (it has none)", len);
    if (c->h.xid)
        return bad(why, n, "sent CMA for stream %llu (it names none)", ULL(c->h.xid));
    if (c->pid == 0 || c->pid > INT32_MAX || c->cookie == 0)
        return bad(why, n, "sent CMA naming process %u and address 0x%llx (valid: a process id and an address)",
                   (unsigned)c->pid, ULL(c->cookie));
    return true;
}

static bool check_release(const struct wire_release *r, size_t len, char *why, size_t n)
{
    _Static_assert(WIRE_RELEASE_PULL == 1u, "RELEASE's one flag");
    return check_pull_flagged(WIRE_RELEASE, r->reserved, r->flags, r->h.xid, len, why, n);
}

static bool check_plain(unsigned id, const struct wire_hdr *h, size_t len, char *why, size_t n)
{
    if (id == WIRE_NOTIFY)
        return data_at_most(id, len, KVRT_XFER_MAX_NOTIFICATION, why, n) &&
               (h->xid ? true : bad(why, n, "sent NOTIFY for stream 0 (it names the pull it completed)"));
    if (len)
        return bad(why, n, "sent %s with %zu bytes of data (it has none)", wire_name(id), len);
    if (h->xid)
        return bad(why, n, "sent %s for stream %llu (it names none)", wire_name(id), ULL(h->xid));
    return true;
}

static const size_t header_sizes[WIRE_NUM_IDS] = {
    [WIRE_READY] = sizeof(struct wire_hdr),       [WIRE_BEGIN] = sizeof(struct wire_begin),
    [WIRE_DATA] = sizeof(struct wire_data),       [WIRE_ACK] = sizeof(struct wire_status),
    [WIRE_END] = sizeof(struct wire_status),      [WIRE_ABORT] = sizeof(struct wire_abort),
    [WIRE_NOTIFY] = sizeof(struct wire_hdr),      [WIRE_BYE] = sizeof(struct wire_hdr),
    [WIRE_CMA] = sizeof(struct wire_cma),         [WIRE_CMA_OK] = sizeof(struct wire_status),
    [WIRE_RELEASE] = sizeof(struct wire_release),
};

enum wire_result wire_decode(struct wire_sessions *s, unsigned id, const void *hdr, size_t hlen, const void *data,
                             size_t len, bool rndv, struct wire_msg *out, char *why, size_t n)
{
    memset(out, 0, sizeof(*out));
    snprintf(why, n, "%s", "");
    struct wire_hdr h;
    if (id < WIRE_READY || id >= WIRE_NUM_IDS || hlen < sizeof(h) || !hdr)
        return WIRE_STRANGER;
    memcpy(&h, hdr, sizeof(h));
    struct wire_session *sess = NULL;
    for (size_t i = 0; i < s->n && !sess; i++)
        if (s->v[i].peer.from == h.from && xfer_same(s->v[i].peer.token, h.token, XFER_TOKEN_BYTES))
            sess = &s->v[i];
    if (!sess)
        return WIRE_STRANGER;
    out->owner = sess->owner;
    out->id = id;
    out->xid = h.xid;
    out->payload = data;
    out->len = len;
    out->rndv = rndv;
    if (!header_size(id, hlen, header_sizes[id], why, n))
        return WIRE_VIOLATION;
    if (id != WIRE_DATA && !eager(id, rndv, why, n))
        return WIRE_VIOLATION;
    if (sess->await_ready && id != WIRE_READY) {
        bad(why, n, "sent %s before READY", wire_name(id));
        return WIRE_VIOLATION;
    }
    memcpy(&out->u, hdr, hlen);
    bool ok = true;
    switch (id) {
    case WIRE_READY:
        ok = check_plain(id, &h, len, why, n);
        if (ok && !sess->await_ready)
            ok = bad(why, n, "sent READY twice");
        if (ok)
            sess->await_ready = false;
        break;
    case WIRE_NOTIFY:
    case WIRE_BYE: ok = check_plain(id, &h, len, why, n); break;
    case WIRE_BEGIN: ok = check_begin(&out->u.begin, len, why, n); break;
    case WIRE_DATA: ok = check_data(&out->u.data, len, rndv, why, n); break;
    case WIRE_CMA: ok = check_cma(&out->u.cma, len, why, n); break;
    case WIRE_CMA_OK:
        /* a status: 0 and the proof it read (a MAC), or a kvrt error and
         * why not */
        ok = zero(id, out->u.status.reserved, why, n) && status_ok(id, out->u.status.status, why, n) &&
             data_at_most(id, len, XFER_MAX_REASON, why, n) &&
             (out->u.status.status != KVRT_OK || len == XFER_MAC_BYTES ||
              bad(why, n, "sent CMA_OK 0 with %zu bytes of proof (valid: %d)", len, XFER_MAC_BYTES)) &&
             (h.xid == 0 || bad(why, n, "sent CMA_OK for stream %llu (it names none)", ULL(h.xid)));
        break;
    case WIRE_RELEASE: ok = check_release(&out->u.release, len, why, n); break;
    case WIRE_ACK:
    case WIRE_END: ok = check_status(id, &out->u.status, len, why, n); break;
    case WIRE_ABORT: ok = check_abort(&out->u.abort, len, why, n); break;
    default: break;
    }
    return ok ? WIRE_OK : WIRE_VIOLATION;
}

/* ---- the handshake --------------------------------------------------------- */

static bool protocol_ok(unsigned id, uint16_t protocol, uint16_t flags, char *why, size_t n)
{
    if (protocol != WIRE_PROTOCOL)
        return bad(why, n, "sent %s for protocol version %u; this kvrt-xfer speaks version %u", wire_name(id),
                   (unsigned)protocol, WIRE_PROTOCOL);
    if (flags & ~(uint16_t)WIRE_KEYED)
        return bad(why, n, "sent %s with flags 0x%x (valid: 0x1, a key)", wire_name(id), (unsigned)flags);
    return true;
}

bool wire_decode_hello(const void *hdr, size_t hlen, size_t len, bool rndv, struct wire_hello *out, char *why, size_t n)
{
    if (!header_size(WIRE_HELLO, hlen, sizeof(*out), why, n) || !eager(WIRE_HELLO, rndv, why, n))
        return false;
    memcpy(out, hdr, sizeof(*out));
    if (out->magic != WIRE_MAGIC)
        return bad(why, n, "sent a HELLO without kvrt-xfer's magic (0x%08x; it is 0x%08x)", (unsigned)out->magic,
                   WIRE_MAGIC);
    if (!protocol_ok(WIRE_HELLO, out->protocol, out->flags, why, n))
        return false;
    if (len == 0 || len > WIRE_MAX_BLOB)
        return bad(why, n, "sent a HELLO with %zu bytes of metadata (valid are 1..%u)", len, WIRE_MAX_BLOB);
    return true;
}

bool wire_decode_reply(const void *hdr, size_t hlen, size_t len, bool rndv, struct wire_reply *out, char *why, size_t n)
{
    if (!header_size(WIRE_REPLY, hlen, sizeof(*out), why, n) || !eager(WIRE_REPLY, rndv, why, n))
        return false;
    memcpy(out, hdr, sizeof(*out));
    if (!protocol_ok(WIRE_REPLY, out->protocol, out->flags, why, n) || !status_ok(WIRE_REPLY, out->status, why, n))
        return false;
    if (len > WIRE_MAX_BLOB || (out->status == KVRT_OK && len == 0))
        return bad(why, n, "sent a REPLY with %zu bytes of data (valid are 1..%u)", len, WIRE_MAX_BLOB);
    return true;
}

bool wire_decode_proof(const void *hdr, size_t hlen, size_t len, bool rndv, struct wire_proof *out, char *why, size_t n)
{
    if (!header_size(WIRE_PROOF, hlen, sizeof(*out), why, n) || !eager(WIRE_PROOF, rndv, why, n))
        return false;
    if (len)
        return bad(why, n, "sent PROOF with %zu bytes of data (it has none)", len);
    memcpy(out, hdr, sizeof(*out));
    return true;
}

bool wire_decode_accept(const void *hdr, size_t hlen, size_t len, bool rndv, struct wire_accept *out, char *why,
                        size_t n)
{
    if (!header_size(WIRE_ACCEPT, hlen, sizeof(*out), why, n) || !eager(WIRE_ACCEPT, rndv, why, n))
        return false;
    memcpy(out, hdr, sizeof(*out));
    return zero(WIRE_ACCEPT, out->reserved, why, n) && status_ok(WIRE_ACCEPT, out->status, why, n) &&
           data_at_most(WIRE_ACCEPT, len, XFER_MAX_REASON, why, n);
}
