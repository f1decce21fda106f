/*
 * Bad input gets a clear error and changes nothing: every refusal names the
 * value and what is valid, and after it the store holds what it held and
 * the cache what it held.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_test.h"
#include "tap.h"

#define T 32

static kvrt_runtime *rt;
static struct st_model model;

static bool has(const char *a, const char *b, const char *c)
{
    const char *m = kvrt_error_message();
    return strstr(m, a) && (!b || strstr(m, b)) && (!c || strstr(m, c));
}

#define REFUSED(call, status, a, b, c, what)                                                                           \
    do {                                                                                                               \
        int rc_ = (call);                                                                                              \
        tap_ok(rc_ == (status) && has(a, b, c), "%s: %s", what, kvrt_error_message());                                 \
    } while (0)

static void options(void)
{
    struct kvrt_store_options o;
    kvrt_store_options_default(&o);
    kvrt_store *s = NULL;
    o.size = 8;
    REFUSED(kvrt_store_open(&o, &s), KVRT_ERR_INVALID, "options size 8", "expected 168", NULL, "a wrong options size");
    kvrt_store_options_default(&o);
    REFUSED(kvrt_store_open(&o, &s), KVRT_ERR_INVALID, "no model and no path", NULL, NULL, "neither model nor path");
    o.num_groups = 1;
    REFUSED(kvrt_store_open(&o, &s), KVRT_ERR_INVALID, "groups is NULL but num_groups is 1", NULL, NULL,
            "groups and their count disagree");
    o.groups = &model.group;
    REFUSED(kvrt_store_open(&o, &s), KVRT_ERR_INVALID, "model_id is missing", "1 to 1024 bytes", NULL, "no model id");
    o.model_id = "m";
    o.chunk_tokens = 0;
    o.shared_timeout_s = NAN;
    REFUSED(kvrt_store_open(&o, &s), KVRT_ERR_INVALID, "shared_timeout_s nan", "0 (default 1) to 3600", NULL,
            "a NaN timeout");
    o.shared_timeout_s = 0;
    o.chunk_tokens = (1u << 20) + 1;
    REFUSED(kvrt_store_open(&o, &s), KVRT_ERR_INVALID, "chunk_tokens 1048577", "valid are 1 to 1048576", NULL,
            "a chunk of over 2^20 tokens");
    o.chunk_tokens = T;
    o.memory_bytes = 100;
    REFUSED(kvrt_store_open(&o, &s), KVRT_ERR_INVALID, "memory_bytes 100", "one entry of this model (4096 bytes)", NULL,
            "a memory tier smaller than one entry");
    o.memory_bytes = 0;
    o.path = st_tempdir("errors");
    o.disk_bytes = 1000;
    REFUSED(kvrt_store_open(&o, &s), KVRT_ERR_INVALID, "disk_bytes 1000", "(8192 bytes on disk)", NULL,
            "a disk smaller than one entry");
    st_rmdir(o.path);
    free((char *)o.path);
    o.path = NULL;
    o.disk_bytes = 0;
    o.shared = "redis://:7";
    REFUSED(kvrt_store_open(&o, &s), KVRT_ERR_INVALID, "\"redis://:7\" is not a server address",
            "redis://[USER@]HOST:PORT[,HOST:PORT...]", NULL, "a URL without a host");
    o.shared = "redis://h:70000";
    REFUSED(kvrt_store_open(&o, &s), KVRT_ERR_INVALID, "\"redis://h:70000\"", "port 1-65535", NULL,
            "a port out of range");
    o.shared = NULL;
    /* the worker threads' count, from the environment */
    const char *bad_threads[] = {"0", "65", "two", "-1", "3x"};
    for (size_t i = 0; i < sizeof(bad_threads) / sizeof(bad_threads[0]); i++) {
        setenv("KVRT_STORE_THREADS", bad_threads[i], 1);
        char want[64];
        snprintf(want, sizeof(want), "KVRT_STORE_THREADS is \"%s\"", bad_threads[i]);
        REFUSED(kvrt_store_open(&o, &s), KVRT_ERR_INVALID, want, "1 (the caller's thread only) to 64", NULL,
                "a thread count out of range or not a number");
    }
    setenv("KVRT_STORE_THREADS", "64", 1);
    tap_ok(kvrt_store_open(&o, &s) == KVRT_OK, "KVRT_STORE_THREADS 64 opens: %s", kvrt_error_message());
    kvrt_store_close(s);
    s = NULL;
    unsetenv("KVRT_STORE_THREADS");

    /* models the store cannot keep */
    struct kvrt_layer_entry e[2] = {model.entries[0], model.entries[1]};
    struct kvrt_group g = {e, 2};
    o.groups = &g;
    e[1].spec.kind = KVRT_SPEC_STATE;
    e[1].spec.state_content_bytes = 64;
    REFUSED(kvrt_store_open(&o, &s), KVRT_ERR_UNSUPPORTED, "layer \"layer.1\" is a state layer",
            "keeps attention and MLA layers", NULL, "a state layer");
    e[1] = model.entries[1];
    e[1].spec.num_kv_heads = 4;
    REFUSED(kvrt_store_open(&o, &s), KVRT_ERR_UNSUPPORTED, "layer \"layer.1\" has 4 KV heads", "\"layer.0\" 2",
            "one number of KV heads", "layers of different head counts");
    e[1] = model.entries[1];
    e[1].name = "layer.0";
    REFUSED(kvrt_store_open(&o, &s), KVRT_ERR_INVALID, "names layer \"layer.0\" twice", NULL, NULL,
            "a layer named twice");
    e[1] = model.entries[1];
    e[1].spec.tokens_per_state_num = 2;
    REFUSED(kvrt_store_open(&o, &s), KVRT_ERR_UNSUPPORTED, "one state per 2/1 tokens", "one state per token", NULL,
            "compressed states");
    e[1] = model.entries[1];
    e[1].spec.head_size = 0;
    REFUSED(kvrt_store_open(&o, &s), KVRT_ERR_INVALID, "layer \"layer.1\":", NULL, NULL,
            "a spec libkvrt refuses, prefixed with the layer");
}

static void spans(void)
{
    kvrt_store *s = st_open(&model, "errors", T, 16 << 20, NULL, 0, NULL);
    struct st_cache c, other;
    const uint64_t n = 3 * T + 4, nb = (n + 15) / 16;
    int64_t table[16];
    int32_t tok[3 * T + 4];
    st_tokens(tok, n, 1);
    bool ok = s && st_cache_make(&c, rt, "cpu", &model, KVRT_LAYOUT_LBHNC, 16, 0, nb + 2, 0, model.heads);
    if (!tap_ok(ok, "a store and a cache"))
        return;
    st_table(&c, table, nb, 1);
    st_fill(&c, table, 0, n, 5);
    struct kvrt_store_span sp = st_span(&c, table, nb, tok, n, 0, KVRT_UNSET);
    uint64_t got = 77;

    sp.size = 1;
    REFUSED(kvrt_store_put(s, &sp, &got), KVRT_ERR_INVALID, "span size 1", "kvrt_store_span_default", NULL,
            "a wrong span size");
    tap_ok(got == 0, "a refused put reports 0 tokens stored");
    sp = st_span(&c, table, nb, tok, n, 0, KVRT_UNSET);
    sp.reserved[0] = 9;
    REFUSED(kvrt_store_put(s, &sp, NULL), KVRT_ERR_INVALID, "kvrt_store_span.reserved[0] is 9", NULL, NULL,
            "span reserved bytes");
    sp = st_span(&c, table, nb, tok, n, 0, KVRT_UNSET);
    sp.cache = NULL;
    REFUSED(kvrt_store_get(s, &sp, NULL), KVRT_ERR_INVALID, "the span has no cache", NULL, NULL, "no cache");
    sp = st_span(&c, table, nb, tok, n - 10, 0, n);
    REFUSED(kvrt_store_put(s, &sp, NULL), KVRT_ERR_INVALID, "the range [0, 100) needs 100 token ids", "tokens has 90",
            NULL, "a token array shorter than the range");
    sp = st_span(&c, table, nb, tok, n, 5, KVRT_UNSET);
    REFUSED(kvrt_store_put(s, &sp, NULL), KVRT_ERR_INVALID, "first 5 is not on a chunk boundary",
            "a multiple of chunk_tokens (32)", NULL, "a range off a chunk boundary");
    sp = st_span(&c, table, nb, tok, n, n + 1, 0);
    REFUSED(kvrt_store_get(s, &sp, NULL), KVRT_ERR_INVALID, "first 101 is past the 100 tokens", NULL, NULL,
            "first past the tokens");
    sp = st_span(&c, table, 3, tok, n, 0, KVRT_UNSET);
    REFUSED(kvrt_store_put(s, &sp, NULL), KVRT_ERR_INVALID, "block_table has 3 blocks",
            "tokens up to 96 need 6 blocks of 16", NULL, "a block table too short");
    int64_t bad[16];
    memcpy(bad, table, sizeof(bad));
    bad[2] = (int64_t)c.blocks;
    sp = st_span(&c, bad, nb, tok, n, 0, KVRT_UNSET);
    REFUSED(kvrt_store_put(s, &sp, NULL), KVRT_ERR_INVALID, "block_table[2] is 9", "blocks are 0 to 8", NULL,
            "a block id past the cache");
    bad[2] = -1;
    REFUSED(kvrt_store_get(s, &sp, NULL), KVRT_ERR_INVALID, "block_table[2] is -1", NULL, NULL, "a negative block id");
    bad[2] = table[4];
    REFUSED(kvrt_store_get(s, &sp, NULL), KVRT_ERR_INVALID, "names block", "twice", "distinct", "a repeated block");
    int32_t neg[3 * T + 4];
    memcpy(neg, tok, sizeof(neg));
    neg[40] = -3;
    sp = st_span(&c, table, nb, neg, n, 0, KVRT_UNSET);
    REFUSED(kvrt_store_put(s, &sp, NULL), KVRT_ERR_INVALID, "tokens[40] is -3", "token ids are >= 0", NULL,
            "a negative token id");
    sp = st_span(&c, table, nb, tok, n, 0, KVRT_UNSET);
    sp.head_start = 1;
    sp.num_heads = 2;
    REFUSED(kvrt_store_put(s, &sp, NULL), KVRT_ERR_INVALID, "heads [1, 3) are outside the model's 2 KV heads", NULL,
            NULL, "heads outside the model");
    sp.num_heads = 0;
    REFUSED(kvrt_store_put(s, &sp, NULL), KVRT_ERR_INVALID, "head_start 1 with num_heads 0", NULL, NULL,
            "a start with all heads");
    sp.head_start = 0;
    sp.num_heads = 1;
    REFUSED(kvrt_store_put(s, &sp, NULL), KVRT_ERR_INVALID, "holds 2 KV heads", "names 1 heads", "heads=(start, count)",
            "a cache holding other heads than the span says");

    /* caches that do not match the model */
    struct st_model fp16;
    st_model_init(&fp16, KVRT_SPEC_ATTENTION, KVRT_DTYPE_FP16, 2, 2, 16, 16);
    ok = st_cache_make(&other, rt, "cpu", &fp16, KVRT_LAYOUT_LBHNC, 16, 0, nb + 2, 0, 2);
    sp = st_span(&other, table, nb, tok, n, 0, KVRT_UNSET);
    REFUSED(ok ? kvrt_store_put(s, &sp, NULL) : -99, KVRT_ERR_INVALID, "layer \"layer.0\" holds fp16, the model's bf16",
            NULL, NULL, "a cache of another dtype");
    st_cache_free(&other);
    struct st_model hs;
    st_model_init(&hs, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 2, 2, 8, 16);
    ok = st_cache_make(&other, rt, "cpu", &hs, KVRT_LAYOUT_LBHNC, 16, 0, nb + 2, 0, 2);
    sp = st_span(&other, table, nb, tok, n, 0, KVRT_UNSET);
    REFUSED(ok ? kvrt_store_get(s, &sp, NULL) : -99, KVRT_ERR_INVALID, "has head size 8, the model's 16", NULL, NULL,
            "a cache of another head size");
    st_cache_free(&other);
    struct st_model one;
    st_model_init(&one, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 1, 2, 16, 16);
    ok = st_cache_make(&other, rt, "cpu", &one, KVRT_LAYOUT_LBHNC, 16, 0, nb + 2, 0, 2);
    sp = st_span(&other, table, nb, tok, n, 0, KVRT_UNSET);
    REFUSED(ok ? kvrt_store_put(s, &sp, NULL) : -99, KVRT_ERR_INVALID, "the cache has no layer \"layer.1\"",
            "every layer of the span's layers [0, 2)", NULL, "a cache missing a layer");
    st_cache_free(&other);

    struct kvrt_store_stats st = {0};
    kvrt_store_stats(s, &st);
    tap_ok(st.memory_entries == 0 && st.put_entries == 0, "after every refusal the store holds nothing");
    /* a refused get leaves the cache as it was */
    uint64_t hit = 0;
    sp = st_span(&c, table, nb, tok, n, 0, KVRT_UNSET);
    kvrt_store_put(s, &sp, &got);
    st_fill(&c, table, 0, n, 9);
    sp.first = 3;
    kvrt_store_get(s, &sp, &got);
    tap_ok(st_check(&c, table, 0, n, 9, NULL, 0) == 0 && got == 0, "a refused get leaves the cache as it was");

    REFUSED(kvrt_store_lookup(s, NULL, 5, 0, 0, &hit), KVRT_ERR_INVALID, "num_tokens is 5 but tokens is NULL", NULL,
            NULL, "lookup without tokens");
    REFUSED(kvrt_store_lookup(s, tok, n, 2, 1, &hit), KVRT_ERR_INVALID, "heads [2, 3) are outside", NULL, NULL,
            "lookup of heads outside the model");
    sp = st_span(&c, table, nb, tok, n, 0, KVRT_UNSET);
    REFUSED(kvrt_store_span_tp(s, &sp, 3, 0), KVRT_ERR_INVALID, "3", NULL, NULL,
            "TP 3 of 2 heads, refused by libkvrt's rule");
    tap_ok(kvrt_store_span_tp(s, &sp, 4, 3) == KVRT_OK && sp.head_start == 1 && sp.num_heads == 1 && sp.replica == 1,
           "TP 4 of 2 heads: rank 3 holds head 1, replica 1");
    kvrt_store_request *r = NULL;
    tap_ok(kvrt_store_get_post(s, &sp, NULL) == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "out is required"),
           "a post without out: %s", kvrt_error_message());
    sp = st_span(&c, table, nb, tok, n, 0, KVRT_UNSET);
    ok = kvrt_store_get_post(s, &sp, &r) == KVRT_OK;
    REFUSED(ok ? kvrt_store_wait(r, NAN, NULL) : -99, KVRT_ERR_INVALID, "timeout_s is NaN", NULL, NULL,
            "a wait of NaN seconds");
    kvrt_store_release(r);
    REFUSED(kvrt_store_test(NULL, NULL), KVRT_ERR_INVALID, "the request is NULL", NULL, NULL, "test of NULL");
    REFUSED(kvrt_store_list(s, NULL, NULL), KVRT_ERR_STATE, "has no disk tier", NULL, NULL, "ls without a disk");
    st.size = 3;
    REFUSED(kvrt_store_stats(s, &st), KVRT_ERR_INVALID, "stats size 3", NULL, NULL, "a wrong stats size");
    st_cache_free(&c);
    kvrt_store_close(s);
}

int main(void)
{
    tap_plan_dynamic();
    struct kvrt_runtime_options o;
    kvrt_runtime_options_default(&o);
    if (kvrt_runtime_open(&o, &rt) != KVRT_OK)
        tap_skip_all("no runtime: %s", kvrt_error_message());
    st_model_init(&model, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 2, 2, 16, 16);
    options();
    spans();
    kvrt_runtime_close(rt);
    return tap_done();
}
