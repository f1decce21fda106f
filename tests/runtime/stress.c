/*
 * Concurrency: several threads open runtimes, bind, create caches, use and
 * destroy them at once, both with a runtime each and sharing one runtime.
 * Run it under ThreadSanitizer with `scripts/test.sh --tsan`.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/kvrt.h>

#include "fixtures.h"
#include "tap.h"

#define THREADS 4
#define ROUNDS 6
#define H 2
#define D 8
#define BLOCK 4
#define BLOCKS 8

struct worker {
    int id;
    kvrt_runtime *shared; /* NULL: open a runtime of its own per round */
    int failures;
    char first_error[512];
};

static void fail(struct worker *w, const char *what)
{
    if (!w->failures++)
        snprintf(w->first_error, sizeof(w->first_error), "thread %d: %s: %s", w->id, what, kvrt_error_message());
}

static uint32_t next(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void one_round(struct worker *w, kvrt_runtime *rt, int round)
{
    enum kvrt_layout layout = (enum kvrt_layout)((w->id + round) % KVRT_NUM_LAYOUTS);
    kvrt_backend *b = NULL;
    if (kvrt_runtime_bind(rt, "cpu", kvrt_layout_name(layout), &b) != KVRT_OK) {
        fail(w, "bind");
        return;
    }
    struct kvrt_spec spec = fixture_attention(KVRT_DTYPE_FP32, BLOCK, H, D);
    kvrt_placement *p = NULL;
    kvrt_cache *c = NULL;
    kvrt_buffer *k = NULL, *v = NULL, *k2 = NULL, *v2 = NULL;
    enum { T = BLOCK * BLOCKS / 2 };
    float kin[T * H * D], vin[T * H * D], kout[T * H * D], vout[T * H * D];
    int64_t slots[T];
    uint32_t seed = 0x9e3779b9u * (uint32_t)(w->id * 131 + round + 1);
    for (int t = 0; t < T; t++)
        slots[t] = (int64_t)t * 2 + (int64_t)(next(&seed) & 1);
    for (int i = 0; i < T * H * D; i++) {
        kin[i] = (float)(next(&seed) % 1000);
        vin[i] = -(float)(next(&seed) % 1000);
    }
    uint64_t bytes = sizeof(kin);
    if (fixture_placement(layout, &spec, 2, BLOCKS, &p) != KVRT_OK || kvrt_cache_create(b, p, &c) != KVRT_OK ||
        kvrt_buffer_create(b, bytes, &k) != KVRT_OK || kvrt_buffer_create(b, bytes, &v) != KVRT_OK ||
        kvrt_buffer_create(b, bytes, &k2) != KVRT_OK || kvrt_buffer_create(b, bytes, &v2) != KVRT_OK ||
        kvrt_buffer_upload(k, 0, kin, bytes) != KVRT_OK || kvrt_buffer_upload(v, 0, vin, bytes) != KVRT_OK ||
        kvrt_cache_write(c, 1, T, slots, k, 0, v, 0) != KVRT_OK ||
        kvrt_cache_read(c, 1, T, slots, k2, 0, v2, 0) != KVRT_OK ||
        kvrt_buffer_download(k2, 0, kout, bytes) != KVRT_OK || kvrt_buffer_download(v2, 0, vout, bytes) != KVRT_OK) {
        fail(w, "cache round trip");
    } else if (memcmp(kin, kout, bytes) != 0 || memcmp(vin, vout, bytes) != 0) {
        fail(w, "read back differs from what was written");
    }
    int64_t pairs[2] = {0, BLOCKS - 1};
    if (c && kvrt_cache_copy_blocks(c, 1, pairs) != KVRT_OK)
        fail(w, "copy_blocks");
    kvrt_buffer_destroy(k);
    kvrt_buffer_destroy(v);
    kvrt_buffer_destroy(k2);
    kvrt_buffer_destroy(v2);
    kvrt_cache_destroy(c);
    kvrt_placement_destroy(p);
}

static void *run(void *arg)
{
    struct worker *w = arg;
    for (int round = 0; round < ROUNDS; round++) {
        kvrt_runtime *rt = w->shared;
        if (!rt && kvrt_runtime_open(NULL, &rt) != KVRT_OK) {
            fail(w, "runtime open");
            continue;
        }
        one_round(w, rt, round);
        if (!w->shared)
            kvrt_runtime_close(rt);
    }
    return NULL;
}

static void run_all(kvrt_runtime *shared, const char *what)
{
    pthread_t th[THREADS];
    struct worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].id = i;
        w[i].shared = shared;
        pthread_create(&th[i], NULL, run, &w[i]);
    }
    int failures = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        failures += w[i].failures;
        if (w[i].failures)
            tap_diag("%s", w[i].first_error);
    }
    tap_ok(failures == 0, "%d threads x %d rounds, %s: every round trip intact", THREADS, ROUNDS, what);
}

int main(void)
{
    tap_plan(2);
    run_all(NULL, "a runtime per thread and round");
    kvrt_runtime *rt = NULL;
    if (kvrt_runtime_open(NULL, &rt) != KVRT_OK) {
        tap_ok(false, "shared runtime opens: %s", kvrt_error_message());
        return tap_done();
    }
    run_all(rt, "one shared runtime");
    kvrt_runtime_close(rt);
    return tap_done();
}
