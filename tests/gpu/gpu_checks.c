#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_checks.h"
#include "gpu_plugin.h"
#include "gpu_ref.h"
#include "tap.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

uint64_t gpu_rand(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

void gpu_fill_random(uint8_t *p, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        p[i] = (uint8_t)(gpu_rand() >> 32);
}

static void log_to_tap(void *user, int level, const char *message)
{
    (void)user;
    if (level <= 1)
        tap_diag("plugin log (%d): %s", level, message);
}

static const struct kvrt_plugin_host test_host = {
    .size = sizeof(struct kvrt_plugin_host), .user = NULL, .log = log_to_tap};

int gpu_bind(const struct kvrt_plugin_descriptor *p, int layout, kvrt_plugin_device **dev)
{
    struct kvrt_plugin_bind_info info = {sizeof(info), layout, &test_host};
    kvrt_plugin_error err = {""};
    int rc = p->bind(&info, dev, &err);
    if (!tap_ok(rc == KVRT_OK, "bind %s", gpu_layout_name(layout)))
        tap_diag("  %d: %s", rc, err.message);
    return rc;
}

/* Report a failed plugin call once; true when it succeeded. */
static bool call_ok(int rc, const kvrt_plugin_error *err, const char *what, const char *tag)
{
    if (rc == KVRT_OK)
        return true;
    tap_diag("%s %s failed: %d: %s", tag, what, rc, err->message);
    return false;
}

static kvrt_plugin_buffer *upload_new(const struct gpu_rig *rig, const void *data, uint64_t bytes)
{
    kvrt_plugin_buffer *b = NULL;
    kvrt_plugin_error err = {""};
    if (!call_ok(rig->p->buffer_alloc(rig->dev, bytes, &b, &err), &err, "buffer_alloc", rig->tag))
        return NULL;
    if (data && !call_ok(rig->p->buffer_upload(rig->dev, b, 0, data, bytes, &err), &err, "buffer_upload", rig->tag)) {
        rig->p->buffer_free(rig->dev, b);
        return NULL;
    }
    return b;
}

static bool download(const struct gpu_rig *rig, kvrt_plugin_buffer *b, void *out, uint64_t bytes)
{
    kvrt_plugin_error err = {""};
    return call_ok(rig->p->buffer_download(rig->dev, b, 0, out, bytes, &err), &err, "buffer_download", rig->tag);
}

/* Compare and point at the first difference. */
static bool same_bytes(const uint8_t *got, const uint8_t *want, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            tap_diag("  first difference at byte %llu of %llu: got 0x%02x, want 0x%02x", (unsigned long long)i,
                     (unsigned long long)n, got[i], want[i]);
            return false;
        }
    return true;
}

/* Distinct random slots over the whole cache, about one in five skipped. */
static void random_slots(const struct gpu_cache *c, uint64_t n, int64_t *slots)
{
    const uint64_t total = c->g.blocks * c->g.block_size;
    uint8_t *used = calloc(total, 1);
    for (uint64_t t = 0; t < n; t++) {
        if (gpu_rand() % 5 == 0 || t >= total) {
            slots[t] = -1 - (int64_t)(gpu_rand() % 3);
            continue;
        }
        uint64_t s;
        do
            s = gpu_rand() % total;
        while (used[s]);
        used[s] = 1;
        slots[t] = (int64_t)s;
    }
    free(used);
}

void gpu_check_write_read(const struct gpu_rig *rig, const struct gpu_cache *c)
{
    const uint64_t tokens = 2 * c->g.block_size + 5;
    const uint64_t kb = tokens * c->g.heads * c->g.d * c->g.elem;
    const uint64_t vb = tokens * c->g.heads * c->g.dv * c->g.elem;
    /* K and V share one buffer at offsets that keep the element alignment
     * but not always 16 bytes. */
    const uint64_t k_off = 4 * c->g.elem, v_off = k_off + kb + 8 * c->g.elem;
    const uint64_t kv_bytes = v_off + vb;
    uint8_t *image = malloc(c->bytes), *got = malloc(c->bytes);
    uint8_t *kv = malloc(kv_bytes), *back = malloc(kv_bytes), *want = malloc(kv_bytes);
    int64_t *slots = malloc(tokens * sizeof(int64_t) * GPU_MAX_LAYERS);
    gpu_fill_random(image, c->bytes);
    kvrt_plugin_buffer *cb = upload_new(rig, image, c->bytes);
    kvrt_plugin_buffer *kvb = upload_new(rig, NULL, kv_bytes);
    bool ok = cb && kvb;
    kvrt_plugin_error err = {""};

    for (uint64_t l = 0; ok && l < c->g.layers; l++) {
        int64_t *s = slots + l * tokens;
        random_slots(c, tokens, s);
        gpu_fill_random(kv, kv_bytes);
        ok = call_ok(rig->p->buffer_upload(rig->dev, kvb, 0, kv, kv_bytes, &err), &err, "buffer_upload", rig->tag) &&
             call_ok(rig->p->write(rig->dev, &c->cache, cb, (uint32_t)l, tokens, s, kvb, k_off, c->g.dv ? kvb : NULL,
                                   v_off, &err),
                     &err, "write", rig->tag);
        gpu_emulate_write(c, image, l, tokens, s, kv + k_off, kv + v_off);
    }
    ok = ok && download(rig, cb, got, c->bytes);
    tap_ok(ok && same_bytes(got, image, c->bytes),
           "%s: write puts K then V of every token in its slot's cell, nothing else", rig->tag);

    /* Read back the last layer's tokens; rows of skipped slots stay as they were. */
    const uint64_t l = c->g.layers - 1;
    memset(want, 0xab, kv_bytes);
    gpu_emulate_read(c, image, l, tokens, slots + l * tokens, want + k_off, want + v_off);
    memset(back, 0xab, kv_bytes);
    ok = ok &&
         call_ok(rig->p->buffer_upload(rig->dev, kvb, 0, back, kv_bytes, &err), &err, "buffer_upload", rig->tag) &&
         call_ok(rig->p->read(rig->dev, &c->cache, cb, (uint32_t)l, tokens, slots + l * tokens, kvb, k_off,
                              c->g.dv ? kvb : NULL, v_off, &err),
                 &err, "read", rig->tag) &&
         download(rig, kvb, back, kv_bytes);
    tap_ok(ok && same_bytes(back, want, kv_bytes), "%s: read returns K/V of each slot and leaves skipped rows alone",
           rig->tag);

    if (cb)
        rig->p->buffer_free(rig->dev, cb);
    if (kvb)
        rig->p->buffer_free(rig->dev, kvb);
    free(image);
    free(got);
    free(kv);
    free(back);
    free(want);
    free(slots);
}

void gpu_check_copy(const struct gpu_rig *rig, const struct gpu_cache *c)
{
    const uint64_t b = c->g.blocks;
    /* In order: a chain (x->y then y->z reads the new y), a self copy, an
     * overwrite of an earlier destination, and a copy back into a source. */
    const int64_t pairs[] = {1, 4, 4, (int64_t)(b - 1), 2, 2, 0, 4, 3, 1, (int64_t)(b - 1), 0, 5 % (int64_t)b, 3};
    const uint64_t n = sizeof(pairs) / sizeof(pairs[0]) / 2;
    uint8_t *image = malloc(c->bytes), *got = malloc(c->bytes);
    gpu_fill_random(image, c->bytes);
    kvrt_plugin_buffer *cb = upload_new(rig, image, c->bytes);
    kvrt_plugin_error err = {""};
    bool ok =
        cb && call_ok(rig->p->copy_blocks(rig->dev, &c->cache, cb, n, pairs, &err), &err, "copy_blocks", rig->tag);
    gpu_emulate_copy(c, image, n, pairs);
    ok = ok && download(rig, cb, got, c->bytes);
    tap_ok(ok && same_bytes(got, image, c->bytes), "%s: copy_blocks applies dependent pairs in order, every layer",
           rig->tag);
    if (cb)
        rig->p->buffer_free(rig->dev, cb);
    free(image);
    free(got);
}

static void shuffle(int64_t *ids, uint64_t n)
{
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = gpu_rand() % i;
        int64_t t = ids[i - 1];
        ids[i - 1] = ids[j];
        ids[j] = t;
    }
}

void gpu_check_stage(const struct gpu_rig *rig_a, const struct gpu_cache *a, const struct gpu_rig *rig_b,
                     const struct gpu_cache *b)
{
    const uint64_t n = a->g.blocks - 1;
    const uint64_t off_a = 16 + (a->g.elem == 1 ? 3 : 0), off_b = 48;
    const uint64_t stage_bytes = n * a->stage;
    int64_t *gids = malloc(a->g.blocks * sizeof(int64_t));
    int64_t *sids = malloc(a->g.blocks * sizeof(int64_t));
    for (uint64_t i = 0; i < a->g.blocks; i++)
        gids[i] = sids[i] = (int64_t)i;
    shuffle(gids, a->g.blocks);
    shuffle(sids, a->g.blocks);
    sids[n - 1] = sids[0]; /* scattered twice: the later page must win */

    uint8_t *img_a = malloc(a->bytes), *img_b = malloc(b->bytes), *got = malloc(b->bytes);
    uint8_t *stage = malloc(stage_bytes + off_b), *want = malloc(stage_bytes);
    gpu_fill_random(img_a, a->bytes);
    gpu_fill_random(img_b, b->bytes);
    kvrt_plugin_buffer *ca = upload_new(rig_a, img_a, a->bytes);
    kvrt_plugin_buffer *sa = upload_new(rig_a, NULL, stage_bytes + off_a);
    kvrt_plugin_error err = {""};
    bool ok =
        ca && sa &&
        call_ok(rig_a->p->gather(rig_a->dev, &a->cache, ca, n, gids, sa, off_a, &err), &err, "gather", rig_a->tag);
    gpu_emulate_gather(a, img_a, n, gids, want);
    ok = ok && call_ok(rig_a->p->buffer_download(rig_a->dev, sa, off_a, stage, stage_bytes, &err), &err,
                       "buffer_download", rig_a->tag);
    tap_ok(ok && same_bytes(stage, want, stage_bytes), "%s: gather packs [block][layer][H, N, C] pages, unpadded",
           rig_a->tag);

    /* Through the host, as a transfer would, into the other layout. */
    memmove(stage + off_b, stage, stage_bytes);
    memset(stage, 0x5a, off_b);
    kvrt_plugin_buffer *cb = upload_new(rig_b, img_b, b->bytes);
    kvrt_plugin_buffer *sb = upload_new(rig_b, stage, stage_bytes + off_b);
    ok = ok && cb && sb &&
         call_ok(rig_b->p->scatter(rig_b->dev, &b->cache, cb, n, sids, sb, off_b, &err), &err, "scatter", rig_b->tag) &&
         download(rig_b, cb, got, b->bytes);
    gpu_emulate_scatter(b, img_b, n, sids, stage + off_b);
    tap_ok(ok && same_bytes(got, img_b, b->bytes), "%s -> %s: scatter unpacks the pages into the other layout",
           rig_a->tag, rig_b->tag);

    if (ca)
        rig_a->p->buffer_free(rig_a->dev, ca);
    if (sa)
        rig_a->p->buffer_free(rig_a->dev, sa);
    if (cb)
        rig_b->p->buffer_free(rig_b->dev, cb);
    if (sb)
        rig_b->p->buffer_free(rig_b->dev, sb);
    free(gids);
    free(sids);
    free(img_a);
    free(img_b);
    free(got);
    free(stage);
    free(want);
}

/* K/V rows of every (sequence, token), kept on the host for the reference. */
struct decode_kv {
    const struct gpu_cache *c;
    const int64_t *token_slot; /* [seq * max_len + t] */
    uint64_t max_len;
    const uint8_t *k, *v;  /* [token index][H][D or Dv] as written */
    const uint64_t *first; /* first token index of each sequence */
};

static const uint8_t *decode_kv_row(void *ctx, uint64_t s, uint64_t t, uint64_t h, int is_v)
{
    const struct decode_kv *kv = ctx;
    const uint64_t row = (kv->first[s] + t) * kv->c->g.heads + h;
    return is_v ? kv->v + row * kv->c->g.dv * kv->c->g.elem : kv->k + row * kv->c->g.d * kv->c->g.elem;
}

static void fill_values(int dtype, uint8_t *p, uint64_t count, uint64_t es)
{
    for (uint64_t i = 0; i < count; i++) {
        if (es == 1) { /* fp8: any finite encoding of magnitude <= 1 */
            do
                p[i] = (uint8_t)(gpu_rand() >> 40);
            while (!(fabs(gpu_elem_get(dtype, p + i)) <= 1.0));
        } else {
            gpu_elem_put(dtype, p + i * es, (double)(gpu_rand() % 20001) / 10000.0 - 1.0);
        }
    }
}

void gpu_check_decode(const struct gpu_rig *rig, const struct gpu_cache *c, uint64_t q_heads, const int32_t *seq_lens,
                      uint64_t seqs)
{
    const uint64_t es = c->g.elem, bs = c->g.block_size, H = c->g.heads;
    const uint64_t d = c->g.d, dv = c->g.dv;
    uint64_t max_blocks = 0, total = 0, used_blocks = 0;
    uint64_t *first = malloc(seqs * sizeof(uint64_t));
    for (uint64_t s = 0; s < seqs; s++) {
        const uint64_t nb = ((uint64_t)seq_lens[s] + bs - 1) / bs;
        max_blocks = nb > max_blocks ? nb : max_blocks;
        first[s] = total;
        total += (uint64_t)seq_lens[s];
        used_blocks += nb;
    }
    if (seqs == 0 || used_blocks > c->g.blocks) {
        tap_ok(false, "%s: decode geometry has %llu blocks, needs %llu", rig->tag, (unsigned long long)c->g.blocks,
               (unsigned long long)used_blocks);
        free(first);
        return;
    }
    /* Blocks handed out in a shuffled order, as a block manager would. */
    int64_t *pool = malloc(c->g.blocks * sizeof(int64_t));
    for (uint64_t i = 0; i < c->g.blocks; i++)
        pool[i] = (int64_t)i;
    shuffle(pool, c->g.blocks);
    int32_t *tables = calloc(seqs * max_blocks + 1, sizeof(int32_t));
    int64_t *slots = malloc(total * sizeof(int64_t) + 1);
    uint64_t next = 0;
    for (uint64_t s = 0; s < seqs; s++) {
        for (uint64_t i = 0; i * bs < (uint64_t)seq_lens[s] && next < c->g.blocks; i++)
            tables[s * max_blocks + i] = (int32_t)pool[next++];
        for (uint64_t t = 0; t < (uint64_t)seq_lens[s]; t++)
            slots[first[s] + t] = (int64_t)tables[s * max_blocks + t / bs] * (int64_t)bs + (int64_t)(t % bs);
    }

    const uint64_t kb = total * H * d * es, vb = total * H * dv * es;
    const uint64_t qb = seqs * q_heads * d * es, ob = seqs * q_heads * dv * es;
    const uint64_t q_off = 64, out_off = 32;
    uint8_t *kv = malloc(kb + vb), *q = malloc(q_off + qb), *out = malloc(out_off + ob);
    fill_values(c->g.dtype, kv, (kb + vb) / es, es);
    fill_values(c->g.dtype, q + q_off, qb / es, es);
    const uint32_t layer = (uint32_t)(c->g.layers - 1);

    kvrt_plugin_error err = {""};
    kvrt_plugin_buffer *cb = upload_new(rig, NULL, c->bytes);
    kvrt_plugin_buffer *kvbuf = upload_new(rig, kv, kb + vb);
    kvrt_plugin_buffer *qbuf = upload_new(rig, q, q_off + qb);
    kvrt_plugin_buffer *obuf = upload_new(rig, NULL, out_off + ob);
    bool ok = cb && kvbuf && qbuf && obuf &&
              call_ok(rig->p->buffer_zero(rig->dev, cb, 0, c->bytes, &err), &err, "buffer_zero", rig->tag) &&
              call_ok(rig->p->write(rig->dev, &c->cache, cb, layer, total, slots, kvbuf, 0, kvbuf, kb, &err), &err,
                      "write", rig->tag);
    const struct kvrt_plugin_decode_args args = {
        .size = sizeof(args),
        .num_seqs = (uint32_t)seqs,
        .num_q_heads = (uint32_t)q_heads,
        .max_blocks_per_seq = (uint32_t)max_blocks,
        .q = qbuf,
        .q_offset = q_off,
        .out = obuf,
        .out_offset = out_off,
        .block_tables = tables,
        .seq_lens = seq_lens,
        .scale = (float)(1.0 / sqrt((double)d)),
    };
    ok = ok && call_ok(rig->p->decode(rig->dev, &c->cache, cb, layer, &args, &err), &err, "decode", rig->tag) &&
         download(rig, obuf, out, out_off + ob);

    double *ref = malloc(seqs * q_heads * dv * sizeof(double));
    struct decode_kv ctx = {c, slots, 0, kv, kv + kb, first};
    gpu_ref_decode(c->g.dtype, seqs, q_heads, H, d, dv, q + q_off, seq_lens, args.scale, decode_kv_row, &ctx, ref);
    double worst = 0;
    uint64_t worst_at = 0;
    bool close = ok;
    for (uint64_t i = 0; ok && i < seqs * q_heads * dv; i++) {
        const double got = gpu_elem_get(c->g.dtype, out + out_off + i * es);
        const double tol = 2e-5 + gpu_elem_tiny(c->g.dtype) + 2.0 * gpu_elem_eps(c->g.dtype) * fabs(ref[i]);
        const double e = fabs(got - ref[i]);
        if (!(e <= tol))
            close = false;
        if (!(e <= worst)) {
            worst = e;
            worst_at = i;
        }
    }
    if (!tap_ok(close, "%s: decode (%llu seqs, Hq %llu, H %llu) matches the fp64 reference", rig->tag,
                (unsigned long long)seqs, (unsigned long long)q_heads, (unsigned long long)H))
        tap_diag("  worst error %g at output %llu (reference %g)", worst, (unsigned long long)worst_at,
                 ok ? ref[worst_at] : 0.0);

    if (cb)
        rig->p->buffer_free(rig->dev, cb);
    if (kvbuf)
        rig->p->buffer_free(rig->dev, kvbuf);
    if (qbuf)
        rig->p->buffer_free(rig->dev, qbuf);
    if (obuf)
        rig->p->buffer_free(rig->dev, obuf);
    free(first);
    free(pool);
    free(tables);
    free(slots);
    free(kv);
    free(q);
    free(out);
    free(ref);
}

void gpu_check_decode_refused(const struct gpu_rig *rig, const struct gpu_cache *c)
{
    kvrt_plugin_error err = {""};
    kvrt_plugin_buffer *cb = upload_new(rig, NULL, c->bytes);
    kvrt_plugin_buffer *qb = upload_new(rig, NULL, 4096);
    const int32_t table[1] = {0}, lens[1] = {1};
    const struct kvrt_plugin_decode_args args = {.size = sizeof(args),
                                                 .num_seqs = 1,
                                                 .num_q_heads = (uint32_t)c->g.heads,
                                                 .max_blocks_per_seq = 1,
                                                 .q = qb,
                                                 .out = qb,
                                                 .out_offset = 2048,
                                                 .block_tables = table,
                                                 .seq_lens = lens,
                                                 .scale = 1.0f};
    int rc = cb && qb ? rig->p->decode(rig->dev, &c->cache, cb, 0, &args, &err) : KVRT_OK;
    if (!tap_ok(rc == KVRT_ERR_UNSUPPORTED && err.message[0],
                "%s: decode refuses a byte type with KVRT_ERR_UNSUPPORTED and a reason", rig->tag))
        tap_diag("  got %d: %s", rc, err.message);
    if (cb)
        rig->p->buffer_free(rig->dev, cb);
    if (qb)
        rig->p->buffer_free(rig->dev, qb);
}

struct thread_job {
    const struct gpu_rig *rig;
    const struct gpu_cache *c;
    uint64_t seed;
    int failures;
};

static void *thread_main(void *arg)
{
    struct thread_job *job = arg;
    const struct gpu_rig *rig = job->rig;
    const struct gpu_cache *c = job->c;
    const uint64_t tokens = c->g.blocks * c->g.block_size;
    const uint64_t row = c->g.heads * (c->g.d + c->g.dv) * c->g.elem;
    const uint64_t kb = tokens * c->g.heads * c->g.d * c->g.elem;
    uint8_t *kv = malloc(tokens * row), *back = malloc(tokens * row);
    int64_t *slots = malloc(tokens * sizeof(int64_t));
    for (uint64_t t = 0; t < tokens; t++)
        slots[t] = (int64_t)(tokens - 1 - t);
    kvrt_plugin_error err = {""};
    kvrt_plugin_buffer *cb = NULL, *kvb = NULL, *out = NULL;
    if (rig->p->buffer_alloc(rig->dev, c->bytes, &cb, &err) ||
        rig->p->buffer_alloc(rig->dev, tokens * row, &kvb, &err) ||
        rig->p->buffer_alloc(rig->dev, tokens * row, &out, &err))
        job->failures++;
    uint64_t x = job->seed;
    for (int iter = 0; iter < 20 && !job->failures; iter++) {
        for (uint64_t i = 0; i < tokens * row; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            kv[i] = (uint8_t)(x >> 56);
        }
        if (rig->p->buffer_upload(rig->dev, kvb, 0, kv, tokens * row, &err) ||
            rig->p->write(rig->dev, &c->cache, cb, 0, tokens, slots, kvb, 0, kvb, kb, &err) ||
            rig->p->read(rig->dev, &c->cache, cb, 0, tokens, slots, out, 0, out, kb, &err) ||
            rig->p->buffer_download(rig->dev, out, 0, back, tokens * row, &err) || memcmp(kv, back, tokens * row) != 0)
            job->failures++;
    }
    if (cb)
        rig->p->buffer_free(rig->dev, cb);
    if (kvb)
        rig->p->buffer_free(rig->dev, kvb);
    if (out)
        rig->p->buffer_free(rig->dev, out);
    free(kv);
    free(back);
    free(slots);
    return NULL;
}

void gpu_check_threads(const struct gpu_rig *rig, const struct gpu_cache *c)
{
    struct thread_job jobs[3];
    pthread_t threads[3];
    for (int i = 0; i < 3; i++) {
        jobs[i] = (struct thread_job){rig, c, 1234567u + 7919u * (uint64_t)i, 0};
        pthread_create(&threads[i], NULL, thread_main, &jobs[i]);
    }
    int failures = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(threads[i], NULL);
        failures += jobs[i].failures;
    }
    tap_ok(failures == 0, "%s: three threads' concurrent write/read round trips on one device", rig->tag);
}
