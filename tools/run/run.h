/*
 * kvrt run: a synthetic batch through a real cache, checked on the host.
 *
 *   run_batch.c      random distinct blocks per group, block tables, slots
 *   run_attention.c  write, read back, paged decode against a double reference
 *   run_state.c      state pages: gather, scatter, and where they landed
 *   cli_run.c        the command: resolve, bind, place, allocate, report
 */
#ifndef KVRT_TOOLS_RUN_H
#define KVRT_TOOLS_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include <kvrt/runtime.h>

#include "cli.h"
#include <kvrt/model.h>
#include "numeric.h"

/* The blocks one group's sequences own: no block is shared with any other
 * group, because overlaid groups alias the same bytes at one block id. */
struct run_group_batch {
    bool state; /* one block per sequence holds its state */
    uint64_t block_size;
    uint64_t blocks_per_seq; /* attention: ceil(context / block_size); state: 1 */
    int32_t *block_tables;   /* [seqs, blocks_per_seq] */
};

struct run_batch {
    uint64_t seqs, context;
    int32_t *seq_lens; /* decode lengths, 1..context; the first is context */
    size_t num_groups;
    struct run_group_batch *groups;
};

/* Blocks the batch needs for the model (every group). */
uint64_t run_blocks_needed(const struct kvrt_model_info *m, uint64_t seqs, uint64_t context);

/* Draw distinct random blocks among num_blocks for every group. */
int run_batch_create(const struct kvrt_model_info *m, uint64_t seqs, uint64_t context, uint64_t num_blocks,
                     struct numeric_rng *rng, struct run_batch *out);
void run_batch_free(struct run_batch *b);

/* Slot of token t of sequence s in group g (docs/design.md §9). */
int64_t run_slot(const struct run_batch *b, size_t g, uint64_t s, uint64_t t);

struct run_op {
    uint64_t layers; /* layers it ran on */
    uint64_t bytes;  /* bytes the operation moved (see `kvrt run --help`) */
    double seconds;
    bool failed; /* a mismatch or an error */
};

struct run_totals {
    struct run_op write, read, decode, gather, scatter;
    double max_abs_error; /* decode, largest over layers */
    double tolerance;     /* decode, the bound it was checked against (largest) */
    uint64_t decode_skipped;
    char skip_reason[512]; /* why decode was skipped (first reason) */
    uint64_t mismatches;
    char failure[768]; /* the first failure, for the error line */
    uint64_t q_heads;
};

struct run_ctx {
    kvrt_backend *backend;
    kvrt_cache *cache;
    const struct kvrt_model_info *model;
    const struct run_batch *batch;
    struct numeric_rng rng;
    uint64_t q_heads; /* 0: the model's, else per layer H */
    bool decode;      /* run paged decode where the layer allows */
    struct cli_progress *progress;
    uint64_t layers_done, layers_total;
};

/* Token operations (write, read, decode) need one state per token; other
 * layers (state, compressed) are checked page by page instead. */
static inline bool run_token_layer(const struct kvrt_spec *s)
{
    return s->kind != KVRT_SPEC_STATE && s->tokens_per_state_num == s->tokens_per_state_den;
}

/* Write, read and decode every attention/MLA layer of group g. */
int run_attention_group(struct run_ctx *ctx, size_t g, struct run_totals *t);

/* Round-trip the pages of every group that takes no token operations (state
 * and compressed layers): one gather/scatter pass over their blocks. */
int run_state_groups(struct run_ctx *ctx, struct run_totals *t);

/* Record the first failure (printf-style); counts a mismatch. */
void run_failed(struct run_totals *t, const char *fmt, ...) KVRT_PRINTF(2, 3);

#endif
