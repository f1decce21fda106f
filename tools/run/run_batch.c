/* The synthetic batch: which blocks each sequence of each group owns.
 * Blocks are random and distinct, so a backend that ignored the block
 * table, or a layout that put two blocks on one page, fails the checks. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/common.h>

#include "run.h"

static bool is_state(const struct kvrt_model_group *g)
{
    return g->layers[0].spec.kind == KVRT_SPEC_STATE;
}

uint64_t run_blocks_needed(const struct kvrt_model_info *m, uint64_t seqs, uint64_t context)
{
    uint64_t n = 0;
    for (size_t g = 0; g < m->num_groups; g++) {
        const uint64_t bs = m->groups[g].layers[0].spec.block_size;
        n += is_state(&m->groups[g]) ? seqs : seqs * ((context + bs - 1) / bs);
    }
    return n;
}

int run_batch_create(const struct kvrt_model_info *m, uint64_t seqs, uint64_t context, uint64_t num_blocks,
                     struct numeric_rng *rng, struct run_batch *out)
{
    memset(out, 0, sizeof(*out));
    out->seqs = seqs;
    out->context = context;
    out->num_groups = m->num_groups;
    out->groups = calloc(m->num_groups, sizeof(*out->groups));
    out->seq_lens = calloc(seqs, sizeof(*out->seq_lens));
    uint32_t *ids = malloc(num_blocks * sizeof(*ids));
    if (!out->groups || !out->seq_lens || !ids) {
        free(ids);
        run_batch_free(out);
        return KVRT_ERR_NOMEM;
    }
    for (uint64_t i = 0; i < num_blocks; i++)
        ids[i] = (uint32_t)i;
    uint64_t next = 0;
    for (size_t g = 0; g < m->num_groups; g++) {
        struct run_group_batch *gb = &out->groups[g];
        gb->state = is_state(&m->groups[g]);
        gb->block_size = m->groups[g].layers[0].spec.block_size;
        gb->blocks_per_seq = gb->state ? 1 : (context + gb->block_size - 1) / gb->block_size;
        const uint64_t n = seqs * gb->blocks_per_seq;
        gb->block_tables = malloc(n * sizeof(*gb->block_tables));
        if (!gb->block_tables) {
            free(ids);
            run_batch_free(out);
            return KVRT_ERR_NOMEM;
        }
        /* A partial Fisher-Yates shuffle: each draw is a fresh block. */
        for (uint64_t i = 0; i < n; i++, next++) {
            const uint64_t left = num_blocks - next; /* blocks not yet drawn */
            if (left == 0) {                         /* the caller gave too few blocks */
                free(ids);
                run_batch_free(out);
                return KVRT_ERR_INVALID;
            }
            uint64_t j = next + numeric_next(rng) % left;
            uint32_t tmp = ids[next];
            ids[next] = ids[j];
            ids[j] = tmp;
            gb->block_tables[i] = (int32_t)ids[next];
        }
    }
    free(ids);
    /* The first sequence is full; the others stop somewhere in the second
     * half, so partly filled last blocks are decoded too. */
    for (uint64_t s = 0; s < seqs; s++) {
        uint64_t lo = context / 2 ? context / 2 : 1;
        out->seq_lens[s] = (int32_t)(s == 0 ? context : lo + numeric_next(rng) % (context - lo + 1));
    }
    return KVRT_OK;
}

void run_batch_free(struct run_batch *b)
{
    for (size_t g = 0; b->groups && g < b->num_groups; g++)
        free(b->groups[g].block_tables);
    free(b->groups);
    free(b->seq_lens);
    memset(b, 0, sizeof(*b));
}

int64_t run_slot(const struct run_batch *b, size_t g, uint64_t s, uint64_t t)
{
    const struct run_group_batch *gb = &b->groups[g];
    const int64_t block = gb->block_tables[s * gb->blocks_per_seq + t / gb->block_size];
    return block * (int64_t)gb->block_size + (int64_t)(t % gb->block_size);
}

void run_failed(struct run_totals *t, const char *fmt, ...)
{
    if (t->mismatches++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(t->failure, sizeof(t->failure), fmt, ap);
        va_end(ap);
    }
}
