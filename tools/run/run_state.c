/*
 * Layers without token operations (state pages, compressed caches): their
 * pages are put where the geometry says, then gathered, wiped, scattered
 * back and gathered again.
 *
 * Overlaid groups alias the same bytes at one block id, so a gather of a
 * state group's blocks also returns other groups' pages over those bytes.
 * Only the owning group's pages are compared against what was put there;
 * the second gather must equal the first byte for byte, which holds for
 * any aliasing because the scatter writes back one consistent image.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/placement.h>

#include "run.h"

struct page_layer {
    size_t group;
    struct kvrt_view view;
    uint64_t staging_offset; /* within one block's staging */
    uint64_t page;           /* unpadded H * N * C */
};

struct pass {
    uint64_t num_blocks, per_block;
    int64_t *ids;
    size_t *owner; /* group of each block in ids */
    size_t num_layers;
    struct page_layer *layers;
    uint8_t *expect, *got, *again;
    kvrt_buffer *staging;
};

/* Every cell (h, n) of layer l's page in block b: offset of its C bytes. */
static uint64_t cell_offset(const struct kvrt_view *v, int64_t b, uint64_t h, uint64_t n)
{
    return v->offset_bytes + (uint64_t)b * v->strides_bytes[0] + h * v->strides_bytes[1] + n * v->strides_bytes[2];
}

static int collect(struct run_ctx *ctx, struct pass *ps)
{
    const struct kvrt_model_info *m = ctx->model;
    const kvrt_placement *p = kvrt_cache_placement(ctx->cache);
    /* Where each layer's page goes in a block's staging is libkvrt's rule
     * (kvrt_placement_staging_layer), the one gather and scatter follow. */
    int rc = kvrt_placement_staging_bytes(p, &ps->per_block);
    for (size_t g = 0; g < m->num_groups; g++) {
        if (run_token_layer(&m->groups[g].layers[0].spec))
            continue;
        ps->num_blocks += ctx->batch->seqs * ctx->batch->groups[g].blocks_per_seq;
        ps->num_layers += m->groups[g].num_layers;
    }
    ps->ids = calloc(ps->num_blocks + 1, sizeof(*ps->ids));
    ps->owner = calloc(ps->num_blocks + 1, sizeof(*ps->owner));
    ps->layers = calloc(ps->num_layers + 1, sizeof(*ps->layers));
    if (rc == KVRT_OK && (!ps->ids || !ps->owner || !ps->layers))
        rc = KVRT_ERR_NOMEM;
    size_t nb = 0, nl = 0;
    for (size_t g = 0; rc == KVRT_OK && g < m->num_groups; g++) {
        const struct kvrt_model_group *grp = &m->groups[g];
        if (run_token_layer(&grp->layers[0].spec))
            continue;
        const struct run_group_batch *gb = &ctx->batch->groups[g];
        for (uint64_t i = 0; i < ctx->batch->seqs * gb->blocks_per_seq; i++, nb++) {
            ps->ids[nb] = gb->block_tables[i];
            ps->owner[nb] = g;
        }
        for (size_t i = 0; rc == KVRT_OK && i < grp->num_layers; i++, nl++) {
            size_t set;
            uint64_t index;
            uint32_t global;
            struct page_layer *pl = &ps->layers[nl];
            pl->group = g;
            rc = kvrt_placement_find_layer(p, grp->layers[i].name, &set, &index);
            if (rc == KVRT_OK)
                rc = kvrt_placement_layer_view(p, set, index, &pl->view);
            if (rc == KVRT_OK)
                rc = kvrt_cache_layer_index(ctx->cache, grp->layers[i].name, &global);
            if (rc == KVRT_OK)
                rc = kvrt_placement_staging_layer(p, global, &pl->staging_offset, &pl->page);
        }
    }
    return rc;
}

static void pass_free(struct pass *ps)
{
    free(ps->ids);
    free(ps->owner);
    free(ps->layers);
    free(ps->expect);
    free(ps->got);
    free(ps->again);
    kvrt_buffer_destroy(ps->staging);
}

/* Upload (or zero) every owned page, cell by cell, where the view puts it;
 * `expect` holds the bytes in staging order. */
static int place_pages(struct run_ctx *ctx, struct pass *ps, bool zero)
{
    kvrt_buffer *buf = kvrt_cache_buffer(ctx->cache);
    for (uint64_t k = 0; k < ps->num_blocks; k++) {
        for (size_t l = 0; l < ps->num_layers; l++) {
            const struct page_layer *pl = &ps->layers[l];
            if (pl->group != ps->owner[k])
                continue;
            const uint8_t *src = ps->expect + k * ps->per_block + pl->staging_offset;
            const uint64_t c = pl->view.shape_bytes[3];
            for (uint64_t h = 0; h < pl->view.shape_bytes[1]; h++)
                for (uint64_t n = 0; n < pl->view.shape_bytes[2]; n++, src += c) {
                    uint64_t at = cell_offset(&pl->view, ps->ids[k], h, n);
                    int rc = zero ? kvrt_buffer_zero(buf, at, c) : kvrt_buffer_upload(buf, at, src, c);
                    if (rc != KVRT_OK)
                        return rc;
                }
        }
    }
    return KVRT_OK;
}

/* Compare the owned pages of `got` (staging order) with `expect`. */
static void compare_pages(const struct run_ctx *ctx, const struct pass *ps, const uint8_t *got, const char *when,
                          struct run_totals *t)
{
    for (uint64_t k = 0; k < ps->num_blocks; k++) {
        for (size_t l = 0; l < ps->num_layers; l++) {
            const struct page_layer *pl = &ps->layers[l];
            if (pl->group != ps->owner[k])
                continue;
            uint64_t at = k * ps->per_block + pl->staging_offset;
            if (memcmp(ps->expect + at, got + at, pl->page) != 0) {
                run_failed(t,
                           "group %s: the page of block %lld %s differs from the bytes placed at "
                           "the offsets the geometry gives",
                           ctx->model->groups[pl->group].name, (long long)ps->ids[k], when);
                return;
            }
        }
    }
}

static int timed_gather(struct run_ctx *ctx, struct pass *ps, uint8_t *into, struct run_totals *t)
{
    const uint64_t bytes = ps->num_blocks * ps->per_block;
    double t0 = cli_now();
    int rc = kvrt_cache_gather(ctx->cache, ps->num_blocks, ps->ids, ps->staging, 0);
    double t1 = cli_now();
    if (rc == KVRT_OK)
        rc = kvrt_buffer_download(ps->staging, 0, into, bytes);
    t->gather.layers = ps->num_layers;
    t->gather.bytes += bytes;
    t->gather.seconds += t1 - t0;
    return rc;
}

int run_state_groups(struct run_ctx *ctx, struct run_totals *t)
{
    struct pass ps;
    memset(&ps, 0, sizeof(ps));
    int rc = collect(ctx, &ps);
    if (rc == KVRT_OK && ps.num_layers == 0) {
        pass_free(&ps);
        return CLI_EXIT_OK;
    }
    uint64_t bytes = ps.num_blocks * ps.per_block, check;
    if (rc == KVRT_OK && (rc = kvrt_cache_staging_bytes(ctx->cache, ps.num_blocks, &check)) == KVRT_OK &&
        check != bytes) {
        pass_free(&ps);
        return cli_error(CLI_EXIT_INTERNAL,
                         "run: the staging buffer holds %llu bytes, but the pages "
                         "of the placement add up to %llu",
                         (unsigned long long)check, (unsigned long long)bytes);
    }
    if (rc == KVRT_OK) {
        const size_t alloc = bytes ? bytes : 1; /* no zero-byte allocation (NULL would read as NOMEM) */
        ps.expect = calloc(alloc, 1);
        ps.got = malloc(alloc);
        ps.again = malloc(alloc);
        rc = ps.expect && ps.got && ps.again ? kvrt_buffer_create(ctx->backend, bytes, &ps.staging) : KVRT_ERR_NOMEM;
    }
    if (rc == KVRT_OK) {
        numeric_fill(&ctx->rng, KVRT_DTYPE_UINT8, ps.expect, bytes);
        rc = place_pages(ctx, &ps, false);
    }
    if (rc == KVRT_OK)
        rc = timed_gather(ctx, &ps, ps.got, t);
    if (rc == KVRT_OK) {
        compare_pages(ctx, &ps, ps.got, "gathered", t);
        rc = place_pages(ctx, &ps, true);
    }
    if (rc == KVRT_OK) {
        double t0 = cli_now();
        rc = kvrt_cache_scatter(ctx->cache, ps.num_blocks, ps.ids, ps.staging, 0);
        t->scatter.seconds += cli_now() - t0;
        t->scatter.bytes += bytes;
        t->scatter.layers = ps.num_layers;
    }
    if (rc == KVRT_OK)
        rc = timed_gather(ctx, &ps, ps.again, t);
    if (rc == KVRT_OK) {
        compare_pages(ctx, &ps, ps.again, "scattered back and gathered again", t);
        if (memcmp(ps.got, ps.again, bytes) != 0) {
            t->scatter.failed = true;
            run_failed(t, "gather after scatter returned other bytes than the gather before it: "
                          "the scatter did not put every page back where it came from");
        }
    }
    ctx->layers_done += ps.num_layers;
    cli_progress_update(ctx->progress, ctx->layers_done, ctx->layers_total, "layers");
    pass_free(&ps);
    return rc == KVRT_OK ? CLI_EXIT_OK : cli_fail_status(rc);
}
