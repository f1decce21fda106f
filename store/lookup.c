/* Lookup: how many of a sequence's leading chunks are stored, every head
 * (of every layer group asked) of them, asked of memory and disk at once and of the shared tier a window
 * of chunks at a time (docs/store.md "Operations").
 *
 * Layer 5 of libkvrt-store (docs/store.md, "Layers").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

/* How many chunks to ask the shared tier about at once. */
#define LOOKUP_WINDOW 16u

int kvrt_store_lookup(kvrt_store *s, const int32_t *tokens, uint64_t num_tokens, uint64_t head_start,
                      uint64_t num_heads, uint64_t *stored)
{
    return kvrt_store_lookup_layers(s, tokens, num_tokens, head_start, num_heads, 0, 0, stored);
}

int kvrt_store_lookup_layers(kvrt_store *s, const int32_t *tokens, uint64_t num_tokens, uint64_t head_start,
                             uint64_t num_heads, uint64_t layer_start, uint64_t num_layers, uint64_t *stored)
{
    const char *fn = "kvrt_store_lookup";
    if (!s || !stored)
        return BASE_FAIL(KVRT_ERR_INVALID, "%s: the store and stored are required", fn);
    *stored = 0;
    if (s->inspect)
        return BASE_FAIL(KVRT_ERR_STATE, "%s: the store was opened to inspect its directory (no model)", fn);
    if (num_tokens && !tokens)
        return BASE_FAIL(KVRT_ERR_INVALID, "%s: num_tokens is %llu but tokens is NULL", fn, ULL(num_tokens));
    uint64_t H, group_start = 0, num_groups = 0;
    int rc = store_span_heads(s, fn, head_start, num_heads, &H);
    if (rc == KVRT_OK)
        rc = store_span_layers(s, fn, layer_start, num_layers, &group_start, &num_groups);
    const uint64_t T = s->model.chunk_tokens, n = num_tokens / T;
    if (rc == KVRT_OK)
        rc = store_check_tokens(fn, tokens, n * T);
    if (rc != KVRT_OK || n == 0)
        return rc;
    struct store_op op;
    memset(&op, 0, sizeof(op));
    op.store = s;
    op.num_chunks = n;
    op.head_start = head_start;
    op.num_heads = H;
    op.group_start = group_start;
    op.num_groups = num_groups;
    op.units = num_groups * H;
    /* from here on H counts a chunk's entries: every head of every group */
    H = op.units;
    op.keys = malloc(n * KVRT_STORE_KEY_BYTES);
    bool *present = malloc(n * H * sizeof(*present));
    if (!op.keys || !present) {
        free(op.keys);
        free(present);
        return BASE_FAIL(KVRT_ERR_NOMEM, "%s: out of memory for %llu chunks", fn, ULL(n));
    }
    if ((rc = store_chunk_keys(&s->model, tokens, n, op.keys)) == KVRT_OK)
        rc = store_find_present(&op, present);
    uint64_t c = 0;
    while (rc == KVRT_OK && c < n) {
        bool all = true;
        for (uint64_t h = 0; h < H; h++)
            all = all && present[c * H + h];
        if (all) {
            c++;
            continue;
        }
        if (!s->has_shared)
            break;
        /* the rest of the window from the shared tier */
        uint64_t w = n - c < LOOKUP_WINDOW ? n - c : LOOKUP_WINDOW, k = 0;
        struct store_id *ids = malloc(w * H * sizeof(*ids));
        bool *has = malloc(w * H * sizeof(*has));
        uint64_t *where = malloc(w * H * sizeof(*where));
        if (!ids || !has || !where) {
            free(ids);
            free(has);
            free(where);
            rc = BASE_FAIL(KVRT_ERR_NOMEM, "%s: out of memory", fn);
            break;
        }
        for (uint64_t i = 0; i < w; i++)
            for (uint64_t h = 0; h < H; h++)
                if (!present[(c + i) * H + h]) {
                    store_op_id(&op, c + i, h, &ids[k]);
                    where[k++] = (c + i) * H + h;
                }
        shared_has(&s->shared, ids, k, has);
        uint64_t got = 0;
        for (uint64_t i = 0; i < k; i++)
            if (has[i]) {
                present[where[i]] = true;
                got++;
            }
        free(ids);
        free(has);
        free(where);
        bool first_complete = true;
        for (uint64_t h = 0; h < H; h++)
            first_complete = first_complete && present[c * H + h];
        if (!first_complete || got == 0)
            break;
    }
    *stored = c * T;
    free(op.keys);
    free(present);
    return rc;
}
