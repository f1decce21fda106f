/*
 * A cache as a transfer sees it: rebuilt from a placement, and the checks
 * of what a request or a peer names against it.
 *
 * Layer 1 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/spec.h>

#include "desc.h"

int xfer_desc_init(struct xfer_desc *d, kvrt_placement *p, bool owns)
{
    memset(d, 0, sizeof(*d));
    d->placement = p;
    d->owns_placement = owns;
    size_t nsets = kvrt_placement_num_sets(p);
    uint64_t total = 0;
    struct kvrt_placement_set set;
    for (size_t s = 0; s < nsets; s++) {
        kvrt_placement_get_set(p, s, &set);
        total += set.num_layers;
    }
    d->layout = kvrt_placement_layout(p);
    d->num_blocks = kvrt_placement_num_blocks(p);
    d->bytes = kvrt_placement_size(p);
    d->num_layers = total;
    int rc = kvrt_placement_staging_bytes(p, &d->staging_per_block);
    if (rc != KVRT_OK)
        return rc;
    d->layers = calloc(total ? total : 1, sizeof(*d->layers));
    if (!d->layers)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for %llu layers", ULL(total));
    uint64_t n = 0;
    for (size_t s = 0; s < nsets; s++) {
        kvrt_placement_get_set(p, s, &set);
        const struct kvrt_spec_info *info = &set.geometry.info;
        for (uint64_t l = 0; l < set.num_layers; l++, n++) {
            struct xfer_layer *L = &d->layers[n];
            uint64_t page;
            if ((rc = kvrt_placement_layer_view(p, s, l, &L->view)) != KVRT_OK ||
                (rc = kvrt_placement_staging_layer(p, n, &L->staging_offset, &page)) != KVRT_OK)
                return rc;
            L->spec = set.spec;
            L->kernel_blocks = info->kernel_blocks_per_block;
            L->kernel_states = info->states_per_kernel_block;
            L->heads = info->head_slots;
            L->states = info->states_per_block;
            L->content = info->content_bytes;
        }
    }
    return KVRT_OK;
}

void xfer_desc_free(struct xfer_desc *d)
{
    free(d->layers);
    d->layers = NULL;
    if (d->owns_placement)
        kvrt_placement_destroy(d->placement);
    d->placement = NULL;
}

uint64_t xfer_desc_cell(const struct xfer_desc *d, uint64_t l, uint64_t b, uint64_t h, uint64_t s)
{
    const struct xfer_layer *L = &d->layers[l];
    uint64_t kb = b * L->kernel_blocks + s / L->kernel_states;
    return L->view.offset_bytes + kb * L->view.strides_bytes[0] + h * L->view.strides_bytes[1] +
           (s % L->kernel_states) * L->view.strides_bytes[2];
}

uint64_t xfer_sel_block_bytes(const struct xfer_desc *d, const struct xfer_sel *s)
{
    uint64_t total = 0;
    for (uint64_t l = s->layer_start; l < s->layer_start + s->num_layers; l++) {
        const struct xfer_layer *L = &d->layers[l];
        total += s->num_heads * L->states * L->content;
    }
    return total;
}

bool xfer_sel_full(const struct xfer_desc *d, const struct xfer_sel *s)
{
    if (s->layer_start != 0 || s->num_layers != d->num_layers)
        return false;
    for (uint64_t l = 0; l < d->num_layers; l++)
        if (s->head_start != 0 || s->num_heads != d->layers[l].heads)
            return false;
    return true;
}

int xfer_check_ids(const int64_t *ids, uint64_t n, uint64_t limit, const char *side, const char *name, bool unique)
{
    return xfer_check_table(ids, 0, n, limit, side, name, unique);
}

int xfer_check_table(const int64_t *table, uint64_t from, uint64_t n, uint64_t limit, const char *side,
                     const char *name, bool unique)
{
    if (n && !table)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer request: %s is NULL for %llu blocks", name, ULL(n));
    if (n > XFER_MAX_BLOCKS)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer request: %llu blocks in %s; at most %llu per transfer", ULL(n),
                         name, ULL(XFER_MAX_BLOCKS));
    const int64_t *ids = n ? table + from : table;
    for (uint64_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint64_t)ids[i] >= limit)
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "kvrt-xfer request: %s block id %lld at %s[%llu] is out of range; "
                             "the %s cache has %llu blocks (valid ids 0..%llu)",
                             side, (long long)ids[i], name, ULL(from + i), side, ULL(limit), ULL(limit - 1));
    if (unique && n > 1) {
        uint8_t *seen = calloc((size_t)(limit / 8 + 1), 1);
        if (!seen)
            return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer request: out of memory");
        for (uint64_t i = 0; i < n; i++) {
            uint64_t b = (uint64_t)ids[i];
            if (seen[b / 8] & (1u << (b % 8))) {
                free(seen);
                return BASE_FAIL(KVRT_ERR_INVALID,
                                 "kvrt-xfer request: destination block id %lld appears twice "
                                 "in %s (at %llu and before); each destination block can be written once",
                                 (long long)ids[i], name, ULL(from + i));
            }
            seen[b / 8] |= (uint8_t)(1u << (b % 8));
        }
        free(seen);
    }
    return KVRT_OK;
}

int xfer_check_sel(const struct xfer_desc *d, const struct xfer_sel *s, const char *what)
{
    if (s->layer_start >= d->num_layers || s->num_layers == 0 || s->num_layers > d->num_layers - s->layer_start)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: %s names layers %llu+%llu of %llu", what, ULL(s->layer_start),
                         ULL(s->num_layers), ULL(d->num_layers));
    for (uint64_t l = s->layer_start; l < s->layer_start + s->num_layers; l++)
        if (s->num_heads == 0 || s->head_start >= d->layers[l].heads ||
            s->num_heads > d->layers[l].heads - s->head_start)
            return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: %s names heads %llu+%llu of layer %llu, which has %llu",
                             what, ULL(s->head_start), ULL(s->num_heads), ULL(l), ULL(d->layers[l].heads));
    return KVRT_OK;
}

static uint64_t head_v(const struct kvrt_spec *s)
{
    return s->head_size_v == KVRT_UNSET ? s->head_size : s->head_size_v;
}

int xfer_desc_compatible(const struct xfer_desc *a, const struct xfer_desc *b)
{
    if (a->num_layers != b->num_layers)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "incompatible peer: the model has %llu layers here and %llu on the "
                         "peer",
                         ULL(a->num_layers), ULL(b->num_layers));
    for (uint64_t i = 0; i < a->num_layers; i++) {
        const struct kvrt_spec *x = a->layers[i].spec, *y = b->layers[i].spec;
        const char *what = NULL;
        char here[64] = "", there[64] = "";
        if (x->kind != y->kind) {
            what = "kind";
            snprintf(here, sizeof(here), "%s", kvrt_spec_kind_name(x->kind));
            snprintf(there, sizeof(there), "%s", kvrt_spec_kind_name(y->kind));
        } else if (x->dtype != y->dtype) {
            what = "element type";
            snprintf(here, sizeof(here), "%s", kvrt_dtype_name(x->dtype));
            snprintf(there, sizeof(there), "%s", kvrt_dtype_name(y->dtype));
        } else if (x->kind != KVRT_SPEC_STATE && x->head_size != y->head_size) {
            what = "head size";
            snprintf(here, sizeof(here), "%llu", ULL(x->head_size));
            snprintf(there, sizeof(there), "%llu", ULL(y->head_size));
        } else if (x->kind != KVRT_SPEC_STATE && head_v(x) != head_v(y)) {
            what = "V head size";
            snprintf(here, sizeof(here), "%llu", ULL(head_v(x)));
            snprintf(there, sizeof(there), "%llu", ULL(head_v(y)));
        } else if (a->layers[i].content != b->layers[i].content) {
            what = "content bytes per state";
            snprintf(here, sizeof(here), "%llu", ULL(a->layers[i].content));
            snprintf(there, sizeof(there), "%llu", ULL(b->layers[i].content));
        }
        if (what)
            return BASE_FAIL(KVRT_ERR_INVALID, "incompatible peer: layer %llu %s is %s here and %s on the peer", ULL(i),
                             what, here, there);
    }
    return KVRT_OK;
}

bool xfer_desc_same_shape(const struct xfer_desc *a, const struct xfer_desc *b)
{
    if (a->layout != b->layout || kvrt_placement_num_sets(a->placement) != kvrt_placement_num_sets(b->placement) ||
        a->num_layers != b->num_layers)
        return false;
    for (uint64_t l = 0; l < a->num_layers; l++)
        if (!kvrt_spec_equal(a->layers[l].spec, b->layers[l].spec))
            return false;
    return true;
}

/* Tokens per state as a reduced fraction's two terms (state layers: one
 * state per block). */
static void tokens_per_state(const struct kvrt_spec *s, uint64_t *num, uint64_t *den)
{
    *num = s->kind == KVRT_SPEC_STATE ? s->block_size : s->tokens_per_state_num;
    *den = s->kind == KVRT_SPEC_STATE ? 1 : s->tokens_per_state_den;
}

int xfer_sel_whole_blocks(const struct xfer_desc *a, const struct xfer_desc *b, const struct xfer_sel *sel)
{
    for (uint64_t l = sel->layer_start; l < sel->layer_start + sel->num_layers; l++) {
        const struct kvrt_spec *x = a->layers[l].spec, *y = b->layers[l].spec;
        uint64_t xn, xd, yn, yd;
        tokens_per_state(x, &xn, &xd);
        tokens_per_state(y, &yn, &yd);
        if (x->kind == KVRT_SPEC_STATE && (xn != yn || xd != yd))
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "kvrt-xfer request: layer %llu is a state layer of one state per %llu tokens here "
                             "and per %llu on the peer; states move whole, by block id, only between the same "
                             "tokens per state",
                             ULL(l), ULL(xn), ULL(yn));
        if (x->kind == KVRT_SPEC_STATE)
            continue;
        if (x->block_size != y->block_size)
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "kvrt-xfer request: layer %llu has %llu-token blocks here and %llu-token blocks on the "
                             "peer; whole blocks move only between the same block size: give each side's block "
                             "table and a token range (token_start, num_tokens)",
                             ULL(l), ULL(x->block_size), ULL(y->block_size));
        if (xn != yn || xd != yd)
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "kvrt-xfer request: layer %llu holds one state per %llu/%llu tokens here and per "
                             "%llu/%llu on the peer; they must agree",
                             ULL(l), ULL(xn), ULL(xd), ULL(yn), ULL(yd));
    }
    return KVRT_OK;
}

int xfer_sel_token_block_size(const struct xfer_desc *d, const struct xfer_sel *sel, const char *side, uint64_t *bs)
{
    *bs = 0;
    for (uint64_t l = sel->layer_start; l < sel->layer_start + sel->num_layers; l++) {
        const struct kvrt_spec *x = d->layers[l].spec;
        if (x->kind == KVRT_SPEC_STATE)
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "kvrt-xfer request: layer %llu %s is a state layer (one state per %llu-token block); a "
                             "token range moves layers of one state per token: move state layers by block id, "
                             "in a whole-block request of their layer range",
                             ULL(l), side, ULL(x->block_size));
        if (x->tokens_per_state_num != 1 || x->tokens_per_state_den != 1)
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "kvrt-xfer request: layer %llu %s holds one state per %llu/%llu tokens; a token range "
                             "moves layers of one state per token",
                             ULL(l), side, ULL(x->tokens_per_state_num), ULL(x->tokens_per_state_den));
        if (*bs && x->block_size != *bs)
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "kvrt-xfer request: layers %llu and %llu %s have %llu- and %llu-token blocks; a token "
                             "range reads one block table: transfer them in separate layer ranges",
                             ULL(sel->layer_start), ULL(l), side, ULL(*bs), ULL(x->block_size));
        *bs = x->block_size;
    }
    if (*bs == 0)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer request: the layers %s have a block size of 0", side);
    return KVRT_OK;
}

int xfer_tokens_blocks(uint64_t first, uint64_t count, uint64_t bs, uint64_t *from, uint64_t *n)
{
    if (count == 0 || bs == 0 || first > INT64_MAX || count > (uint64_t)INT64_MAX - first)
        return BASE_FAIL(KVRT_ERR_OVERFLOW, "kvrt-xfer: tokens %llu+%llu in %llu-token blocks are out of range",
                         ULL(first), ULL(count), ULL(bs));
    *from = first / bs;
    *n = (first + count - 1) / bs - *from + 1;
    return KVRT_OK;
}
