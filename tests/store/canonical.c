/*
 * Keys and the canonical form, through the memory tier: what a cache of
 * one layout, block size and head slice puts, a cache of any other loads,
 * token for token (checked through libkvrt's own read path), and nothing
 * else of the destination changes.  Keys depend on the model and on every
 * earlier token, never on the cache.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_test.h"
#include "tap.h"

#define T 32 /* chunk tokens */

static kvrt_runtime *rt;

static void keys(void)
{
    struct st_model m;
    st_model_init(&m, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 2, 4, 16, 16);
    kvrt_store *a = st_open(&m, "tiny@1", T, 1 << 20, NULL, 0, NULL);
    kvrt_store *b = st_open(&m, "tiny@1", T, 1 << 20, NULL, 0, NULL);
    kvrt_store *c = st_open(&m, "tiny@2", T, 1 << 20, NULL, 0, NULL);
    struct st_model m2;
    st_model_init(&m2, KVRT_SPEC_ATTENTION, KVRT_DTYPE_FP16, 2, 4, 16, 16);
    kvrt_store *d = st_open(&m2, "tiny@1", T, 1 << 20, NULL, 0, NULL);
    if (!tap_ok(a && b && c && d, "four stores open")) {
        kvrt_store_close(a), kvrt_store_close(b), kvrt_store_close(c), kvrt_store_close(d);
        return;
    }
    int32_t tok[3 * T + 5];
    st_tokens(tok, 3 * T + 5, 1);
    uint8_t ka[3][32], kb[3][32], kc[3][32], kd[3][32], ke[3][32];
    uint64_t n = 0;
    tap_ok(kvrt_store_keys(a, tok, 3 * T + 5, &ka[0][0], 3, &n) == KVRT_OK && n == 3,
           "three whole chunks of %d tokens give three keys", 3 * T + 5);
    kvrt_store_keys(b, tok, 3 * T + 5, &kb[0][0], 3, NULL);
    kvrt_store_keys(c, tok, 3 * T + 5, &kc[0][0], 3, NULL);
    kvrt_store_keys(d, tok, 3 * T + 5, &kd[0][0], 3, NULL);
    tap_ok(memcmp(ka, kb, sizeof(ka)) == 0, "two stores of one model agree on the keys");
    tap_ok(memcmp(ka[0], kc[0], 32) != 0, "another model id gives other keys");
    tap_ok(memcmp(ka[0], kd[0], 32) != 0, "another dtype gives other keys");
    tok[T + 3] ^= 1; /* chunk 1 changes: its key and the next, not chunk 0's */
    kvrt_store_keys(a, tok, 3 * T, &ke[0][0], 3, NULL);
    tap_ok(memcmp(ka[0], ke[0], 32) == 0 && memcmp(ka[1], ke[1], 32) != 0 && memcmp(ka[2], ke[2], 32) != 0,
           "a token changed in chunk 1 changes the keys of chunks 1 and 2, not 0");
    kvrt_store_close(a);
    kvrt_store_close(b);
    kvrt_store_close(c);
    kvrt_store_close(d);
}

/* Put from one cache, get into another; check the loaded tokens and that
 * the destination's other slots kept their pattern. */
static void pair(const struct st_model *m, enum kvrt_layout la, uint64_t bsa, uint64_t ka, enum kvrt_layout lb,
                 uint64_t bsb, uint64_t kb, const char *what)
{
    const uint64_t chunks = 3, n = chunks * T + 7; /* a partial chunk at the end */
    struct st_cache a, b;
    uint64_t na = (n + bsa - 1) / bsa, nb = (n + bsb - 1) / bsb;
    if (!st_cache_make(&a, rt, "cpu", m, la, bsa, ka, na + 3, 0, m->heads) ||
        !st_cache_make(&b, rt, "cpu", m, lb, bsb, kb, nb + 5, 0, m->heads)) {
        tap_ok(false, "%s: caches", what);
        return;
    }
    int64_t *ta = malloc(na * sizeof(*ta)), *tb = malloc(nb * sizeof(*tb));
    int32_t *tok = malloc(n * sizeof(*tok));
    st_table(&a, ta, na, 11);
    st_table(&b, tb, nb, 12);
    st_tokens(tok, n, 5);
    kvrt_store *s = st_open(m, "pair", T, 64 << 20, NULL, 0, NULL);
    bool ok = s && st_fill(&a, ta, 0, n, 1) && st_fill(&b, tb, 0, n, 9);
    uint64_t stored = 0, loaded = 0, hit = 0;
    struct kvrt_store_span sa = st_span(&a, ta, na, tok, n, 0, KVRT_UNSET);
    struct kvrt_store_span sb = st_span(&b, tb, nb, tok, n, 0, 2 * T);
    if (ok && kvrt_store_put(s, &sa, &stored) != KVRT_OK) {
        tap_diag("put: %s", kvrt_error_message());
        ok = false;
    }
    if (ok && kvrt_store_lookup(s, tok, n, 0, 0, &hit) != KVRT_OK)
        ok = false;
    if (ok && kvrt_store_get(s, &sb, &loaded) != KVRT_OK) {
        tap_diag("get: %s", kvrt_error_message());
        ok = false;
    }
    char where[128] = "";
    uint64_t bad_in = ok ? st_check(&b, tb, 0, 2 * T, 1, where, sizeof(where)) : 1;
    if (bad_in)
        tap_diag("%s: %llu cells differ, first at %s", what, (unsigned long long)bad_in, where);
    uint64_t bad_out = ok ? st_check(&b, tb, 2 * T, n - 2 * T, 9, where, sizeof(where)) : 1;
    if (bad_out)
        tap_diag("%s: %llu cells outside the range changed, first at %s", what, (unsigned long long)bad_out, where);
    tap_ok(ok && stored == chunks * T && hit == chunks * T && loaded == 2 * T && bad_in == 0 && bad_out == 0,
           "%s: put %llu tokens, lookup %llu, got %llu, exact, others untouched", what, (unsigned long long)stored,
           (unsigned long long)hit, (unsigned long long)loaded);
    kvrt_store_close(s);
    st_cache_free(&a);
    st_cache_free(&b);
    free(ta);
    free(tb);
    free(tok);
}

static void layouts(void)
{
    struct st_model m;
    st_model_init(&m, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 3, 2, 16, 16);
    for (int a = 0; a < KVRT_NUM_LAYOUTS; a++)
        for (int b = 0; b < KVRT_NUM_LAYOUTS; b++) {
            char what[96];
            snprintf(what, sizeof(what), "%s bs 16 -> %s bs %d", kvrt_layout_name(a), kvrt_layout_name(b),
                     (a + b) % 2 ? 5 : 16);
            pair(&m, (enum kvrt_layout)a, 16, 0, (enum kvrt_layout)b, (a + b) % 2 ? 5 : 16, 0, what);
        }
}

static void shapes(void)
{
    struct st_model m;
    st_model_init(&m, KVRT_SPEC_ATTENTION, KVRT_DTYPE_FP32, 2, 3, 8, 24);
    pair(&m, KVRT_LAYOUT_LBNHC, 48, 0, KVRT_LAYOUT_BLHNC, 7, 0, "V larger than K, chunks across blocks of 48 and 7");
    pair(&m, KVRT_LAYOUT_LBHNC, 64, 16, KVRT_LAYOUT_LBNHC, 16, 0, "kernel blocks of 16 in blocks of 64 -> bs 16");
    pair(&m, KVRT_LAYOUT_BLNHC, 3, 0, KVRT_LAYOUT_LBHNC, 32, 8, "bs 3 -> kernel blocks of 8 in blocks of 32");
    struct st_model mla;
    st_model_init(&mla, KVRT_SPEC_MLA, KVRT_DTYPE_BF16, 2, 1, 40, 0);
    pair(&mla, KVRT_LAYOUT_LBHNC, 16, 0, KVRT_LAYOUT_BHLNC, 64, 0, "MLA latent, bs 16 -> 64");
}

/* Tensor parallelism: two ranks of 2 heads put; TP 1 and TP 4 caches get. */
static void parallel(void)
{
    struct st_model m;
    st_model_init(&m, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 2, 4, 16, 16);
    const uint64_t n = 2 * T, blocks = n / 16 + 2;
    kvrt_store *s = st_open(&m, "tp", T, 64 << 20, NULL, 0, NULL);
    int32_t tok[2 * T];
    st_tokens(tok, n, 3);
    struct st_cache r[2], one, four[4];
    int64_t t[16];
    bool ok = s != NULL;
    for (int i = 0; i < 2 && ok; i++) {
        ok = st_cache_make(&r[i], rt, "cpu", &m, KVRT_LAYOUT_LBHNC, 16, 0, blocks, 2 * (uint64_t)i, 2);
        st_table(&r[i], t, n / 16, 20 + (uint64_t)i);
        ok = ok && st_fill(&r[i], t, 0, n, 1);
        uint64_t before = 1, stored = 0;
        if (ok && i == 0) {
            kvrt_store_lookup(s, tok, n, 0, 0, &before);
            tap_ok(before == 0, "before rank 1 puts, all 4 heads are not there (lookup %llu)",
                   (unsigned long long)before);
        }
        struct kvrt_store_span sp = st_span(&r[i], t, n / 16, tok, n, 0, KVRT_UNSET);
        ok = ok && kvrt_store_put(s, &sp, &stored) == KVRT_OK && stored == n;
    }
    uint64_t h01 = 0, h23 = 0, all = 0;
    kvrt_store_lookup(s, tok, n, 0, 2, &h01);
    kvrt_store_lookup(s, tok, n, 2, 2, &h23);
    kvrt_store_lookup(s, tok, n, 0, 0, &all);
    tap_ok(ok && h01 == n && h23 == n && all == n, "TP 2 ranks put their heads; lookup of each slice and of all: %llu",
           (unsigned long long)all);
    ok = ok && st_cache_make(&one, rt, "cpu", &m, KVRT_LAYOUT_BLNHC, 32, 0, n / 32 + 1, 0, 4);
    st_table(&one, t, n / 32, 30);
    uint64_t loaded = 0;
    struct kvrt_store_span sp = st_span(&one, t, n / 32, tok, n, 0, KVRT_UNSET);
    ok = ok && kvrt_store_get(s, &sp, &loaded) == KVRT_OK;
    char where[128] = "";
    uint64_t bad = ok ? st_check(&one, t, 0, n, 1, where, sizeof(where)) : 1;
    tap_ok(ok && loaded == n && bad == 0, "TP 1 (all 4 heads, NHD-like BLNHC, bs 32) loads what TP 2 put%s%s",
           bad ? ": differs at " : "", bad ? where : "");
    st_cache_free(&one);
    bool ok4 = ok;
    for (int i = 0; i < 4 && ok4; i++) {
        ok4 = st_cache_make(&four[i], rt, "cpu", &m, KVRT_LAYOUT_LBNHC, 8, 0, n / 8 + 1, (uint64_t)i, 1);
        st_table(&four[i], t, n / 8, 40 + (uint64_t)i);
        sp = st_span(&four[i], t, n / 8, tok, n, 0, KVRT_UNSET);
        ok4 = ok4 && kvrt_store_get(s, &sp, &loaded) == KVRT_OK && loaded == n &&
              st_check(&four[i], t, 0, n, 1, where, sizeof(where)) == 0;
        st_cache_free(&four[i]);
    }
    tap_ok(ok4, "TP 4 (one head each, bs 8) loads its head");
    st_cache_free(&r[0]);
    st_cache_free(&r[1]);
    kvrt_store_close(s);
}

/* A cache without a host address (OpenCL, on PoCL here): the store reads
 * and writes it through host copies of its blocks' regions. */
static void opencl(void)
{
    struct st_model m;
    st_model_init(&m, KVRT_SPEC_ATTENTION, KVRT_DTYPE_FP32, 2, 2, 16, 16);
#if defined(__SANITIZE_THREAD__)
#define STORE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STORE_TSAN 1
#endif
#endif
#ifdef STORE_TSAN
    tap_skip("a ThreadSanitizer build: the OpenCL driver (PoCL) is not built with it, its threads would be reported");
    tap_skip("a ThreadSanitizer build");
    return;
#endif
    size_t index = 0;
    struct kvrt_plugin_info info;
    memset(&info, 0, sizeof(info));
    if (kvrt_runtime_find_plugin(rt, "opencl", &index) != KVRT_OK ||
        kvrt_runtime_plugin_info(rt, index, &info) != KVRT_OK || !info.available) {
        tap_skip("no OpenCL device here (%s)", info.reason && info.reason[0] ? info.reason : kvrt_error_message());
        tap_skip("no OpenCL device here");
        return;
    }
    const uint64_t n = 3 * T + 5, blocks = (n + 15) / 16;
    struct st_cache cpu, ocl, back;
    int64_t tc[16], to[16], tb[16];
    int32_t tok[3 * T + 5];
    st_tokens(tok, n, 6);
    kvrt_store *s = st_open(&m, "ocl", T, 16 << 20, NULL, 0, NULL);
    bool ok = s && st_cache_make(&cpu, rt, "cpu", &m, KVRT_LAYOUT_LBHNC, 16, 0, blocks + 2, 0, 2) &&
              st_cache_make(&ocl, rt, "opencl", &m, KVRT_LAYOUT_LBNHC, 8, 0, 2 * blocks + 4, 0, 2) &&
              st_cache_make(&back, rt, "cpu", &m, KVRT_LAYOUT_BLHNC, 32, 0, blocks + 2, 0, 2);
    if (!ok) {
        tap_skip("the OpenCL backend did not bind or allocate here");
        tap_skip("the OpenCL backend did not bind or allocate here");
        kvrt_store_close(s);
        return;
    }
    st_table(&cpu, tc, blocks, 1);
    st_table(&ocl, to, 2 * blocks, 2);
    st_table(&back, tb, (n + 31) / 32, 3);
    ok = st_fill(&cpu, tc, 0, n, 4) && st_fill(&ocl, to, 0, n, 9);
    uint64_t got = 0;
    struct kvrt_store_span sp = st_span(&cpu, tc, blocks, tok, n, 0, KVRT_UNSET);
    ok = ok && kvrt_store_put(s, &sp, &got) == KVRT_OK && got == 3 * T;
    sp = st_span(&ocl, to, 2 * blocks, tok, n, 0, KVRT_UNSET);
    ok = ok && kvrt_store_get(s, &sp, &got) == KVRT_OK && got == 3 * T;
    char where[128] = "";
    uint64_t bad = ok ? st_check(&ocl, to, 0, 3 * T, 4, where, sizeof(where)) : 1;
    uint64_t kept = ok ? st_check(&ocl, to, 3 * T, n - 3 * T, 9, where, sizeof(where)) : 1;
    tap_ok(ok && bad == 0 && kept == 0,
           "cpu LBHNC bs 16 -> OpenCL LBNHC bs 8: loaded through host copies, exact, the slots past it kept");
    /* and back out of the OpenCL cache into another cpu cache */
    kvrt_store *s2 = st_open(&m, "ocl", T, 16 << 20, NULL, 0, NULL);
    sp = st_span(&ocl, to, 2 * blocks, tok, n, 0, KVRT_UNSET);
    ok = ok && s2 && kvrt_store_put(s2, &sp, &got) == KVRT_OK && got == 3 * T;
    sp = st_span(&back, tb, (n + 31) / 32, tok, n, 0, KVRT_UNSET);
    ok = ok && kvrt_store_get(s2, &sp, &got) == KVRT_OK && got == 3 * T &&
         st_check(&back, tb, 0, 3 * T, 4, where, sizeof(where)) == 0;
    tap_ok(ok, "OpenCL -> cpu BLHNC bs 32: put from the OpenCL cache, exact");
    kvrt_store_close(s);
    kvrt_store_close(s2);
    st_cache_free(&cpu);
    st_cache_free(&ocl);
    st_cache_free(&back);
}

static void async(void)
{
    struct st_model m;
    st_model_init(&m, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 2, 2, 16, 16);
    const uint64_t n = 4 * T, blocks = n / 16;
    kvrt_store *s = st_open(&m, "async", T, 64 << 20, NULL, 0, NULL);
    struct st_cache a, b;
    int64_t ta[8], tb[8];
    int32_t tok[4 * T];
    st_tokens(tok, n, 8);
    bool ok = s && st_cache_make(&a, rt, "cpu", &m, KVRT_LAYOUT_LBHNC, 16, 0, blocks, 0, 2) &&
              st_cache_make(&b, rt, "cpu", &m, KVRT_LAYOUT_BLHNC, 16, 0, blocks, 0, 2);
    st_table(&a, ta, blocks, 1);
    st_table(&b, tb, blocks, 2);
    ok = ok && st_fill(&a, ta, 0, n, 4);
    struct kvrt_store_span sa = st_span(&a, ta, blocks, tok, n, 0, KVRT_UNSET);
    struct kvrt_store_span sb = st_span(&b, tb, blocks, tok, n, 0, KVRT_UNSET);
    kvrt_store_request *p = NULL, *g = NULL;
    ok = ok && kvrt_store_put_post(s, &sa, &p) == KVRT_OK;
    /* posted in order: the get runs after the put */
    ok = ok && kvrt_store_get_post(s, &sb, &g) == KVRT_OK;
    uint64_t put_tokens = 0, got = 0;
    int rp = ok ? kvrt_store_wait(p, -1, &put_tokens) : -1;
    int rg = ok ? kvrt_store_wait(g, 10, &got) : -1;
    tap_ok(rp == KVRT_OK && put_tokens == n, "a posted put completes with %llu tokens", (unsigned long long)put_tokens);
    tap_ok(rg == KVRT_OK && got == n && st_check(&b, tb, 0, n, 4, NULL, 0) == 0,
           "a get posted after it loads them: %llu tokens", (unsigned long long)got);
    tap_ok(ok && kvrt_store_test(g, NULL) == KVRT_OK, "test() of a finished request: KVRT_OK");
    kvrt_store_release(p);
    kvrt_store_release(g);
    /* a request released before it finished is waited for */
    ok = ok && kvrt_store_get_post(s, &sb, &g) == KVRT_OK;
    kvrt_store_release(g);
    tap_ok(ok, "a request released at once is waited for and freed");
    kvrt_store_close(s);
    st_cache_free(&a);
    st_cache_free(&b);
}

/* Threads on one store: each puts its own sequences and loads them back
 * while the others do, with a memory tier too small for all (evictions,
 * reads from the disk tier, promotions) and the writer thread busy. */
struct worker_arg {
    kvrt_store *s;
    const struct st_model *m;
    int id;
    int bad;
};

static void *worker(void *p)
{
    struct worker_arg *w = p;
    const uint64_t n = 4 * T, blocks = n / 16;
    struct st_cache c;
    int64_t table[8];
    int32_t tok[4 * T];
    if (!st_cache_make(&c, rt, "cpu", w->m, w->id % 2 ? KVRT_LAYOUT_LBNHC : KVRT_LAYOUT_BLHNC, 16, 0, blocks, 0,
                       w->m->heads)) {
        w->bad++;
        return NULL;
    }
    st_table(&c, table, blocks, (uint64_t)w->id);
    for (int k = 0; k < 12; k++) {
        uint64_t seed = (uint64_t)w->id * 100 + (uint64_t)k;
        st_tokens(tok, n, seed);
        struct kvrt_store_span sp = st_span(&c, table, blocks, tok, n, 0, KVRT_UNSET);
        uint64_t got = 0;
        if (!st_fill(&c, table, 0, n, seed) || kvrt_store_put(w->s, &sp, &got) != KVRT_OK || got != n)
            w->bad++;
        st_fill(&c, table, 0, n, 999);
        if (k % 4 == 3 && kvrt_store_flush(w->s) != KVRT_OK)
            w->bad++;
        /* an earlier sequence of this thread: from memory, from the queue
         * (put, evicted, not written yet) or from disk */
        uint64_t back = (uint64_t)w->id * 100 + (uint64_t)(k >= 6 ? k - 6 : k / 2);
        st_tokens(tok, n, back);
        int grc = kvrt_store_get(w->s, &sp, &got);
        uint64_t wrong = grc == KVRT_OK ? st_check(&c, table, 0, got, back, NULL, 0) : 0;
        if (grc != KVRT_OK || got != n || wrong != 0) {
            tap_diag("thread %d, sequence %llu: get %d, %llu of %llu tokens loaded, %llu cells wrong", w->id,
                     (unsigned long long)back, grc, (unsigned long long)got, (unsigned long long)n,
                     (unsigned long long)wrong);
            w->bad++;
        }
    }
    st_cache_free(&c);
    return NULL;
}

static void threads(void)
{
    struct st_model m;
    st_model_init(&m, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 2, 2, 16, 16);
    char *dir = st_tempdir("threads");
    /* room for 24 of the 4 x 12 x 8 entries in memory */
    kvrt_store *s = dir ? st_open(&m, "threads", T, 24 * 4096, dir, 0, NULL) : NULL;
    struct worker_arg w[4];
    pthread_t th[4];
    int started = 0;
    for (int i = 0; s && i < 4; i++) {
        w[i] = (struct worker_arg){s, &m, i, 0};
        if (pthread_create(&th[i], NULL, worker, &w[i]) == 0)
            started++;
    }
    int bad = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        bad += w[i].bad;
    }
    struct kvrt_store_stats st = {0};
    if (s)
        kvrt_store_stats(s, &st);
    tap_ok(s && started == 4 && bad == 0 && st.evicted_memory > 0 && st.hits_disk > 0,
           "4 threads put and load on one store at once: all exact (%d failures; %llu evicted from memory, %llu "
           "disk hits)",
           bad, (unsigned long long)st.evicted_memory, (unsigned long long)st.hits_disk);
    kvrt_store_close(s);
    if (dir)
        st_rmdir(dir);
    free(dir);
}

static void lru(void)
{
    struct st_model m;
    st_model_init(&m, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 2, 1, 16, 16);
    const uint64_t entry = T * 2 * 2 * 16 * 2, n = 5 * T, blocks = n / 16;
    kvrt_store *s = st_open(&m, "lru", T, 3 * entry, NULL, 0, NULL);
    struct st_cache a;
    int64_t ta[16];
    int32_t tok[5 * T];
    st_tokens(tok, n, 8);
    bool ok = s && st_cache_make(&a, rt, "cpu", &m, KVRT_LAYOUT_LBHNC, 16, 0, blocks, 0, 1);
    st_table(&a, ta, blocks, 1);
    ok = ok && st_fill(&a, ta, 0, n, 4);
    uint64_t stored = 0, hit = 9;
    for (uint64_t c = 0; ok && c < 5; c++) {
        struct kvrt_store_span sp = st_span(&a, ta, blocks, tok, n, c * T, T);
        ok = kvrt_store_put(s, &sp, &stored) == KVRT_OK;
    }
    struct kvrt_store_stats st = {0};
    ok = ok && kvrt_store_stats(s, &st) == KVRT_OK && kvrt_store_lookup(s, tok, n, 0, 0, &hit) == KVRT_OK;
    tap_ok(ok && st.entry_bytes == entry && st.memory_entries == 3 && st.evicted_memory == 2 && hit == 0,
           "memory of 3 entries: 5 puts evict the 2 oldest (entries %llu, evicted %llu, lookup %llu)",
           (unsigned long long)st.memory_entries, (unsigned long long)st.evicted_memory, (unsigned long long)hit);
    kvrt_store_close(s);
    st_cache_free(&a);
}

int main(void)
{
    tap_plan_dynamic();
    struct kvrt_runtime_options o;
    kvrt_runtime_options_default(&o);
    if (kvrt_runtime_open(&o, &rt) != KVRT_OK)
        tap_skip_all("no runtime: %s", kvrt_error_message());
    keys();
    layouts();
    shapes();
    parallel();
    opencl();
    async();
    threads();
    lru();
    kvrt_runtime_close(rt);
    return tap_done();
}
