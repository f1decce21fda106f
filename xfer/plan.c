/*
 * Planning: the complete check of a request, the byte order and chunk size
 * of its stream, and this side's runs of it.
 *
 * Layer 5 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

int xfer_check_reserved(const uint8_t *bytes, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (bytes[i] != 0)
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "%s.reserved[%zu] is %u, but reserved bytes must be 0 (this libkvrt-xfer speaks API "
                             "%d.%d); fill the struct with its _default() function or a designated initialiser",
                             what, i, (unsigned)bytes[i], KVRT_XFER_API_VERSION_MAJOR, KVRT_XFER_API_VERSION_MINOR);
    return KVRT_OK;
}

struct checked {
    struct xfer_sel lsel, rsel;
    bool full;
    /* A token range: each side's block size and the blocks of its table
     * that the range touches. */
    uint64_t lbs, rbs, lfrom, ln, rfrom, rn;
};

/* Whole blocks: ids in range on both sides, block sizes alike. */
static int check_blocks(const struct xfer_local *local, const struct xfer_md *peer, const struct kvrt_xfer_request *r,
                        struct checked *in)
{
    bool push = r->direction == KVRT_XFER_PUSH;
    if (r->token_start)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt-xfer request: token_start %llu without num_tokens; give num_tokens for a token range, "
                         "or 0 for both to move whole blocks",
                         ULL(r->token_start));
    if (r->remote_num_blocks && r->remote_num_blocks != r->num_blocks)
        return BASE_FAIL(
            KVRT_ERR_INVALID,
            "kvrt-xfer request: %zu local and %llu remote block ids; whole blocks move in pairs (tables of "
            "different lengths need a token range: token_start, num_tokens)",
            r->num_blocks, ULL(r->remote_num_blocks));
    int rc = xfer_check_ids(r->local_ids, r->num_blocks, local->desc.num_blocks, "local", "local_ids", !push);
    if (rc == KVRT_OK)
        rc = xfer_check_ids(r->remote_ids, r->num_blocks, peer->cache.num_blocks, "remote", "remote_ids", push);
    if (rc == KVRT_OK)
        rc = xfer_sel_whole_blocks(&local->desc, &peer->cache, &in->lsel);
    in->ln = in->rn = r->num_blocks;
    return rc;
}

/* One side's table against the range: long enough, ids in range. */
static int check_table(const struct kvrt_xfer_request *r, const int64_t *table, uint64_t len, uint64_t bs,
                       uint64_t limit, bool dest, const char *side, const char *name, uint64_t *from, uint64_t *n)
{
    int rc = xfer_tokens_blocks(r->token_start, r->num_tokens, bs, from, n);
    if (rc != KVRT_OK)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt-xfer request: tokens %llu+%llu are out of range (the range must end below 2^63)",
                         ULL(r->token_start), ULL(r->num_tokens));
    if (len < *from + *n)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt-xfer request: tokens %llu..%llu need %llu entries of the %s block table (%llu-token "
                         "blocks); %s has %llu",
                         ULL(r->token_start), ULL(r->token_start + r->num_tokens - 1), ULL(*from + *n), side, ULL(bs),
                         name, ULL(len));
    return xfer_check_table(table, *from, *n, limit, side, name, dest);
}

/* A token range: layers of one state per token, tables long enough. */
static int check_tokens(const struct xfer_local *local, const struct xfer_md *peer, const struct kvrt_xfer_request *r,
                        struct checked *in)
{
    bool push = r->direction == KVRT_XFER_PUSH;
    uint64_t rlen = r->remote_num_blocks ? r->remote_num_blocks : r->num_blocks;
    /* the layers' block sizes were read (validate) */
    int rc = check_table(r, r->local_ids, r->num_blocks, in->lbs, local->desc.num_blocks, !push, "local", "local_ids",
                         &in->lfrom, &in->ln);
    if (rc == KVRT_OK)
        rc = check_table(r, r->remote_ids, rlen, in->rbs, peer->cache.num_blocks, push, "remote", "remote_ids",
                         &in->rfrom, &in->rn);
    return rc;
}

static int validate(const struct xfer_local *local, const struct xfer_md *peer, const struct kvrt_xfer_request *r,
                    struct checked *in)
{
    if (r->size != sizeof(*r))
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt-xfer request: request size %zu; expected %zu (call "
                         "kvrt_xfer_request_default)",
                         r->size, sizeof(*r));
    int rc = xfer_check_reserved(r->reserved, sizeof(r->reserved), "kvrt_xfer_request");
    if (rc != KVRT_OK)
        return rc;
    if (r->direction != KVRT_XFER_PUSH && r->direction != KVRT_XFER_PULL)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer request: direction %d; valid are 0 (push) and 1 (pull)",
                         (int)r->direction);
    if (!kvrt_xfer_method_name(r->method))
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer request: method %d; valid are %s", (int)r->method,
                         xfer_method_values());
    if (r->num_blocks == 0)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer request: num_blocks is 0; a transfer moves at least one block");
    const struct xfer_desc *L = &local->desc, *R = &peer->cache;
    uint64_t nl = r->num_layers;
    if (r->layer_start >= L->num_layers)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt-xfer request: layer_start %llu is out of range; the model has "
                         "%llu layers",
                         ULL(r->layer_start), ULL(L->num_layers));
    if (nl == 0)
        nl = L->num_layers - r->layer_start;
    if (nl > L->num_layers - r->layer_start)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt-xfer request: layers %llu..%llu are out of range; the model has "
                         "%llu layers",
                         ULL(r->layer_start), ULL(r->layer_start + nl - 1), ULL(L->num_layers));
    in->lsel = (struct xfer_sel){r->layer_start, nl, r->local_head_start, r->num_heads};
    in->rsel = (struct xfer_sel){r->layer_start, nl, r->remote_head_start, r->num_heads};
    in->full = nl == L->num_layers;
    /* A token range names a state layer before anything about its heads. */
    if (r->num_tokens && ((rc = xfer_sel_token_block_size(L, &in->lsel, "here", &in->lbs)) != KVRT_OK ||
                          (rc = xfer_sel_token_block_size(R, &in->rsel, "on the peer", &in->rbs)) != KVRT_OK))
        return rc;
    for (uint64_t l = r->layer_start; l < r->layer_start + nl; l++) {
        uint64_t lh = L->layers[l].heads, rh = R->layers[l].heads;
        if (r->num_heads == 0) {
            if (r->local_head_start || r->remote_head_start)
                return BASE_FAIL(KVRT_ERR_INVALID,
                                 "kvrt-xfer request: head starts %llu/%llu given without "
                                 "num_heads",
                                 ULL(r->local_head_start), ULL(r->remote_head_start));
            if (lh != rh)
                return BASE_FAIL(KVRT_ERR_INVALID,
                                 "incompatible peer: layer %llu has %llu KV heads here and %llu on "
                                 "the peer; pass a head range (num_heads) to move a slice",
                                 ULL(l), ULL(lh), ULL(rh));
            in->lsel.num_heads = in->rsel.num_heads = lh;
            /* Layers may differ in heads only in a uniform way: one count
             * per request. */
            if (l > r->layer_start && lh != L->layers[r->layer_start].heads)
                return BASE_FAIL(KVRT_ERR_UNSUPPORTED,
                                 "kvrt-xfer request: layers %llu and %llu differ in heads "
                                 "(%llu, %llu); transfer them in separate layer ranges",
                                 ULL(r->layer_start), ULL(l), ULL(L->layers[r->layer_start].heads), ULL(lh));
        } else {
            if (r->local_head_start + r->num_heads > lh || r->local_head_start + r->num_heads < r->num_heads)
                return BASE_FAIL(KVRT_ERR_INVALID,
                                 "kvrt-xfer request: local heads %llu..%llu are out of range; "
                                 "layer %llu has %llu here",
                                 ULL(r->local_head_start), ULL(r->local_head_start + r->num_heads - 1), ULL(l),
                                 ULL(lh));
            if (r->remote_head_start + r->num_heads > rh || r->remote_head_start + r->num_heads < r->num_heads)
                return BASE_FAIL(KVRT_ERR_INVALID,
                                 "kvrt-xfer request: remote heads %llu..%llu are out of range; "
                                 "layer %llu has %llu on the peer",
                                 ULL(r->remote_head_start), ULL(r->remote_head_start + r->num_heads - 1), ULL(l),
                                 ULL(rh));
            if (r->num_heads != lh || r->num_heads != rh)
                in->full = false;
        }
    }
    if (r->notification_len && !r->notification)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer request: notification is NULL with length %zu",
                         r->notification_len);
    if (r->notification_len > KVRT_XFER_MAX_NOTIFICATION)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer request: a %zu-byte notification; at most %u bytes",
                         r->notification_len, (unsigned)KVRT_XFER_MAX_NOTIFICATION);
    return r->num_tokens ? check_tokens(local, peer, r, in) : check_blocks(local, peer, r, in);
}

/* The method and the stream's order; its reason in why.  `refs`: the
 * receiver reads the chunks in place. */
static int choose(const struct xfer_local *local, const struct xfer_md *peer, const struct kvrt_xfer_request *r,
                  const struct checked *c, bool refs, enum kvrt_xfer_method *method, unsigned *order, char *why,
                  size_t n)
{
    bool both = local->addr && peer->f.addressable;
    bool same = both && c->full && !r->num_tokens && xfer_desc_same_shape(&local->desc, &peer->cache);
    const char *here = kvrt_layout_name(local->desc.layout), *there = kvrt_layout_name(peer->cache.layout);
    bool push = r->direction == KVRT_XFER_PUSH;
    enum kvrt_xfer_method m = r->method;
    if (r->num_tokens && (!both || m == KVRT_XFER_REGIONS || m == KVRT_XFER_STAGING))
        return BASE_FAIL(KVRT_ERR_UNSUPPORTED,
                         "kvrt-xfer request: a token range moves by method direct, between two caches in host memory "
                         "(%s%s)",
                         !both
                             ? (local->addr ? "the peer's cache has no host address" : "this cache has no host address")
                             : "method ",
                         !both ? "" : kvrt_xfer_method_name(m));
    if (m == KVRT_XFER_REGIONS && !same)
        return BASE_FAIL(KVRT_ERR_UNSUPPORTED,
                         "kvrt-xfer request: method regions needs the same layout and "
                         "specs on both sides, whole pages and host caches (here %s, the peer %s%s%s)",
                         here, there, c->full ? "" : ", a layer or head selection",
                         both ? "" : ", a cache without a host address");
    if (m == KVRT_XFER_DIRECT && !both)
        return BASE_FAIL(KVRT_ERR_UNSUPPORTED,
                         "kvrt-xfer request: method direct needs both caches in registered host memory (%s side has "
                         "none); use staging",
                         local->addr ? "the peer's" : "this");
    if (m == KVRT_XFER_AUTO)
        m = same ? KVRT_XFER_REGIONS : both ? KVRT_XFER_DIRECT : KVRT_XFER_STAGING;
    bool forced = r->method != KVRT_XFER_AUTO;
    switch (m) {
    case KVRT_XFER_REGIONS:
        *order = (unsigned)local->desc.layout;
        snprintf(why, n, "same layout (%s) and specs: chunks go from cache to cache%s", here,
                 forced ? " (forced)" : "");
        break;
    case KVRT_XFER_DIRECT:
        /* Read in place, the receiver's pieces are the kernel's iovecs:
         * the destination's order keeps them long, and the sender, which
         * packs anyway, gathers the short ones.  Otherwise the source's
         * order keeps the sender's runs long and the receiver scatters. */
        *order = (unsigned)(push != refs ? local->desc.layout : peer->cache.layout);
        if (refs)
            snprintf(why, n,
                     "%s -> %s in the destination's order, read in place by the destination (one host): the source "
                     "packs, the destination reads its runs whole%s",
                     push ? here : there, push ? there : here, forced ? " (forced)" : "");
        else if (r->num_tokens)
            snprintf(why, n,
                     "tokens %llu+%llu, %llu-token blocks -> %llu, %s -> %s in the source's order: long runs leave "
                     "it, the destination scatters%s",
                     ULL(r->token_start), ULL(r->num_tokens), ULL(push ? c->lbs : c->rbs), ULL(push ? c->rbs : c->lbs),
                     push ? here : there, push ? there : here, forced ? " (forced)" : "");
        else
            snprintf(why, n, "%s -> %s in the source's order: long runs leave it, the destination scatters%s",
                     push ? here : there, push ? there : here, forced ? " (forced)" : "");
        break;
    default:
        *order = WIRE_ORDER_STAGING;
        if (forced)
            snprintf(why, n, "staging (forced)");
        else
            snprintf(why, n, "%s memory has no host address: whole blocks through the backend in staging order",
                     local->addr ? "the peer's" : "this cache's");
        break;
    }
    *method = m;
    return KVRT_OK;
}

int xfer_plan_make(const struct xfer_local *local, uint64_t local_chunk, const struct xfer_md *peer, bool in_place,
                   const struct kvrt_xfer_request *r, struct xfer_planned *ps, struct kvrt_xfer_plan *out)
{
    memset(ps, 0, sizeof(*ps));
    memset(out, 0, sizeof(*out));
    out->size = sizeof(*out);
    struct checked c;
    int rc = validate(local, peer, r, &c);
    if (rc != KVRT_OK)
        return rc;
    unsigned order;
    bool push = r->direction == KVRT_XFER_PUSH;
    /* By reference only into a cache with a host address: its runs are
     * where the kernel writes. */
    bool refs = in_place && (push ? peer->f.addressable : local->addr != NULL);
    rc = choose(local, peer, r, &c, refs, &ps->method, &order, out->why, sizeof(out->why));
    if (rc != KVRT_OK)
        return rc;
    ps->push = push;
    ps->remote_sel = c.rsel;
    ps->pull_refs = refs && !push;
    struct xfer_span *sp = &ps->local;
    sp->order = order;
    sp->refs = refs && push;
    sp->sel = c.lsel;
    /* A token range sends only the blocks it touches, and walks segments of
     * the source's block size. */
    sp->nblocks = c.ln;
    ps->remote_n = c.rn;
    sp->ids = xfer_ids_copy(r->local_ids + (r->num_tokens ? c.lfrom : 0), c.ln);
    ps->remote_ids = xfer_ids_copy(r->remote_ids + (r->num_tokens ? c.rfrom : 0), c.rn);
    if (r->num_tokens) {
        /* Segments of the block size of the side whose order the stream
         * takes (the source's; the destination's when it reads in place). */
        sp->bs = c.lbs;
        sp->tok = (struct xfer_tokens){r->token_start, r->num_tokens, push != refs ? c.lbs : c.rbs};
    }
    if (!sp->ids || !ps->remote_ids) {
        xfer_planned_free(ps);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_post: out of memory for %zu block ids", r->num_blocks);
    }
    /* Both sides' slots must hold a packed chunk; a side without a host
     * address packs whole blocks. */
    uint64_t block = xfer_sel_block_bytes(&local->desc, &c.lsel), chunk;
    bool both = local->addr && peer->f.addressable;
    if (both) {
        chunk = local_chunk < peer->f.chunk_bytes ? local_chunk : peer->f.chunk_bytes;
    } else {
        uint64_t mine = local_chunk / local->desc.staging_per_block;
        uint64_t theirs = peer->f.chunk_bytes / peer->cache.staging_per_block;
        uint64_t blocks = mine < theirs ? mine : theirs;
        chunk = (blocks ? blocks : 1) * block;
    }
    if (r->num_tokens)
        rc = xfer_runs_build_tokens(&local->desc, sp->ids, sp->nblocks, sp->bs, &sp->tok, &sp->sel, order, &sp->runs);
    else if (local->addr)
        rc = xfer_runs_build(&local->desc, sp->ids, sp->nblocks, &sp->sel, order, &sp->runs);
    if (rc == KVRT_OK)
        rc = xfer_span_chunking(sp, local, chunk);
    if (rc != KVRT_OK) {
        xfer_planned_free(ps);
        return rc;
    }
    out->method = ps->method;
    out->bytes = sp->ch.total;
    out->wire_bytes = sp->ch.total;
    out->chunks = sp->ch.count;
    out->messages = sp->ch.count;
    out->chunk_blocks = block && sp->ch.chunk % block == 0 ? sp->ch.chunk / block : 0;
    /* The source's runs: this side's for a push; for a pull the peer's,
     * which its metadata lets this side count. */
    if (!ps->push && peer->f.addressable && order != WIRE_ORDER_STAGING) {
        struct xfer_runs theirs;
        int got = r->num_tokens ? xfer_runs_build_tokens(&peer->cache, ps->remote_ids, ps->remote_n, c.rbs, &sp->tok,
                                                         &c.rsel, order, &theirs)
                                : xfer_runs_build(&peer->cache, ps->remote_ids, ps->remote_n, &c.rsel, order, &theirs);
        if (got == KVRT_OK)
            out->regions = theirs.n;
        xfer_runs_free(&theirs);
    } else if (ps->push && local->addr && order != WIRE_ORDER_STAGING) {
        out->regions = sp->runs.n;
    } else {
        out->regions = sp->ch.count;
    }
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

void xfer_planned_free(struct xfer_planned *ps)
{
    xfer_span_free(&ps->local);
    free(ps->remote_ids);
    ps->remote_ids = NULL;
}
