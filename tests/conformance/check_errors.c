/*
 * Every bad argument is refused with the right status and a message that
 * names the problem, and nothing is written: the cache and every output
 * buffer are downloaded before and after the call and compared byte for
 * byte.  The core validates before it calls the backend, so these points
 * hold for every backend alike; they are run against each one anyway,
 * because "nothing written" is only true if the backend is never reached.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

#define MAX_GUARDED 3

/* Bytes that must not change across a refused call. */
struct guard {
    struct conf_cache *cache;
    uint8_t *cache_before;
    kvrt_buffer *bufs[MAX_GUARDED];
    uint8_t *before[MAX_GUARDED];
};

static void guard_begin(struct guard *g, struct conf_cache *c, kvrt_buffer *a, kvrt_buffer *b, kvrt_buffer *d)
{
    memset(g, 0, sizeof(*g));
    g->cache = c;
    g->cache_before = conf_cache_download(c);
    kvrt_buffer *list[MAX_GUARDED] = {a, b, d};
    for (int i = 0; i < MAX_GUARDED; i++) {
        g->bufs[i] = list[i];
        g->before[i] = list[i] ? conf_download(list[i]) : NULL;
    }
}

static bool guard_end(struct guard *g)
{
    bool same = g->cache_before != NULL;
    uint8_t *after = conf_cache_download(g->cache);
    if (!after || !same) {
        same = false;
    } else {
        int64_t at = conf_first_diff(g->cache_before, after, g->cache->bytes);
        if (at >= 0) {
            char where[256];
            conf_describe_offset(g->cache, (uint64_t)at, where, sizeof(where));
            tap_diag("  the refused call changed cache byte %lld (%s)", (long long)at, where);
            same = false;
        }
    }
    free(after);
    for (int i = 0; i < MAX_GUARDED; i++) {
        if (!g->bufs[i])
            continue;
        uint8_t *now = conf_download(g->bufs[i]);
        int64_t at = now && g->before[i] ? conf_first_diff(g->before[i], now, kvrt_buffer_size(g->bufs[i])) : 0;
        if (at >= 0) {
            tap_diag("  the refused call changed byte %lld of an argument buffer", (long long)at);
            same = false;
        }
        free(now);
        free(g->before[i]);
    }
    free(g->cache_before);
    return same;
}

struct refusal {
    int status;
    char message[1024];
};

/* Capture status and message at once: the message lasts only until the
 * next kvrt call on this thread. */
static struct refusal capture(int status)
{
    struct refusal r;
    r.status = status;
    snprintf(r.message, sizeof(r.message), "%s", status == KVRT_OK ? "" : kvrt_error_message());
    return r;
}

static void judge(struct conf_case *cs, struct guard *g, struct refusal r, int want, const char *what,
                  const char *word1, const char *word2)
{
    bool status_ok = r.status == want;
    bool named = strstr(r.message, word1) && (!word2 || strstr(r.message, word2));
    bool same = guard_end(g);
    if (!status_ok)
        tap_diag("  returned %s, expected %s", kvrt_status_name(r.status), kvrt_status_name(want));
    if (!named)
        tap_diag("  the message should mention \"%s\"%s%s%s: \"%s\"", word1, word2 ? " and \"" : "", word2 ? word2 : "",
                 word2 ? "\"" : "", r.message);
    tap_ok(status_ok && named && same, "%s: %s -> %s naming it, nothing written", cs->label, what,
           kvrt_status_name(want));
}

/* Buffers every check starts from: valid for 2 tokens of layer 0. */
struct args {
    uint64_t tokens, k_bytes, v_bytes;
    kvrt_buffer *k, *v, *k_out, *v_out, *foreign;
    char foreign_name[64];
};

static bool args_make(struct conf_case *cs, struct args *a)
{
    struct conf_cache *c = &cs->cache;
    memset(a, 0, sizeof(*a));
    a->tokens = 2;
    a->k_bytes = conf_k_bytes(c, 0, a->tokens);
    a->v_bytes = conf_v_bytes(c, 0, a->tokens);
    a->k = conf_sentinel_buffer(cs->backend, a->k_bytes);
    a->v = conf_sentinel_buffer(cs->backend, a->v_bytes);
    a->k_out = conf_sentinel_buffer(cs->backend, a->k_bytes);
    a->v_out = conf_sentinel_buffer(cs->backend, a->v_bytes);
    if (cs->plugin->foreign) {
        a->foreign = conf_sentinel_buffer(cs->plugin->foreign, a->k_bytes > a->v_bytes ? a->k_bytes : a->v_bytes);
        snprintf(a->foreign_name, sizeof(a->foreign_name), "\"%s\"", kvrt_backend_name(cs->plugin->foreign));
    }
    return a->k && a->v && a->k_out && a->v_out;
}

static void args_free(struct args *a)
{
    kvrt_buffer_destroy(a->k);
    kvrt_buffer_destroy(a->v);
    kvrt_buffer_destroy(a->k_out);
    kvrt_buffer_destroy(a->v_out);
    kvrt_buffer_destroy(a->foreign);
}

static void token_errors(struct conf_case *cs, struct args *a, bool is_write)
{
    struct conf_cache *c = &cs->cache;
    const char *fn = is_write ? "write" : "read";
    uint32_t op = is_write ? KVRT_OP_WRITE : KVRT_OP_READ;
    kvrt_buffer *k = is_write ? a->k : a->k_out, *v = is_write ? a->v : a->v_out;
    int (*call)(kvrt_cache *, uint32_t, uint64_t, const int64_t *, kvrt_buffer *, uint64_t, kvrt_buffer *, uint64_t) =
        is_write ? kvrt_cache_write : kvrt_cache_read;
    if (!conf_has_op(cs, op)) {
        int64_t slots[2] = {0, 1};
        struct guard g;
        guard_begin(&g, c, k, v, NULL);
        judge(cs, &g, capture(call(c->cache, 0, 2, slots, k, 0, v, 0)), KVRT_ERR_UNSUPPORTED,
              is_write ? "write on a backend without write" : "read on a backend without read", fn, NULL);
        return;
    }
    char value[32], what[128];
    struct guard g;

    uint64_t limit = conf_num_slots(c);
    int64_t slots[2] = {3, (int64_t)limit};
    snprintf(value, sizeof(value), "%llu", (unsigned long long)limit);
    snprintf(what, sizeof(what), "%s with slot %s (one past the last) after a valid one", fn, value);
    guard_begin(&g, c, k, v, NULL);
    judge(cs, &g, capture(call(c->cache, 0, 2, slots, k, 0, v, 0)), KVRT_ERR_INVALID, what, "slot", value);

    int64_t good[2] = {1, 5};
    snprintf(value, sizeof(value), "%u", c->num_layers);
    snprintf(what, sizeof(what), "%s to layer %s of %u", fn, value, c->num_layers);
    guard_begin(&g, c, k, v, NULL);
    judge(cs, &g, capture(call(c->cache, c->num_layers, 2, good, k, 0, v, 0)), KVRT_ERR_INVALID, what, "layer", value);

    /* K one element short, through its offset. */
    const uint64_t elem = c->layers[0].elem;
    snprintf(value, sizeof(value), "%llu", (unsigned long long)a->k_bytes);
    snprintf(what, sizeof(what), "%s with a K buffer one element short", fn);
    guard_begin(&g, c, k, v, NULL);
    judge(cs, &g, capture(call(c->cache, 0, 2, good, k, elem, v, 0)), KVRT_ERR_INVALID, what, "K", value);

    snprintf(value, sizeof(value), "%llu", (unsigned long long)a->v_bytes);
    snprintf(what, sizeof(what), "%s with a V buffer one element short", fn);
    guard_begin(&g, c, k, v, NULL);
    judge(cs, &g, capture(call(c->cache, 0, 2, good, k, 0, v, elem)), KVRT_ERR_INVALID, what, "V", value);

    snprintf(what, sizeof(what), "%s with a NULL V for a layer with V", fn);
    guard_begin(&g, c, k, NULL, NULL);
    judge(cs, &g, capture(call(c->cache, 0, 2, good, k, 0, NULL, 0)), KVRT_ERR_INVALID, what, "V", "NULL");

    /* The cache's own buffer as K or V: the backend would copy between
     * overlapping ranges of one allocation. */
    kvrt_buffer *own = kvrt_cache_buffer(c->cache);
    snprintf(what, sizeof(what), "%s with K inside the cache's own buffer", fn);
    guard_begin(&g, c, v, NULL, NULL);
    judge(cs, &g, capture(call(c->cache, 0, 2, good, own, 0, v, 0)), KVRT_ERR_INVALID, what, "K", "cache's own buffer");
    snprintf(what, sizeof(what), "%s with V inside the cache's own buffer, at its end", fn);
    guard_begin(&g, c, k, NULL, NULL);
    judge(cs, &g, capture(call(c->cache, 0, 2, good, k, 0, own, c->bytes - a->v_bytes)), KVRT_ERR_INVALID, what, "V",
          "cache's own buffer");
    if (!is_write) {
        /* Reading writes K and V: one buffer holding both, overlapping. */
        kvrt_buffer *both = conf_sentinel_buffer(cs->backend, a->k_bytes + a->v_bytes);
        snprintf(value, sizeof(value), "[%llu, ", (unsigned long long)elem);
        snprintf(what, sizeof(what), "read with K and V overlapping by all but one element in one buffer");
        guard_begin(&g, c, both, NULL, NULL);
        judge(cs, &g, capture(call(c->cache, 0, 2, good, both, 0, both, elem)), KVRT_ERR_INVALID, what, "overlap",
              value);
        kvrt_buffer_destroy(both);
    }

    snprintf(what, sizeof(what), "%s with a K buffer of another backend", fn);
    if (!a->foreign) {
        tap_skip("%s: %s: %s", cs->label, what, cs->plugin->foreign_why);
    } else {
        guard_begin(&g, c, a->foreign, v, NULL);
        judge(cs, &g, capture(call(c->cache, 0, 2, good, a->foreign, 0, v, 0)), KVRT_ERR_INVALID, what, "backend",
              a->foreign_name);
    }
}

static void block_errors(struct conf_case *cs, struct args *a)
{
    struct conf_cache *c = &cs->cache;
    char value[32], what[160];
    struct guard g;
    const int64_t nb = (int64_t)c->num_blocks;

    if (!conf_has_op(cs, KVRT_OP_COPY_BLOCKS)) {
        tap_skip("%s: copy_blocks errors: the backend does not declare copy_blocks", cs->label);
    } else {
        int64_t pairs[4] = {0, 1, 2, nb};
        snprintf(value, sizeof(value), "%lld", (long long)nb);
        snprintf(what, sizeof(what), "copy_blocks with destination block %s after a valid pair", value);
        guard_begin(&g, c, NULL, NULL, NULL);
        judge(cs, &g, capture(kvrt_cache_copy_blocks(c->cache, 2, pairs)), KVRT_ERR_INVALID, what, "block", value);

        int64_t neg[2] = {-1, 2};
        guard_begin(&g, c, NULL, NULL, NULL);
        judge(cs, &g, capture(kvrt_cache_copy_blocks(c->cache, 1, neg)), KVRT_ERR_INVALID,
              "copy_blocks with source block -1", "block", "-1");
    }

    const uint64_t per = c->staging_per_block;
    for (int gather = 1; gather >= 0; gather--) {
        const char *fn = gather ? "gather" : "scatter";
        int (*call)(kvrt_cache *, uint64_t, const int64_t *, kvrt_buffer *, uint64_t) =
            gather ? kvrt_cache_gather : kvrt_cache_scatter;
        if (!conf_has_op(cs, gather ? KVRT_OP_GATHER : KVRT_OP_SCATTER)) {
            tap_skip("%s: %s errors: the backend does not declare %s", cs->label, fn, fn);
            continue;
        }
        kvrt_buffer *staging = conf_sentinel_buffer(cs->backend, 2 * per);
        int64_t ids[2] = {1, nb + 3};
        snprintf(value, sizeof(value), "%lld", (long long)nb + 3);
        snprintf(what, sizeof(what), "%s of block %s after a valid one", fn, value);
        guard_begin(&g, c, staging, NULL, NULL);
        judge(cs, &g, capture(call(c->cache, 2, ids, staging, 0)), KVRT_ERR_INVALID, what, "block", value);

        int64_t valid[2] = {1, 2};
        snprintf(value, sizeof(value), "%llu", 2 * (unsigned long long)per);
        snprintf(what, sizeof(what), "%s of 2 blocks with staging 1 byte short", fn);
        guard_begin(&g, c, staging, NULL, NULL);
        judge(cs, &g, capture(call(c->cache, 2, valid, staging, 1)), KVRT_ERR_INVALID, what, "staging", value);

        snprintf(what, sizeof(what), "%s with staging inside the cache's own buffer", fn);
        guard_begin(&g, c, NULL, NULL, NULL);
        judge(cs, &g, capture(call(c->cache, 2, (int64_t[]){1, 0}, kvrt_cache_buffer(c->cache), 0)), KVRT_ERR_INVALID,
              what, "staging", "cache's own buffer");

        /* A count larger than the id array: refused by the staging size
         * before the array is read (ASan builds catch a read past it). */
        int64_t *two = malloc(2 * sizeof(*two));
        if (two) {
            two[0] = 1;
            two[1] = 2;
            snprintf(what, sizeof(what), "%s of 1000 blocks, 2 ids given, staging for 2", fn);
            snprintf(value, sizeof(value), "%llu", 1000 * (unsigned long long)per);
            guard_begin(&g, c, staging, NULL, NULL);
            judge(cs, &g, capture(call(c->cache, 1000, two, staging, 0)), KVRT_ERR_INVALID, what, "staging", value);
            free(two);
        }

        snprintf(what, sizeof(what), "%s with a staging buffer of another backend", fn);
        if (!a->foreign) {
            tap_skip("%s: %s: %s", cs->label, what, cs->plugin->foreign_why);
        } else {
            guard_begin(&g, c, a->foreign, NULL, NULL);
            judge(cs, &g, capture(call(c->cache, 1, valid, a->foreign, 0)), KVRT_ERR_INVALID, what, "backend",
                  a->foreign_name);
        }
        kvrt_buffer_destroy(staging);
    }
}

static void decode_errors(struct conf_case *cs)
{
    struct conf_cache *c = &cs->cache;
    if (!conf_has_op(cs, KVRT_OP_DECODE)) {
        tap_skip("%s: decode errors: the backend does not declare decode", cs->label);
        return;
    }
    const struct conf_layer *L = &c->layers[0];
    if (!(cs->plugin->info.decode_dtypes & (1u << cs->dtype))) {
        /* ABI 1.1: the core refuses a type outside decode_dtypes by name,
         * before the plugin runs and before any other argument matters. */
        kvrt_buffer *none = conf_sentinel_buffer(cs->backend, 64);
        struct kvrt_decode_params p;
        kvrt_decode_params_default(&p);
        struct guard g;
        guard_begin(&g, c, none, NULL, NULL);
        judge(cs, &g, capture(kvrt_cache_decode(c->cache, 0, &p)), KVRT_ERR_UNSUPPORTED,
              "decode of a type outside decode_dtypes", "decode", kvrt_dtype_name(cs->dtype));
        kvrt_buffer_destroy(none);
        return;
    }
    /* Buffers big enough for the largest Hq used below, so that only the
     * one thing each call gets wrong is wrong. */
    const uint64_t hq = 4 * L->heads, seqs = 2, max_hq = hq + 1;
    const uint64_t q_bytes = seqs * max_hq * L->head_size * L->elem;
    const uint64_t out_bytes = seqs * max_hq * L->head_size_v * L->elem;
    kvrt_buffer *q = conf_sentinel_buffer(cs->backend, q_bytes);
    kvrt_buffer *out = conf_sentinel_buffer(cs->backend, out_bytes);
    int32_t tables[4] = {1, 2, 3, 4};
    /* Both sequences use both of their blocks. */
    int32_t lens[2] = {(int32_t)c->block_size + 1, (int32_t)c->block_size + 2};
    struct kvrt_decode_params p;
    kvrt_decode_params_default(&p);
    p.num_seqs = (uint32_t)seqs;
    p.num_q_heads = (uint32_t)hq;
    p.q = q;
    p.out = out;
    p.block_tables = tables;
    p.max_blocks_per_seq = 2;
    p.seq_lens = lens;
    p.scale = 0.25f;
    char value[32], what[160];
    struct guard g;

    struct kvrt_decode_params bad = p;
    bad.num_q_heads = (uint32_t)(hq + 1);
    snprintf(value, sizeof(value), "%llu", (unsigned long long)hq + 1);
    snprintf(what, sizeof(what), "decode with Hq %s, not a multiple of H %llu", value, (unsigned long long)L->heads);
    guard_begin(&g, c, out, NULL, NULL);
    judge(cs, &g, capture(kvrt_cache_decode(c->cache, 0, &bad)), KVRT_ERR_INVALID, what, "num_q_heads", value);

    bad = p;
    bad.scale = INFINITY;
    guard_begin(&g, c, out, NULL, NULL);
    judge(cs, &g, capture(kvrt_cache_decode(c->cache, 0, &bad)), KVRT_ERR_INVALID, "decode with scale inf", "scale",
          NULL);

    int32_t zero[2] = {3, 0};
    bad = p;
    bad.seq_lens = zero;
    guard_begin(&g, c, out, NULL, NULL);
    judge(cs, &g, capture(kvrt_cache_decode(c->cache, 0, &bad)), KVRT_ERR_INVALID,
          "decode with seq_len 0 for the second sequence", "seq_lens", NULL);

    int32_t far[4] = {1, 2, 3, (int32_t)c->num_blocks};
    bad = p;
    bad.block_tables = far;
    snprintf(value, sizeof(value), "%llu", (unsigned long long)c->num_blocks);
    snprintf(what, sizeof(what), "decode with block table entry %s (one past the last block)", value);
    guard_begin(&g, c, out, NULL, NULL);
    judge(cs, &g, capture(kvrt_cache_decode(c->cache, 0, &bad)), KVRT_ERR_INVALID, what, "block_tables", value);

    int32_t neg[4] = {-1, 2, 3, 4};
    bad = p;
    bad.block_tables = neg;
    guard_begin(&g, c, out, NULL, NULL);
    judge(cs, &g, capture(kvrt_cache_decode(c->cache, 0, &bad)), KVRT_ERR_INVALID,
          "decode with block table entry -1 inside a sequence", "block_tables", "-1");

    bad = p;
    bad.out_offset = out_bytes - seqs * hq * L->head_size_v * L->elem + L->elem;
    snprintf(value, sizeof(value), "%llu", (unsigned long long)seqs * hq * L->head_size_v * L->elem);
    guard_begin(&g, c, out, NULL, NULL);
    judge(cs, &g, capture(kvrt_cache_decode(c->cache, 0, &bad)), KVRT_ERR_INVALID,
          "decode with an output buffer one element short", "out", value);
    bad = p;
    bad.q = kvrt_cache_buffer(c->cache);
    guard_begin(&g, c, out, NULL, NULL);
    judge(cs, &g, capture(kvrt_cache_decode(c->cache, 0, &bad)), KVRT_ERR_INVALID,
          "decode with q inside the cache's own buffer", "q", "cache's own buffer");

    bad = p;
    bad.out = kvrt_cache_buffer(c->cache);
    guard_begin(&g, c, NULL, NULL, NULL);
    judge(cs, &g, capture(kvrt_cache_decode(c->cache, 0, &bad)), KVRT_ERR_INVALID,
          "decode with out inside the cache's own buffer", "out", "cache's own buffer");

    /* q and out in one buffer, out starting one element into q. */
    const uint64_t both_bytes = q_bytes + out_bytes;
    kvrt_buffer *both = conf_sentinel_buffer(cs->backend, both_bytes);
    bad = p;
    bad.q = both;
    bad.out = both;
    bad.out_offset = L->elem;
    guard_begin(&g, c, both, NULL, NULL);
    judge(cs, &g, capture(kvrt_cache_decode(c->cache, 0, &bad)), KVRT_ERR_INVALID,
          "decode with out overlapping q in one buffer", "overlap", "q range");
    kvrt_buffer_destroy(both);
    kvrt_buffer_destroy(q);
    kvrt_buffer_destroy(out);
}

/* Backends with host addresses: the host side of an upload or download
 * pointing into the buffer itself. */
static void host_overlap_errors(struct conf_case *cs)
{
    struct conf_cache *c = &cs->cache;
    kvrt_buffer *own = kvrt_cache_buffer(c->cache);
    void *addr = NULL;
    if (kvrt_buffer_address(own, &addr, NULL) != KVRT_OK) {
        tap_skip("%s: upload/download from the buffer's own bytes: the backend's buffers have no host address",
                 cs->label);
        return;
    }
    struct guard g;
    guard_begin(&g, c, NULL, NULL, NULL);
    judge(cs, &g, capture(kvrt_buffer_upload(own, 8, (const uint8_t *)addr + 4, 16)), KVRT_ERR_INVALID,
          "upload into the cache buffer from its own bytes 4 apart", "kvrt_buffer_upload", "overlaps");
    guard_begin(&g, c, NULL, NULL, NULL);
    judge(cs, &g, capture(kvrt_buffer_download(own, 0, (uint8_t *)addr + 15, 16)), KVRT_ERR_INVALID,
          "download from the cache buffer into its own bytes", "kvrt_buffer_download", "[0, 16)");
}

void conf_check_errors(struct conf_case *cs)
{
    struct args a;
    if (!args_make(cs, &a)) {
        tap_ok(false, "%s: error paths: argument buffers created", cs->label);
        args_free(&a);
        return;
    }
    token_errors(cs, &a, true);
    token_errors(cs, &a, false);
    block_errors(cs, &a);
    decode_errors(cs);
    host_overlap_errors(cs);
    args_free(&a);
}
