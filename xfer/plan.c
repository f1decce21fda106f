/*
 * Planning: the complete check of a request, the choice of data path and
 * the runs or chunks it moves.
 *
 *   REGIONS  same layout and specs, whole pages: the core's transfer regions
 *            (kvrt_transfer_regions) of each run of consecutive id pairs, one
 *            message per region (split only where the two sides' merged
 *            regions end at different bytes).
 *   DIRECT   two addressable caches of different layouts (or a layer/head
 *            selection): (C-byte cell) pairs enumerated in the source's
 *            physical order and merged while both sides stay contiguous; one
 *            message per merged run.  Chosen when runs average >= 4 KiB.
 *   STAGING  otherwise: staging-order chunks, pipelined (docs/xfer.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/transfer.h>

#include "xfer_internal.h"

/* Average run length from which region-to-region messages beat staging:
 * below it, per-message cost dominates and two local copies are cheaper. */
#define DIRECT_MIN_RUN 4096u

struct ops {
    struct xfer_op *v;
    size_t n, cap;
    bool nomem;
};

static void ops_add(struct ops *o, uint64_t loff, uint64_t roff, uint64_t len, bool merge)
{
    if (merge && o->n > 0) {
        struct xfer_op *last = &o->v[o->n - 1];
        if (last->loff + last->len == loff && last->roff + last->len == roff) {
            last->len += len;
            return;
        }
    }
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 256;
        struct xfer_op *v = realloc(o->v, cap * sizeof(*v));
        if (!v) {
            o->nomem = true;
            return;
        }
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = (struct xfer_op){loff, roff, len};
}

/* ---- validation -------------------------------------------------------------- */

int xfer_check_ids(const int64_t *ids, size_t n, uint64_t limit, const char *side, const char *name, bool unique)
{
    if (n && !ids)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer request: %s is NULL for %zu blocks", name, n);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint64_t)ids[i] >= limit)
            return XFER_FAIL(KVRT_ERR_INVALID,
                             "kvrt-xfer request: %s block id %lld at %s[%zu] is out of range; "
                             "the %s cache has %llu blocks (valid ids 0..%llu)",
                             side, (long long)ids[i], name, i, side, ULL(limit), ULL(limit - 1));
    if (unique && n > 1) {
        uint8_t *seen = calloc((size_t)limit / 8 + 1, 1);
        if (!seen)
            return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer request: out of memory");
        for (size_t i = 0; i < n; i++) {
            uint64_t b = (uint64_t)ids[i];
            if (seen[b / 8] & (1u << (b % 8))) {
                free(seen);
                return XFER_FAIL(KVRT_ERR_INVALID,
                                 "kvrt-xfer request: destination block id %lld appears twice "
                                 "in %s (at %zu and before); each destination block can be written once",
                                 (long long)ids[i], name, i);
            }
            seen[b / 8] |= (uint8_t)(1u << (b % 8));
        }
        free(seen);
    }
    return KVRT_OK;
}

int xfer_check_sel(const struct xfer_cache_desc *d, const struct xfer_sel *s, const char *what)
{
    if (s->layer_start >= d->num_layers || s->num_layers == 0 || s->num_layers > d->num_layers - s->layer_start)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: %s names layers %llu+%llu of %llu", what, ULL(s->layer_start),
                         ULL(s->num_layers), ULL(d->num_layers));
    for (uint64_t l = s->layer_start; l < s->layer_start + s->num_layers; l++)
        if (s->num_heads == 0 || s->head_start + s->num_heads > d->layers[l].heads ||
            s->head_start + s->num_heads < s->num_heads)
            return XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: %s names heads %llu+%llu of layer %llu, which has %llu",
                             what, ULL(s->head_start), ULL(s->num_heads), ULL(l), ULL(d->layers[l].heads));
    return KVRT_OK;
}

static int validate(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *r, struct plan_in *in)
{
    if (!a || !p || !r)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer request: NULL argument");
    if (r->size != sizeof(*r))
        return XFER_FAIL(KVRT_ERR_INVALID,
                         "kvrt-xfer request: request size %zu; expected %zu (call "
                         "kvrt_xfer_request_default)",
                         r->size, sizeof(*r));
    int rc = xfer_check_reserved(r->reserved, sizeof(r->reserved), "kvrt_xfer_request");
    if (rc != KVRT_OK)
        return rc;
    if (p->agent != a || !p->loaded)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer request: the peer does not belong to this agent");
    if ((rc = xfer_peer_ok(p, "kvrt-xfer request")) != KVRT_OK)
        return rc;
    if (r->direction != KVRT_XFER_PUSH && r->direction != KVRT_XFER_PULL)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer request: direction %d; valid are 0 (push) and 1 (pull)",
                         (int)r->direction);
    if (!kvrt_xfer_method_name(r->method))
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer request: method %d; valid are %s", (int)r->method,
                         xfer_method_values());
    const struct xfer_cache_desc *L = &a->local, *R = &p->md.cache;
    bool push = r->direction == KVRT_XFER_PUSH;
    if ((rc = xfer_check_ids(r->local_ids, r->num_blocks, L->num_blocks, "local", "local_ids", !push)) != KVRT_OK ||
        (rc = xfer_check_ids(r->remote_ids, r->num_blocks, R->num_blocks, "remote", "remote_ids", push)) != KVRT_OK)
        return rc;
    uint64_t nl = r->num_layers;
    if (r->layer_start >= L->num_layers)
        return XFER_FAIL(KVRT_ERR_INVALID,
                         "kvrt-xfer request: layer_start %llu is out of range; the model has "
                         "%llu layers",
                         ULL(r->layer_start), ULL(L->num_layers));
    if (nl == 0)
        nl = L->num_layers - r->layer_start;
    if (nl > L->num_layers - r->layer_start)
        return XFER_FAIL(KVRT_ERR_INVALID,
                         "kvrt-xfer request: layers %llu..%llu are out of range; the model has "
                         "%llu layers",
                         ULL(r->layer_start), ULL(r->layer_start + nl - 1), ULL(L->num_layers));
    in->req = r;
    in->lsel = (struct xfer_sel){r->layer_start, nl, r->local_head_start, r->num_heads};
    in->rsel = (struct xfer_sel){r->layer_start, nl, r->remote_head_start, r->num_heads};
    in->full = nl == L->num_layers;
    for (uint64_t l = r->layer_start; l < r->layer_start + nl; l++) {
        uint64_t lh = L->layers[l].heads, rh = R->layers[l].heads;
        if (r->num_heads == 0) {
            if (r->local_head_start || r->remote_head_start)
                return XFER_FAIL(KVRT_ERR_INVALID,
                                 "kvrt-xfer request: head starts %llu/%llu given without "
                                 "num_heads",
                                 ULL(r->local_head_start), ULL(r->remote_head_start));
            if (lh != rh)
                return XFER_FAIL(KVRT_ERR_INVALID,
                                 "incompatible peer: layer %llu has %llu KV heads here and %llu on "
                                 "the peer; pass a head range (num_heads) to move a slice",
                                 ULL(l), ULL(lh), ULL(rh));
            in->lsel.num_heads = in->rsel.num_heads = lh;
            /* Layers may differ in heads only in a uniform way: one count
             * per request. */
            if (l > r->layer_start && lh != L->layers[r->layer_start].heads)
                return XFER_FAIL(KVRT_ERR_UNSUPPORTED,
                                 "kvrt-xfer request: layers %llu and %llu differ in heads "
                                 "(%llu, %llu); transfer them in separate layer ranges",
                                 ULL(r->layer_start), ULL(l), ULL(L->layers[r->layer_start].heads), ULL(lh));
        } else {
            if (r->local_head_start + r->num_heads > lh || r->local_head_start + r->num_heads < r->num_heads)
                return XFER_FAIL(KVRT_ERR_INVALID,
                                 "kvrt-xfer request: local heads %llu..%llu are out of range; "
                                 "layer %llu has %llu here",
                                 ULL(r->local_head_start), ULL(r->local_head_start + r->num_heads - 1), ULL(l),
                                 ULL(lh));
            if (r->remote_head_start + r->num_heads > rh || r->remote_head_start + r->num_heads < r->num_heads)
                return XFER_FAIL(KVRT_ERR_INVALID,
                                 "kvrt-xfer request: remote heads %llu..%llu are out of range; "
                                 "layer %llu has %llu on the peer",
                                 ULL(r->remote_head_start), ULL(r->remote_head_start + r->num_heads - 1), ULL(l),
                                 ULL(rh));
            if (r->num_heads != lh || r->num_heads != rh)
                in->full = false;
        }
    }
    if (r->notification_len && !r->notification)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer request: notification is NULL with length %zu",
                         r->notification_len);
    return KVRT_OK;
}

/* ---- plans ---------------------------------------------------------------- */

static bool same_shape(const struct xfer_cache_desc *a, const struct xfer_cache_desc *b)
{
    if (a->layout != b->layout || kvrt_placement_num_sets(a->placement) != kvrt_placement_num_sets(b->placement))
        return false;
    for (uint64_t l = 0; l < a->num_layers; l++)
        if (!kvrt_spec_equal(a->layers[l].spec, b->layers[l].spec))
            return false;
    return true;
}

/* Zip two region lists that cover the same bytes in the same order. */
static int zip(struct ops *o, const struct kvrt_region *lr, size_t nl, const struct kvrt_region *rr, size_t nr)
{
    size_t i = 0, j = 0;
    uint64_t li = 0, rj = 0; /* consumed bytes of the current regions */
    while (i < nl && j < nr) {
        uint64_t len = lr[i].length - li < rr[j].length - rj ? lr[i].length - li : rr[j].length - rj;
        ops_add(o, lr[i].offset + li, rr[j].offset + rj, len, false);
        li += len;
        rj += len;
        if (li == lr[i].length) {
            i++;
            li = 0;
        }
        if (rj == rr[j].length) {
            j++;
            rj = 0;
        }
    }
    if (i != nl || j != nr)
        return XFER_FAIL(KVRT_ERR_INTERNAL, "kvrt-xfer: the two sides' regions cover different byte counts");
    return KVRT_OK;
}

static int plan_regions(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *r, struct ops *o)
{
    size_t n = r->num_blocks;
    uint64_t *lids = malloc((n ? n : 1) * sizeof(*lids)), *rids = malloc((n ? n : 1) * sizeof(*rids));
    int rc = KVRT_OK;
    if (!lids || !rids) {
        free(lids);
        free(rids);
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        lids[i] = (uint64_t)r->local_ids[i];
        rids[i] = (uint64_t)r->remote_ids[i];
    }
    for (size_t i = 0; i < n && rc == KVRT_OK;) {
        size_t k = 1;
        while (i + k < n && lids[i + k] == lids[i] + k && rids[i + k] == rids[i] + k)
            k++;
        struct kvrt_region *lr = NULL, *rr = NULL;
        size_t nlr = 0, nrr = 0;
        rc = kvrt_transfer_regions(a->local.placement, lids + i, k, &lr, &nlr);
        if (rc == KVRT_OK)
            rc = kvrt_transfer_regions(p->md.cache.placement, rids + i, k, &rr, &nrr);
        if (rc == KVRT_OK)
            rc = zip(o, lr, nlr, rr, nrr);
        kvrt_free(lr);
        kvrt_free(rr);
        i += k;
    }
    free(lids);
    free(rids);
    if (rc == KVRT_OK && o->nomem)
        rc = XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for %zu regions", o->n);
    return rc;
}

static uint64_t cell(const struct xfer_cache_desc *d, uint64_t l, uint64_t b, uint64_t h, uint64_t s)
{
    const struct xfer_layer *L = &d->layers[l];
    uint64_t kb = b * L->kernel_blocks + s / L->kernel_states;
    return L->view.offset_bytes + kb * L->view.strides_bytes[0] + h * L->view.strides_bytes[1] +
           (s % L->kernel_states) * L->view.strides_bytes[2];
}

/* Every selected C-byte cell, in the source's physical order, merged while
 * both sides stay contiguous. */
static int plan_direct(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct plan_in *in, struct ops *o)
{
    const struct kvrt_xfer_request *r = in->req;
    bool push = r->direction == KVRT_XFER_PUSH;
    const struct xfer_cache_desc *src = push ? &a->local : &p->md.cache, *dst = push ? &p->md.cache : &a->local;
    const int64_t *sid = push ? r->local_ids : r->remote_ids, *did = push ? r->remote_ids : r->local_ids;
    const struct xfer_sel *ss = push ? &in->lsel : &in->rsel, *ds = push ? &in->rsel : &in->lsel;
    int order[KVRT_NUM_AXES];
    kvrt_layout_stride_order(src->layout, order);
    uint64_t ext[4] = {ss->num_layers, r->num_blocks, ss->num_heads, 0};
    /* States: the most of any selected layer (state layers have fewer). */
    for (uint64_t x = ss->layer_start; x < ss->layer_start + ss->num_layers; x++)
        if (src->layers[x].states > ext[3])
            ext[3] = src->layers[x].states;
    /* Loop axes outermost first (C excluded: it is the cell). */
    int loop[4], nloop = 0;
    for (int i = 0; i < KVRT_NUM_AXES; i++)
        if (order[i] != KVRT_AXIS_C)
            loop[nloop++] = order[i] == KVRT_AXIS_L ? 0 : order[i] == KVRT_AXIS_B ? 1 : order[i] == KVRT_AXIS_H ? 2 : 3;
    if (ext[0] == 0 || ext[1] == 0 || ext[2] == 0)
        return KVRT_OK;
    uint64_t idx[4] = {0, 0, 0, 0};
    for (;;) {
        uint64_t l = ss->layer_start + idx[0];
        /* Layers may differ in states (a state layer): clamp per layer. */
        if (idx[3] < src->layers[l].states) {
            uint64_t so = cell(src, l, (uint64_t)sid[idx[1]], ss->head_start + idx[2], idx[3]);
            uint64_t dof = cell(dst, l, (uint64_t)did[idx[1]], ds->head_start + idx[2], idx[3]);
            uint64_t len = src->layers[l].content;
            if (push)
                ops_add(o, so, dof, len, true);
            else
                ops_add(o, dof, so, len, true);
        }
        int k = 3;
        for (; k >= 0; k--) {
            int ax = loop[k];
            if (++idx[ax] < ext[ax])
                break;
            idx[ax] = 0;
        }
        if (k < 0)
            break;
    }
    if (o->nomem)
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for %zu regions", o->n);
    return KVRT_OK;
}

/* Messages above this are split: several in flight keep the wire busy
 * (tcp) and one loss costs less.  Docs: "Choosing the data path". */
#define MAX_MESSAGE (8ull << 20)

static uint64_t messages(const struct xfer_op *ops, size_t n)
{
    uint64_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += (ops[i].len + MAX_MESSAGE - 1) / MAX_MESSAGE;
    return m;
}

uint64_t xfer_max_message(void)
{
    return MAX_MESSAGE;
}

int xfer_plan_make(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *r, struct xfer_planned *ps,
                   struct kvrt_xfer_plan *out)
{
    memset(ps, 0, sizeof(*ps));
    memset(out, 0, sizeof(*out));
    out->size = sizeof(*out);
    int rc = validate(a, p, r, &ps->in);
    if (rc != KVRT_OK)
        return rc;
    struct ops ops = {0};
    bool both = a->addressable && p->md.addressable;
    bool same = both && ps->in.full && same_shape(&a->local, &p->md.cache);
    ps->block_bytes = xfer_sel_block_bytes(&a->local, &ps->in.lsel);
    out->bytes = ps->block_bytes * r->num_blocks;
    enum kvrt_xfer_method m = r->method;
    if (m == KVRT_XFER_REGIONS && !same)
        return XFER_FAIL(KVRT_ERR_UNSUPPORTED,
                         "kvrt-xfer request: method regions needs the same layout and "
                         "specs on both sides, whole pages and host caches (here %s, the peer %s%s%s)",
                         kvrt_layout_name(a->local.layout), kvrt_layout_name(p->md.cache.layout),
                         ps->in.full ? "" : ", a layer or head selection",
                         both ? "" : ", a cache without a host address");
    if (m == KVRT_XFER_DIRECT && !both)
        return XFER_FAIL(KVRT_ERR_UNSUPPORTED,
                         "kvrt-xfer request: method direct needs both caches in host memory (%s side has none); "
                         "use staging",
                         a->addressable ? "the peer's" : "this");
    if (m == KVRT_XFER_AUTO && same)
        m = KVRT_XFER_REGIONS;
    if (m == KVRT_XFER_REGIONS) {
        rc = plan_regions(a, p, r, &ops);
        snprintf(out->why, sizeof(out->why), "same layout (%s) and specs: one message per planned region",
                 kvrt_layout_name(a->local.layout));
    } else if (m == KVRT_XFER_DIRECT || (m == KVRT_XFER_AUTO && both)) {
        rc = plan_direct(a, p, &ps->in, &ops);
        uint64_t avg = ops.n ? out->bytes / ops.n : 0;
        if (rc == KVRT_OK && m == KVRT_XFER_AUTO && avg < DIRECT_MIN_RUN) {
            m = KVRT_XFER_STAGING;
            snprintf(out->why, sizeof(out->why), "%s -> %s runs average %llu bytes (< %u): staging order is cheaper",
                     kvrt_layout_name(a->local.layout), kvrt_layout_name(p->md.cache.layout), ULL(avg), DIRECT_MIN_RUN);
            free(ops.v);
            memset(&ops, 0, sizeof(ops));
        } else {
            if (m == KVRT_XFER_AUTO)
                m = KVRT_XFER_DIRECT;
            snprintf(out->why, sizeof(out->why), "%s -> %s region-to-region runs average %llu bytes%s",
                     kvrt_layout_name(a->local.layout), kvrt_layout_name(p->md.cache.layout), ULL(avg),
                     r->method == KVRT_XFER_DIRECT ? " (forced)" : "");
        }
    } else {
        if (m == KVRT_XFER_AUTO)
            snprintf(out->why, sizeof(out->why), "%s memory has no host address: staging through the backend",
                     a->addressable ? "the peer's" : "this cache's");
        else
            snprintf(out->why, sizeof(out->why), "staging (forced)");
        m = KVRT_XFER_STAGING;
    }
    if (rc != KVRT_OK) {
        free(ops.v);
        return rc;
    }
    ps->method = m;
    out->method = m;
    if (m == KVRT_XFER_STAGING) {
        ps->chunk_blocks = xfer_chunk_blocks(a, p);
        out->chunk_blocks = ps->chunk_blocks;
        out->chunks = (r->num_blocks + ps->chunk_blocks - 1) / ps->chunk_blocks;
        out->regions = out->chunks;
        out->messages = out->chunks;
        out->wire_bytes = out->bytes;
    } else {
        ps->ops = ops.v;
        ps->nops = ops.n;
        out->regions = ops.n;
        out->messages = messages(ops.v, ops.n);
        for (size_t i = 0; i < ops.n; i++)
            out->wire_bytes += ops.v[i].len;
    }
    return KVRT_OK;
}

void kvrt_xfer_request_default(struct kvrt_xfer_request *req)
{
    if (!req)
        return;
    memset(req, 0, sizeof(*req));
    req->size = sizeof(*req);
}

int kvrt_xfer_plan(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *req,
                   struct kvrt_xfer_plan *plan)
{
    if (!a || !p || !req || !plan)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_plan: NULL argument");
    struct xfer_planned ps;
    xfer_lock(a);
    int rc = xfer_plan_make(a, p, req, &ps, plan);
    xfer_unlock(a);
    free(ps.ops);
    if (rc == KVRT_OK)
        kvrt_error_report(KVRT_OK, NULL);
    return rc;
}
