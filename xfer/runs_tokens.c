/*
 * Runs of a token range on one side.
 *
 * The stream walks the cells of tokens [first, first + count) in a
 * layout's nesting of (layer, block, head, state), where "block" is a
 * segment of the ordering side's block size (split at its multiples) and
 * "state" a token within the segment.  That order depends on neither
 * side's ids nor on the other side's block size, so each side maps it onto
 * its own cache alone: token t is slot t % bs of its table's block t / bs.  The
 * innermost axis (tokens, or heads in the NHC layouts) is taken as a whole
 * where this cache keeps it back to back, and pieces that touch merge.
 *
 * Layer 3 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdlib.h>
#include <string.h>

#include "runs.h"

enum { AX_L = XFER_AX_L, AX_B = XFER_AX_B, AX_H = XFER_AX_H, AX_N = XFER_AX_N, NUM_LOOP = XFER_NUM_AX };

struct twalk {
    const struct xfer_desc *d;
    const int64_t *ids;
    uint64_t nids, bs, base; /* base: the table block of ids[0] */
    const struct xfer_tokens *tok;
    const struct xfer_sel *sel;
    uint64_t seg0, nseg; /* the segments the range touches */
    int axis[NUM_LOOP];
    struct xfer_runs *r;
    size_t cap;
    bool nomem;
};

/* Tokens [*a, *b) of segment s (relative to the range's first segment). */
static void segment(const struct twalk *w, uint64_t s, uint64_t *a, uint64_t *b)
{
    uint64_t lo = (w->seg0 + s) * w->tok->seg, hi = lo + w->tok->seg, end = w->tok->first + w->tok->count;
    *a = lo > w->tok->first ? lo : w->tok->first;
    *b = hi < end ? hi : end;
}

static void put(struct twalk *w, uint64_t off, uint64_t len)
{
    if (!w->nomem && !xfer_runs_append(w->r, &w->cap, off, len))
        w->nomem = true;
}

/* Layer l, head h (within the selection), tokens [a, b): split at this
 * side's blocks and kernel blocks; each part one piece where its states
 * lie back to back. */
static void emit_tokens(struct twalk *w, uint64_t l, uint64_t h, uint64_t a, uint64_t b)
{
    const struct xfer_layer *L = &w->d->layers[l];
    uint64_t head = w->sel->head_start + h, c = L->content;
    bool dense = L->view.strides_bytes[2] == c;
    for (uint64_t t = a; t < b && !w->nomem;) {
        uint64_t blk = t / w->bs, slot = t % w->bs;
        uint64_t id = (uint64_t)w->ids[blk - w->base];
        /* the end of this block's kernel block holding `slot` */
        uint64_t kend = (slot / L->kernel_states + 1) * L->kernel_states;
        uint64_t n = kend - slot;
        if (n > b - t)
            n = b - t;
        uint64_t off = xfer_desc_cell(w->d, l, id, head, slot);
        if (dense) {
            put(w, off, n * c);
        } else {
            for (uint64_t i = 0; i < n; i++)
                put(w, off + i * L->view.strides_bytes[2], c);
        }
        t += n;
    }
}

/* Layer l, token t: the selection's heads, one piece where they lie back
 * to back. */
static void emit_heads(struct twalk *w, uint64_t l, uint64_t t)
{
    const struct xfer_layer *L = &w->d->layers[l];
    uint64_t blk = t / w->bs, slot = t % w->bs, c = L->content;
    uint64_t id = (uint64_t)w->ids[blk - w->base];
    uint64_t off = xfer_desc_cell(w->d, l, id, w->sel->head_start, slot);
    if (L->view.strides_bytes[1] == c) {
        put(w, off, w->sel->num_heads * c);
        return;
    }
    for (uint64_t h = 0; h < w->sel->num_heads; h++)
        put(w, off + h * L->view.strides_bytes[1], c);
}

static uint64_t extent(const struct twalk *w, int ax)
{
    return ax == AX_L ? w->sel->num_layers : ax == AX_B ? w->nseg : w->sel->num_heads;
}

/* The outer three loop positions; the innermost (tokens or heads) whole. */
static void walk(struct twalk *w, int pos, uint64_t idx[NUM_LOOP])
{
    if (w->nomem)
        return;
    if (pos == NUM_LOOP - 1) {
        uint64_t l = w->sel->layer_start + idx[AX_L], a, b;
        segment(w, idx[AX_B], &a, &b);
        if (w->axis[pos] == AX_N) {
            emit_tokens(w, l, idx[AX_H], a, b);
        } else {
            for (uint64_t t = a; t < b && !w->nomem; t++)
                emit_heads(w, l, t);
        }
        return;
    }
    int ax = w->axis[pos];
    if (ax == AX_N) {
        /* Tokens outside heads (the NHC layouts): one token at a time, its
         * heads innermost. */
        uint64_t l = w->sel->layer_start + idx[AX_L], a, b;
        segment(w, idx[AX_B], &a, &b);
        for (uint64_t t = a; t < b && !w->nomem; t++)
            emit_heads(w, l, t);
        return;
    }
    uint64_t n = extent(w, ax);
    for (idx[ax] = 0; idx[ax] < n && !w->nomem; idx[ax]++)
        walk(w, pos + 1, idx);
    idx[ax] = 0;
}

int xfer_runs_build_tokens(const struct xfer_desc *d, const int64_t *ids, uint64_t nids, uint64_t bs,
                           const struct xfer_tokens *tok, const struct xfer_sel *sel, unsigned order,
                           struct xfer_runs *out)
{
    memset(out, 0, sizeof(*out));
    uint64_t from, n, seg_from, seg_n;
    int rc = xfer_tokens_blocks(tok->first, tok->count, bs, &from, &n);
    if (rc == KVRT_OK)
        rc = xfer_tokens_blocks(tok->first, tok->count, tok->seg, &seg_from, &seg_n);
    if (rc != KVRT_OK)
        return rc;
    if (n != nids || order > 5)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt-xfer: tokens %llu+%llu touch %llu blocks of %llu tokens; %llu were given (order %u)",
                         ULL(tok->first), ULL(tok->count), ULL(n), ULL(bs), ULL(nids), order);
    struct twalk w = {d, ids, nids, bs, from, tok, sel, seg_from, seg_n, {0}, out, 0, false};
    xfer_runs_axes(order, w.axis);
    uint64_t idx[NUM_LOOP] = {0, 0, 0, 0};
    walk(&w, 0, idx);
    if (w.nomem) {
        xfer_runs_free(out);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a token range's runs");
    }
    return KVRT_OK;
}
