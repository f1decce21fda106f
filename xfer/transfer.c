/*
 * Transfers: validation, the choice of method, the plans and their
 * execution, and the serving side of staged transfers.
 *
 *   REGIONS  same layout and specs, whole pages: the core's transfer regions
 *            (kvrt_transfer_regions) of each run of consecutive id pairs, one
 *            RMA per region (split only where the two sides' merged regions
 *            end at different bytes).
 *   DIRECT   two registered caches of different layouts (or a layer/head
 *            selection): (C-byte cell) pairs enumerated in the source's
 *            physical order and merged while both sides stay contiguous; one
 *            RMA per merged run.  Chosen when runs average >= 4 KiB.
 *   STAGING  otherwise: the source gathers into its registered area in
 *            staging order, one RMA moves the batch, the destination's
 *            backend scatters it (docs/xfer.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/transfer.h>

#include "xfer_internal.h"

/* Average run length from which region-to-region RMA beats staging: below
 * it, per-operation cost dominates and two local copies are cheaper. */
#define DIRECT_MIN_RUN 4096u

struct op {
    uint64_t loff, roff, len;
};

struct ops {
    struct op *v;
    size_t n, cap;
    bool nomem;
};

static void ops_add(struct ops *o, uint64_t loff, uint64_t roff, uint64_t len, bool merge)
{
    if (merge && o->n > 0) {
        struct op *last = &o->v[o->n - 1];
        if (last->loff + last->len == loff && last->roff + last->len == roff) {
            last->len += len;
            return;
        }
    }
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 256;
        struct op *v = realloc(o->v, cap * sizeof(*v));
        if (!v) {
            o->nomem = true;
            return;
        }
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = (struct op){loff, roff, len};
}

/* ---- validation -------------------------------------------------------------- */

struct plan_in {
    const struct kvrt_xfer_request *req;
    struct xfer_sel lsel, rsel;
    bool full;
};

static int check_ids(const int64_t *ids, size_t n, uint64_t limit, const char *side, const char *name, bool unique)
{
    if (n && !ids)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_transfer: %s is NULL for %zu blocks", name, n);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint64_t)ids[i] >= limit)
            return XFER_FAIL(KVRT_ERR_INVALID,
                             "kvrt_xfer_transfer: %s block id %lld at %s[%zu] is out of range; "
                             "the %s cache has %llu blocks (valid ids 0..%llu)",
                             side, (long long)ids[i], name, i, side, ULL(limit), ULL(limit - 1));
    if (unique && n > 1) {
        uint8_t *seen = calloc((size_t)limit / 8 + 1, 1);
        if (!seen)
            return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_transfer: out of memory");
        for (size_t i = 0; i < n; i++) {
            uint64_t b = (uint64_t)ids[i];
            if (seen[b / 8] & (1u << (b % 8))) {
                free(seen);
                return XFER_FAIL(KVRT_ERR_INVALID,
                                 "kvrt_xfer_transfer: destination block id %lld appears twice "
                                 "in %s (at %zu and before); each destination block can be written once",
                                 (long long)ids[i], name, i);
            }
            seen[b / 8] |= (uint8_t)(1u << (b % 8));
        }
        free(seen);
    }
    return KVRT_OK;
}

static int validate(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *r, struct plan_in *in)
{
    if (!a || !p || !r)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_transfer: NULL argument");
    if (r->size < sizeof(*r))
        return XFER_FAIL(KVRT_ERR_INVALID,
                         "kvrt_xfer_transfer: request size %zu; expected %zu (call "
                         "kvrt_xfer_request_default)",
                         r->size, sizeof(*r));
    if (p->agent != a || !p->loaded)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_transfer: the peer does not belong to this agent");
    int rc = xfer_peer_ok(p, "kvrt_xfer_transfer");
    if (rc != KVRT_OK)
        return rc;
    if (r->direction != KVRT_XFER_PUSH && r->direction != KVRT_XFER_PULL)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_transfer: direction %d; valid are 0 (push) and 1 (pull)",
                         (int)r->direction);
    if (!kvrt_xfer_method_name(r->method))
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_transfer: method %d; valid are %s", (int)r->method,
                         xfer_method_values());
    const struct xfer_cache_desc *L = &a->local, *R = &p->md.cache;
    bool push = r->direction == KVRT_XFER_PUSH;
    if ((rc = check_ids(r->local_ids, r->num_blocks, L->num_blocks, "local", "local_ids", !push)) != KVRT_OK ||
        (rc = check_ids(r->remote_ids, r->num_blocks, R->num_blocks, "remote", "remote_ids", push)) != KVRT_OK)
        return rc;
    uint64_t nl = r->num_layers;
    if (r->layer_start >= L->num_layers)
        return XFER_FAIL(KVRT_ERR_INVALID,
                         "kvrt_xfer_transfer: layer_start %llu is out of range; the model has "
                         "%llu layers",
                         ULL(r->layer_start), ULL(L->num_layers));
    if (nl == 0)
        nl = L->num_layers - r->layer_start;
    if (nl > L->num_layers - r->layer_start)
        return XFER_FAIL(KVRT_ERR_INVALID,
                         "kvrt_xfer_transfer: layers %llu..%llu are out of range; the model has "
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
                                 "kvrt_xfer_transfer: head starts %llu/%llu given without "
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
                                 "kvrt_xfer_transfer: layers %llu and %llu differ in heads "
                                 "(%llu, %llu); transfer them in separate layer ranges",
                                 ULL(r->layer_start), ULL(l), ULL(L->layers[r->layer_start].heads), ULL(lh));
        } else {
            if (r->local_head_start + r->num_heads > lh || r->local_head_start + r->num_heads < r->num_heads)
                return XFER_FAIL(KVRT_ERR_INVALID,
                                 "kvrt_xfer_transfer: local heads %llu..%llu are out of range; "
                                 "layer %llu has %llu here",
                                 ULL(r->local_head_start), ULL(r->local_head_start + r->num_heads - 1), ULL(l),
                                 ULL(lh));
            if (r->remote_head_start + r->num_heads > rh || r->remote_head_start + r->num_heads < r->num_heads)
                return XFER_FAIL(KVRT_ERR_INVALID,
                                 "kvrt_xfer_transfer: remote heads %llu..%llu are out of range; "
                                 "layer %llu has %llu on the peer",
                                 ULL(r->remote_head_start), ULL(r->remote_head_start + r->num_heads - 1), ULL(l),
                                 ULL(rh));
            if (r->num_heads != lh || r->num_heads != rh)
                in->full = false;
        }
    }
    if (r->notification_len && !r->notification)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_transfer: notification is NULL with length %zu",
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
        rc = XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for %zu RMA regions", o->n);
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
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for %zu RMA regions", o->n);
    return KVRT_OK;
}

struct plan_state {
    struct plan_in in;
    struct ops ops;
    enum kvrt_xfer_method method;
    uint64_t block_bytes; /* packed staging bytes per block */
    uint64_t batch;       /* blocks per staging round */
};

static int make_plan(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *r, struct plan_state *ps,
                     struct kvrt_xfer_plan *out)
{
    memset(ps, 0, sizeof(*ps));
    memset(out, 0, sizeof(*out));
    out->size = sizeof(*out);
    int rc = validate(a, p, r, &ps->in);
    if (rc != KVRT_OK)
        return rc;
    bool both = a->cache_registered && p->md.registered;
    bool same = both && ps->in.full && same_shape(&a->local, &p->md.cache);
    ps->block_bytes = xfer_sel_block_bytes(&a->local, &ps->in.lsel);
    out->bytes = ps->block_bytes * r->num_blocks;
    enum kvrt_xfer_method m = r->method;
    if (m == KVRT_XFER_REGIONS && !same)
        return XFER_FAIL(KVRT_ERR_UNSUPPORTED,
                         "kvrt_xfer_transfer: method regions needs the same layout and "
                         "specs on both sides, whole pages and registered caches (here %s, the peer %s%s%s)",
                         kvrt_layout_name(a->local.layout), kvrt_layout_name(p->md.cache.layout),
                         ps->in.full ? "" : ", a layer or head selection",
                         both ? "" : ", a cache without registered memory");
    if (m == KVRT_XFER_DIRECT && !both)
        return XFER_FAIL(KVRT_ERR_UNSUPPORTED,
                         "kvrt_xfer_transfer: method direct needs both caches in registered "
                         "host memory (%s side has none); use staging",
                         a->cache_registered ? "the peer's" : "this");
    if (m == KVRT_XFER_AUTO && same)
        m = KVRT_XFER_REGIONS;
    if (m == KVRT_XFER_REGIONS) {
        rc = plan_regions(a, p, r, &ps->ops);
        snprintf(out->why, sizeof(out->why), "same layout (%s) and specs: one RMA per planned region",
                 kvrt_layout_name(a->local.layout));
    } else if (m == KVRT_XFER_DIRECT || (m == KVRT_XFER_AUTO && both)) {
        rc = plan_direct(a, p, &ps->in, &ps->ops);
        uint64_t avg = ps->ops.n ? out->bytes / ps->ops.n : 0;
        if (rc == KVRT_OK && m == KVRT_XFER_AUTO && avg < DIRECT_MIN_RUN) {
            m = KVRT_XFER_STAGING;
            snprintf(out->why, sizeof(out->why), "%s -> %s runs average %llu bytes (< %u): staging order is cheaper",
                     kvrt_layout_name(a->local.layout), kvrt_layout_name(p->md.cache.layout), ULL(avg), DIRECT_MIN_RUN);
            free(ps->ops.v);
            memset(&ps->ops, 0, sizeof(ps->ops));
        } else {
            if (m == KVRT_XFER_AUTO)
                m = KVRT_XFER_DIRECT;
            snprintf(out->why, sizeof(out->why), "%s -> %s region-to-region runs average %llu bytes%s",
                     kvrt_layout_name(a->local.layout), kvrt_layout_name(p->md.cache.layout), ULL(avg),
                     r->method == KVRT_XFER_DIRECT ? " (forced)" : "");
        }
    } else {
        if (m == KVRT_XFER_AUTO)
            snprintf(out->why, sizeof(out->why), "%s memory is not registrable: host staging through the backend",
                     a->cache_registered ? "the peer's" : "this cache's");
        else
            snprintf(out->why, sizeof(out->why), "staging (forced)");
        m = KVRT_XFER_STAGING;
    }
    if (rc != KVRT_OK) {
        free(ps->ops.v);
        memset(&ps->ops, 0, sizeof(ps->ops));
        return rc;
    }
    ps->method = m;
    out->method = m;
    if (m == KVRT_XFER_STAGING) {
        uint64_t area = a->area_bytes < p->md.area_bytes ? a->area_bytes : p->md.area_bytes;
        ps->batch = ps->block_bytes ? area / ps->block_bytes : r->num_blocks;
        if (ps->batch == 0)
            return XFER_FAIL(KVRT_ERR_UNSUPPORTED,
                             "kvrt_xfer_transfer: one block needs %llu staging bytes but the "
                             "smaller staging area holds %llu",
                             ULL(ps->block_bytes), ULL(area));
        out->batches = ps->batch ? (r->num_blocks + ps->batch - 1) / ps->batch : 0;
        out->regions = out->batches;
        out->wire_bytes = out->bytes;
    } else {
        out->regions = ps->ops.n;
        for (size_t i = 0; i < ps->ops.n; i++)
            out->wire_bytes += ps->ops.v[i].len;
    }
    return KVRT_OK;
}

void kvrt_xfer_request_default(struct kvrt_xfer_request *req)
{
    memset(req, 0, sizeof(*req));
    req->size = sizeof(*req);
}

int kvrt_xfer_plan(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *req,
                   struct kvrt_xfer_plan *plan)
{
    struct plan_state ps;
    struct kvrt_xfer_plan tmp;
    int rc = make_plan(a, p, req, &ps, plan ? plan : &tmp);
    free(ps.ops.v);
    return rc;
}

/* ---- execution -------------------------------------------------------------- */

static int flush(kvrt_xfer_agent *a, kvrt_xfer_peer *p)
{
    ucp_request_param_t prm;
    memset(&prm, 0, sizeof(prm));
    return xfer_wait(a, p, ucp_ep_flush_nbx(xfer_data_ep(p), &prm), "waiting for the RMA to complete");
}

static int rma(kvrt_xfer_agent *a, kvrt_xfer_peer *p, bool put, void *local, uint64_t raddr, ucp_rkey_h rkey,
               uint64_t len)
{
    ucp_request_param_t prm;
    memset(&prm, 0, sizeof(prm));
    void *req = put ? ucp_put_nbx(xfer_data_ep(p), local, len, raddr, rkey, &prm)
                    : ucp_get_nbx(xfer_data_ep(p), local, len, raddr, rkey, &prm);
    if (UCS_PTR_IS_ERR(req))
        return XFER_FAIL(KVRT_ERR_DEVICE, "kvrt-xfer: %s of %llu bytes failed: %s", put ? "ucp_put_nbx" : "ucp_get_nbx",
                         ULL(len), ucs_status_string(UCS_PTR_STATUS(req)));
    /* Completion (and any error) is collected by the flush. */
    if (req)
        ucp_request_free(req);
    return xfer_peer_ok(p, "kvrt_xfer_transfer");
}

static int run_ops(kvrt_xfer_agent *a, kvrt_xfer_peer *p, bool push, const struct ops *o, uint64_t *issued)
{
    uint8_t *base = a->cache_addr;
    for (size_t i = 0; i < o->n; i++) {
        int rc = rma(a, p, push, base + o->v[i].loff, p->md.cache_addr + o->v[i].roff, p->cache_rkey, o->v[i].len);
        if (rc != KVRT_OK)
            return rc;
        ++*issued;
        /* Keep the pipeline moving (and the peer's tcp RMA emulation fed). */
        if ((i & 63) == 63)
            ucp_worker_progress(a->worker);
    }
    return flush(a, p);
}

static int wait_ack(kvrt_xfer_agent *a, kvrt_xfer_peer *p, uint64_t xid, const char *what)
{
    double deadline = xfer_now() + a->timeout_s;
    while (!(p->ack_seen && p->ack_xid == xid)) {
        ucp_worker_progress(a->worker);
        if (p->state != KVRT_XFER_PEER_CONNECTED)
            return xfer_peer_ok(p, what);
        if (xfer_now() > deadline)
            return XFER_FAIL(KVRT_ERR_DEVICE, "kvrt-xfer: %s: no answer from the peer within %g s", what, a->timeout_s);
    }
    p->ack_seen = false;
    if (p->ack_status != KVRT_OK)
        return kvrt_error_report(p->ack_status, "the peer failed to %s: %s", what, p->ack_msg);
    return KVRT_OK;
}

static int stage_request(kvrt_xfer_agent *a, kvrt_xfer_peer *p, unsigned kind, const int64_t *ids, uint64_t n,
                         const struct xfer_sel *sel, const char *what)
{
    struct xfer_stage_msg m = {a->next_xid++, n, *sel};
    p->ack_seen = false;
    int rc = xfer_am_send(a, p, kind, &m, sizeof(m), ids, n * sizeof(*ids), what);
    if (rc == KVRT_OK)
        rc = wait_ack(a, p, m.xid, what);
    return rc;
}

static int run_staging(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct plan_state *ps, uint64_t *issued)
{
    const struct kvrt_xfer_request *r = ps->in.req;
    bool push = r->direction == KVRT_XFER_PUSH;
    for (uint64_t i = 0; i < r->num_blocks; i += ps->batch) {
        uint64_t k = r->num_blocks - i < ps->batch ? r->num_blocks - i : ps->batch;
        uint64_t bytes = k * ps->block_bytes;
        int rc;
        if (push) {
            rc = xfer_stage_out(a, r->local_ids + i, k, &ps->in.lsel);
            if (rc == KVRT_OK)
                rc = rma(a, p, true, a->area_host, p->md.area_addr, p->area_rkey, bytes);
            if (rc == KVRT_OK) {
                ++*issued;
                rc = flush(a, p);
            }
            if (rc == KVRT_OK)
                rc = stage_request(a, p, XFER_AM_COMMIT, r->remote_ids + i, k, &ps->in.rsel, "scatter the blocks");
        } else {
            rc = stage_request(a, p, XFER_AM_PREPARE, r->remote_ids + i, k, &ps->in.rsel, "gather the blocks");
            if (rc == KVRT_OK)
                rc = rma(a, p, false, a->area_host, p->md.area_addr, p->area_rkey, bytes);
            if (rc == KVRT_OK) {
                ++*issued;
                rc = flush(a, p);
            }
            if (rc == KVRT_OK)
                rc = xfer_stage_in(a, r->local_ids + i, k, &ps->in.lsel);
        }
        if (rc != KVRT_OK)
            return rc;
    }
    return KVRT_OK;
}

int kvrt_xfer_transfer(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *r,
                       struct kvrt_xfer_plan *plan)
{
    double t0 = xfer_now();
    struct plan_state ps;
    struct kvrt_xfer_plan tmp;
    if (!plan)
        plan = &tmp;
    int rc = make_plan(a, p, r, &ps, plan);
    if (rc != KVRT_OK)
        return rc;
    bool push = r->direction == KVRT_XFER_PUSH;
    if (r->num_blocks > 0) {
        if (ps.method == KVRT_XFER_STAGING)
            rc = run_staging(a, p, &ps, &plan->rma_ops);
        else
            rc = run_ops(a, p, push, &ps.ops, &plan->rma_ops);
    }
    free(ps.ops.v);
    /* Flushed above: the data is complete at the destination before the
     * notification leaves. */
    if (rc == KVRT_OK && r->notification)
        rc = xfer_am_send(a, p, XFER_AM_NOTIFY, NULL, 0, r->notification, r->notification_len,
                          "sending the notification");
    plan->seconds = xfer_now() - t0;
    if (rc == KVRT_OK)
        kvrt_error_report(KVRT_OK, NULL);
    return rc;
}

/* ---- the serving side ------------------------------------------------------- */

static int serve_one(kvrt_xfer_agent *a, struct xfer_queued *q)
{
    kvrt_xfer_peer *p = q->peer;
    struct xfer_stage_msg m = {0};
    int rc = KVRT_OK;
    const char *what = q->kind == XFER_AM_COMMIT ? "scatter" : "gather";
    if (q->len < sizeof(m)) {
        rc = XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: a %s request of %zu bytes is too short", what, q->len);
    } else {
        memcpy(&m, q->data, sizeof(m));
    }
    const int64_t *ids = (const int64_t *)(void *)(q->data + sizeof(m));
    const struct xfer_cache_desc *d = &a->local;
    if (rc == KVRT_OK && (q->len - sizeof(m)) / sizeof(int64_t) != m.num_blocks)
        rc = XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: %s request announces %llu blocks but carries %zu ids", what,
                       ULL(m.num_blocks), (q->len - sizeof(m)) / sizeof(int64_t));
    if (rc == KVRT_OK)
        rc = check_ids(ids, (size_t)m.num_blocks, d->num_blocks, "local", "the request's ids",
                       q->kind == XFER_AM_COMMIT);
    if (rc == KVRT_OK && (m.sel.layer_start >= d->num_layers || m.sel.num_layers == 0 ||
                          m.sel.num_layers > d->num_layers - m.sel.layer_start))
        rc = XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: %s request names layers %llu+%llu of %llu", what,
                       ULL(m.sel.layer_start), ULL(m.sel.num_layers), ULL(d->num_layers));
    for (uint64_t l = m.sel.layer_start; rc == KVRT_OK && l < m.sel.layer_start + m.sel.num_layers; l++)
        if (m.sel.num_heads == 0 || m.sel.head_start + m.sel.num_heads > d->layers[l].heads ||
            m.sel.head_start + m.sel.num_heads < m.sel.num_heads)
            rc = XFER_FAIL(KVRT_ERR_INVALID,
                           "kvrt-xfer: %s request names heads %llu+%llu of layer %llu, which has "
                           "%llu",
                           what, ULL(m.sel.head_start), ULL(m.sel.num_heads), ULL(l), ULL(d->layers[l].heads));
    if (rc == KVRT_OK && m.num_blocks * xfer_sel_block_bytes(d, &m.sel) > a->area_bytes)
        rc = XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: %s request needs more than the %llu-byte staging area", what,
                       ULL(a->area_bytes));
    if (rc == KVRT_OK)
        rc = q->kind == XFER_AM_COMMIT ? xfer_stage_in(a, ids, m.num_blocks, &m.sel)
                                       : xfer_stage_out(a, ids, m.num_blocks, &m.sel);
    if (!p)
        return rc;
    uint8_t hdr[sizeof(uint64_t) + sizeof(int32_t)];
    int32_t st = rc;
    memcpy(hdr, &m.xid, sizeof(m.xid));
    memcpy(hdr + sizeof(m.xid), &st, sizeof(st));
    const char *msg = rc == KVRT_OK ? "" : kvrt_error_message();
    char copy[1024];
    snprintf(copy, sizeof(copy), "%s", msg);
    int sent = xfer_am_send(a, p, XFER_AM_ACK, hdr, sizeof(hdr), copy, strlen(copy), "answering the peer");
    return rc != KVRT_OK ? rc : sent;
}

int xfer_serve_inbox(kvrt_xfer_agent *a)
{
    int first = KVRT_OK;
    while (a->inbox) {
        struct xfer_queued *q = a->inbox;
        a->inbox = q->next;
        if (!a->inbox)
            a->inbox_tail = &a->inbox;
        int rc = serve_one(a, q);
        if (first == KVRT_OK)
            first = rc;
        free(q->data);
        free(q);
    }
    return first;
}
