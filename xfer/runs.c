/*
 * Runs of a stream on one side.  The cells are walked in the stream's
 * order, but not one by one: the innermost axes after the block axis whose
 * cells lie back to back in this cache (a whole page of LBHNC, a head's
 * states of BLHNC...) are found once by probing one block, and each of
 * their spans becomes one segment; segments that touch merge.  A block's
 * cells sit at the same distances from each other in every block, so one
 * block's probe holds for all.
 *
 * Layer 3 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdlib.h>
#include <string.h>

#include <kvrt/layout.h>

#include "runs.h"

enum { AX_L = XFER_AX_L, AX_B = XFER_AX_B, AX_H = XFER_AX_H, AX_N = XFER_AX_N, NUM_LOOP = XFER_NUM_AX };

struct walk {
    const struct xfer_desc *d;
    const int64_t *ids;
    uint64_t nblocks;
    const struct xfer_sel *sel;
    int axis[NUM_LOOP];  /* loop position -> axis, outermost first */
    uint64_t max_states; /* over the selected layers */
    int depth;           /* innermost loop positions gathered into one segment */
};

void xfer_runs_axes(unsigned order, int axis[XFER_NUM_AX])
{
    if (order > 5) {
        static const int staging[NUM_LOOP] = {AX_B, AX_L, AX_H, AX_N};
        memcpy(axis, staging, sizeof(staging));
        return;
    }
    int so[KVRT_NUM_AXES];
    kvrt_layout_stride_order((enum kvrt_layout)order, so);
    int k = 0;
    for (int p = 0; p < KVRT_NUM_AXES; p++)
        if (so[p] != KVRT_AXIS_C)
            axis[k++] = so[p] == KVRT_AXIS_L ? AX_L : so[p] == KVRT_AXIS_B ? AX_B : so[p] == KVRT_AXIS_H ? AX_H : AX_N;
}

static uint64_t extent(const struct walk *w, int ax, uint64_t layer)
{
    switch (ax) {
    case AX_L: return w->sel->num_layers;
    case AX_B: return w->nblocks;
    case AX_H: return w->sel->num_heads;
    default: return layer == UINT64_MAX ? w->max_states : w->d->layers[w->sel->layer_start + layer].states;
    }
}

static uint64_t cell_at(const struct walk *w, const uint64_t idx[NUM_LOOP])
{
    uint64_t l = w->sel->layer_start + idx[AX_L];
    return xfer_desc_cell(w->d, l, (uint64_t)w->ids[idx[AX_B]], w->sel->head_start + idx[AX_H], idx[AX_N]);
}

/*
 * Visit every cell of the loop positions from `from` inward, with the
 * outer positions' indices as in idx, in order; fn returns false to stop.
 * A state index past a layer's own count is skipped (state layers have
 * one state per block).
 */
typedef bool (*cell_fn)(void *ctx, const struct walk *w, const uint64_t idx[NUM_LOOP]);

static bool visit(const struct walk *w, int from, uint64_t idx[NUM_LOOP], cell_fn fn, void *ctx)
{
    if (from == NUM_LOOP) {
        if (idx[AX_N] >= w->d->layers[w->sel->layer_start + idx[AX_L]].states)
            return true;
        return fn(ctx, w, idx);
    }
    int ax = w->axis[from];
    uint64_t n = extent(w, ax, UINT64_MAX);
    for (idx[ax] = 0; idx[ax] < n; idx[ax]++)
        if (!visit(w, from + 1, idx, fn, ctx))
            return false;
    idx[ax] = 0;
    return true;
}

struct probe {
    bool started, dense;
    uint64_t next;
};

static bool probe_cell(void *ctx, const struct walk *w, const uint64_t idx[NUM_LOOP])
{
    struct probe *p = ctx;
    uint64_t at = cell_at(w, idx);
    if (p->started && at != p->next) {
        p->dense = false;
        return false;
    }
    p->started = true;
    p->next = at + w->d->layers[w->sel->layer_start + idx[AX_L]].content;
    return true;
}

/* The innermost `depth` positions are dense for every value of the outer
 * positions but the block's (block 0 of the request stands for all). */
static bool outer_dense(const struct walk *w, int pos, int inner_from, uint64_t idx[NUM_LOOP])
{
    if (pos == inner_from) {
        struct probe p = {false, true, 0};
        visit(w, inner_from, idx, probe_cell, &p);
        return p.dense;
    }
    int ax = w->axis[pos];
    if (ax == AX_B)
        return outer_dense(w, pos + 1, inner_from, idx);
    uint64_t n = extent(w, ax, UINT64_MAX);
    for (idx[ax] = 0; idx[ax] < n; idx[ax]++)
        if (!outer_dense(w, pos + 1, inner_from, idx))
            return false;
    idx[ax] = 0;
    return true;
}

static int block_position(const struct walk *w)
{
    for (int p = 0; p < NUM_LOOP; p++)
        if (w->axis[p] == AX_B)
            return p;
    return 0;
}

/* Layers inside one segment must place every block alike. */
static bool layers_move_together(const struct walk *w)
{
    const struct xfer_layer *a = &w->d->layers[w->sel->layer_start];
    for (uint64_t l = 1; l < w->sel->num_layers; l++) {
        const struct xfer_layer *b = a + l;
        if (b->view.strides_bytes[0] * b->kernel_blocks != a->view.strides_bytes[0] * a->kernel_blocks)
            return false;
    }
    return true;
}

static void find_depth(struct walk *w)
{
    int pb = block_position(w);
    w->depth = 0;
    for (int depth = NUM_LOOP - 1 - pb; depth >= 1; depth--) {
        int from = NUM_LOOP - depth;
        bool has_layer = false;
        for (int p = from; p < NUM_LOOP; p++)
            has_layer |= w->axis[p] == AX_L;
        if (has_layer && !layers_move_together(w))
            continue;
        uint64_t idx[NUM_LOOP] = {0, 0, 0, 0};
        if (outer_dense(w, 0, from, idx)) {
            w->depth = depth;
            return;
        }
    }
}

struct emit {
    struct xfer_runs *r;
    size_t cap;
    bool nomem;
};

bool xfer_runs_append(struct xfer_runs *r, size_t *cap, uint64_t off, uint64_t len)
{
    if (r->n && r->v[r->n - 1].off + r->v[r->n - 1].len == off) {
        r->v[r->n - 1].len += len;
        r->end[r->n - 1] += len;
        r->total += len;
        return true;
    }
    if (r->n == *cap) {
        size_t more = *cap ? 2 * *cap : 64;
        struct xfer_run *v = realloc(r->v, more * sizeof(*v));
        if (v)
            r->v = v;
        uint64_t *end = v ? realloc(r->end, more * sizeof(*end)) : NULL;
        if (end)
            r->end = end;
        if (!v || !end)
            return false;
        *cap = more;
    }
    r->total += len;
    r->v[r->n] = (struct xfer_run){off, len};
    r->end[r->n] = r->total;
    r->n++;
    return true;
}

static void add(struct emit *e, uint64_t off, uint64_t len)
{
    if (!xfer_runs_append(e->r, &e->cap, off, len))
        e->nomem = true;
}

struct segment {
    struct emit *e;
    const struct walk *w;
};

/* Bytes of the segment that starts at idx (the inner positions at 0). */
static uint64_t segment_bytes(const struct walk *w, const uint64_t idx[NUM_LOOP])
{
    uint64_t total = 0;
    struct probe p = {false, true, 0};
    uint64_t k[NUM_LOOP];
    memcpy(k, idx, sizeof(k));
    /* Dense: its bytes run from the first cell to past the last. */
    visit(w, NUM_LOOP - w->depth, k, probe_cell, &p);
    if (p.started)
        total = p.next - cell_at(w, idx);
    return total;
}

static bool emit_cell(void *ctx, const struct walk *w, const uint64_t idx[NUM_LOOP])
{
    struct emit *e = ctx;
    add(e, cell_at(w, idx), w->d->layers[w->sel->layer_start + idx[AX_L]].content);
    return !e->nomem;
}

static void emit_outer(const struct walk *w, int pos, uint64_t idx[NUM_LOOP], struct emit *e,
                       const uint64_t *layer_bytes)
{
    if (e->nomem)
        return;
    if (pos == NUM_LOOP - w->depth) {
        /* A cell or segment that starts past its layer's states is empty. */
        if (idx[AX_N] >= w->d->layers[w->sel->layer_start + idx[AX_L]].states)
            return;
        if (w->depth == 0) {
            emit_cell(e, w, idx);
            return;
        }
        add(e, cell_at(w, idx), layer_bytes[idx[AX_L]]);
        return;
    }
    int ax = w->axis[pos];
    uint64_t n = extent(w, ax, UINT64_MAX);
    for (idx[ax] = 0; idx[ax] < n && !e->nomem; idx[ax]++)
        emit_outer(w, pos + 1, idx, e, layer_bytes);
    idx[ax] = 0;
}

int xfer_runs_build(const struct xfer_desc *d, const int64_t *ids, uint64_t nblocks, const struct xfer_sel *sel,
                    unsigned order, struct xfer_runs *out)
{
    memset(out, 0, sizeof(*out));
    if (nblocks == 0)
        return KVRT_OK;
    struct walk w = {d, ids, nblocks, sel, {0}, 0, 0};
    xfer_runs_axes(order, w.axis);
    for (uint64_t l = 0; l < sel->num_layers; l++)
        if (d->layers[sel->layer_start + l].states > w.max_states)
            w.max_states = d->layers[sel->layer_start + l].states;
    find_depth(&w);
    /* A segment's bytes depend on its layer only (when the layer axis is
     * outside it): computed once per layer. */
    uint64_t *layer_bytes = calloc(sel->num_layers ? sel->num_layers : 1, sizeof(*layer_bytes));
    if (!layer_bytes)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a plan");
    if (w.depth > 0) {
        bool layer_inside = false;
        for (int p = NUM_LOOP - w.depth; p < NUM_LOOP; p++)
            layer_inside |= w.axis[p] == AX_L;
        for (uint64_t l = 0; l < (layer_inside ? 1 : sel->num_layers); l++) {
            uint64_t idx[NUM_LOOP] = {l, 0, 0, 0};
            layer_bytes[l] = segment_bytes(&w, idx);
        }
    }
    struct emit e = {out, 0, false};
    uint64_t idx[NUM_LOOP] = {0, 0, 0, 0};
    emit_outer(&w, 0, idx, &e, layer_bytes);
    free(layer_bytes);
    if (e.nomem) {
        xfer_runs_free(out);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a plan's runs");
    }
    return KVRT_OK;
}

void xfer_runs_free(struct xfer_runs *r)
{
    free(r->v);
    free(r->end);
    memset(r, 0, sizeof(*r));
}

/* The run holding stream position pos (pos < total). */
static size_t find(const struct xfer_runs *r, uint64_t pos)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->end[mid] <= pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

bool xfer_runs_single(const struct xfer_runs *r, uint64_t pos, uint64_t len, uint64_t *off)
{
    size_t i = find(r, pos);
    uint64_t start = r->end[i] - r->v[i].len;
    if (pos + len > r->end[i])
        return false;
    *off = r->v[i].off + (pos - start);
    return true;
}

static void copy(const struct xfer_runs *r, uint8_t *base, uint64_t pos, uint64_t len, uint8_t *buf, bool to_buf)
{
    size_t i = find(r, pos);
    uint64_t done = 0;
    while (done < len && i < r->n) {
        uint64_t start = r->end[i] - r->v[i].len;
        uint64_t in = pos + done - start;
        uint64_t n = r->v[i].len - in < len - done ? r->v[i].len - in : len - done;
        if (to_buf)
            memcpy(buf + done, base + r->v[i].off + in, n);
        else
            memcpy(base + r->v[i].off + in, buf + done, n);
        done += n;
        i++;
    }
}

size_t xfer_runs_iov(const struct xfer_runs *r, uint8_t *base, uint64_t pos, uint64_t len, struct iovec *iov,
                     size_t cap)
{
    size_t i = find(r, pos), n = 0;
    uint64_t done = 0;
    while (done < len && i < r->n) {
        uint64_t start = r->end[i] - r->v[i].len;
        uint64_t in = pos + done - start;
        uint64_t k = r->v[i].len - in < len - done ? r->v[i].len - in : len - done;
        if (n < cap)
            iov[n] = (struct iovec){base + r->v[i].off + in, (size_t)k};
        n++;
        done += k;
        i++;
    }
    return n;
}

void xfer_runs_gather(const struct xfer_runs *r, const uint8_t *base, uint64_t pos, uint64_t len, uint8_t *buf)
{
    copy(r, (uint8_t *)base, pos, len, buf, true);
}

void xfer_runs_scatter(const struct xfer_runs *r, uint8_t *base, uint64_t pos, uint64_t len, const uint8_t *buf)
{
    copy(r, base, pos, len, (uint8_t *)buf, false);
}

int xfer_chunking_init(struct xfer_chunking *c, uint64_t total, uint64_t chunk)
{
    if (total == 0 || chunk == 0)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: a stream of %llu bytes in %llu-byte chunks", ULL(total),
                         ULL(chunk));
    c->total = total;
    c->chunk = chunk;
    c->count = total / chunk + (total % chunk != 0);
    return KVRT_OK;
}

uint64_t xfer_chunk_pos(const struct xfer_chunking *c, uint64_t k)
{
    return k * c->chunk;
}

uint64_t xfer_chunk_len(const struct xfer_chunking *c, uint64_t k)
{
    uint64_t pos = k * c->chunk;
    return c->total - pos < c->chunk ? c->total - pos : c->chunk;
}
