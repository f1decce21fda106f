/*
 * bench-store: libkvrt-store's own figures, as JSON lines, for bench/store.py
 * to set beside the rooflines it measures in the same run (fio, redis-
 * benchmark) and beside memcpy, which this program times itself, one
 * thread as the store copies.
 *
 *   bench-store memory [--rounds N]        put and get through the memory
 *                                          tier, caches of several layouts
 *   bench-store disk DIR [--mib N]         put + flush to disk; get with the
 *                                          page cache cold and warm
 *   bench-store lookup DIR                 lookup of a 128k-token prefix,
 *                                          from memory and from disk
 *   bench-store shared URL [--entries N]   SET and GET through the shared tier
 *   bench-store dd DIR [--mib N]           the disk's own sequential write and
 *                                          read with O_DIRECT from huge pages
 *                                          (the store's I/O without the store)
 *   bench-store breakdown DIR [--rounds N] where a chunk's time goes: each
 *                                          piece of the store's per-byte work
 *                                          alone (copy, checksum, seal, I/O)
 *
 * The model: 8 layers, 8 KV heads of 128, bf16 (512-byte cells), 256-token
 * chunks: one entry (a chunk of one head) is 1 MiB, a 4096-token sequence
 * 128 MiB.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <xxhash.h>

#include <kvrt/kvrt.h>
#include <kvrt/store.h>

#include "roofline.h"

#define CHUNK 256u
#define LAYERS 8u
#define HEADS 8u
#define HEAD 128u
#define BS 16u

static kvrt_runtime *rt;
static char names[LAYERS][16];
static struct kvrt_layer_entry entries[LAYERS];
static struct kvrt_group group = {entries, LAYERS};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    fprintf(stderr, "bench-store: %s: %s\n", what, kvrt_error_message());
    exit(1);
}

static void model(uint64_t layers, uint64_t head)
{
    for (uint64_t l = 0; l < LAYERS; l++) {
        snprintf(names[l], sizeof(names[l]), "layer.%llu", (unsigned long long)l);
        kvrt_spec_default(&entries[l].spec);
        entries[l].spec.dtype = KVRT_DTYPE_BF16;
        entries[l].spec.block_size = BS;
        entries[l].spec.num_kv_heads = HEADS;
        entries[l].spec.head_size = head;
        entries[l].name = names[l];
    }
    group.num_layers = layers;
}

static kvrt_store *open_store(const char *path, uint64_t memory, const char *shared)
{
    struct kvrt_store_options o;
    kvrt_store_options_default(&o);
    o.groups = &group;
    o.num_groups = 1;
    o.model_id = "bench";
    o.chunk_tokens = CHUNK;
    o.memory_bytes = memory;
    o.path = path;
    o.disk_bytes = 64ull << 30;
    o.shared = shared;
    kvrt_store *s;
    if (kvrt_store_open(&o, &s) != KVRT_OK)
        die("kvrt_store_open");
    return s;
}

struct seq {
    kvrt_cache *cache;
    int64_t *table;
    int32_t *tokens;
    uint64_t n, blocks;
};

static void seq_make(struct seq *q, enum kvrt_layout layout, uint64_t tokens)
{
    kvrt_backend *b;
    kvrt_placement *p;
    q->n = tokens;
    q->blocks = tokens / BS;
    if (kvrt_runtime_bind(rt, "cpu", kvrt_layout_name(layout), &b) != KVRT_OK ||
        kvrt_placement_create(layout, &group, 1, q->blocks, 0, &p) != KVRT_OK || kvrt_cache_create(b, p, &q->cache))
        die("cache");
    kvrt_placement_destroy(p);
    /* every byte written, as an engine's cache is: an untouched cache reads
     * as the kernel's zero page (a put from it would read the CPU's caches,
     * not memory) and its first get would pay for the page faults */
    void *addr = NULL;
    enum kvrt_memory_kind kind;
    kvrt_buffer *buf = kvrt_cache_buffer(q->cache);
    if (kvrt_buffer_address(buf, &addr, &kind) == KVRT_OK && kind == KVRT_MEMORY_HOST)
        for (uint64_t i = 0, n = kvrt_buffer_size(buf); i < n; i++)
            ((uint8_t *)addr)[i] = (uint8_t)(i * 131 + (i >> 12));
    q->table = malloc(q->blocks * sizeof(*q->table));
    q->tokens = malloc(tokens * sizeof(*q->tokens));
    for (uint64_t i = 0; i < q->blocks; i++)
        q->table[i] = (int64_t)((i * 7919) % q->blocks); /* scattered, distinct: blocks is a power of two */
}

static void seq_tokens(struct seq *q, uint64_t seed)
{
    for (uint64_t i = 0; i < q->n; i++)
        q->tokens[i] = (int32_t)((seed * 2654435761u + i * 40503u) % 32000);
}

static struct kvrt_store_span span(const struct seq *q)
{
    struct kvrt_store_span sp;
    kvrt_store_span_default(&sp);
    sp.cache = q->cache;
    sp.block_table = q->table;
    sp.num_blocks = q->blocks;
    sp.tokens = q->tokens;
    sp.num_tokens = q->n;
    return sp;
}

static double timed_put(kvrt_store *s, const struct seq *q, bool flush)
{
    struct kvrt_store_span sp = span(q);
    uint64_t stored;
    double t0 = now();
    if (kvrt_store_put(s, &sp, &stored) != KVRT_OK || stored != q->n || (flush && kvrt_store_flush(s) != KVRT_OK))
        die("put");
    return now() - t0;
}

static double timed_get(kvrt_store *s, const struct seq *q)
{
    struct kvrt_store_span sp = span(q);
    uint64_t loaded;
    double t0 = now();
    if (kvrt_store_get(s, &sp, &loaded) != KVRT_OK || loaded != q->n)
        die("get (not everything was found)");
    return now() - t0;
}

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A buffer of `bytes` on transparent huge pages, faulted in. */
static uint8_t *huge_buffer(uint64_t bytes, uint8_t **map, size_t *map_bytes)
{
    const size_t huge = 2u << 20;
    *map_bytes = (size_t)bytes + huge;
    *map = mmap(NULL, *map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (*map == MAP_FAILED)
        die("memcpy buffers");
    uint8_t *b = *map + (huge - (uintptr_t)*map % huge) % huge;
    madvise(b, (size_t)bytes, MADV_HUGEPAGE);
    memset(b, 0x5a, (size_t)bytes);
    return b;
}

/* memcpy of `bytes` on one thread, best of a few passes, between buffers
 * on 4 KiB pages (the roofline kvrt bench uses) and between buffers on
 * huge pages, as the store's entries and the CPU backend's caches are (on
 * the build machine, a virtual one, huge pages copy 1.25 times faster:
 * fewer nested page walks); the better of the two. */
static double memcpy_gbps(uint64_t bytes)
{
    struct bench_roof r;
    if (bench_roof_init(&r, bytes, 1) != 0)
        die("memcpy buffers");
    double best = 0;
    for (int i = 0; i < 3; i++) {
        double t = bench_roof_copy_pass(&r);
        if (bytes / t / 1e9 > best)
            best = (double)bytes / t / 1e9;
    }
    bench_roof_free(&r);
    uint8_t *ms, *md;
    size_t ls, ld;
    uint8_t *src = huge_buffer(bytes, &ms, &ls), *dst = huge_buffer(bytes, &md, &ld);
    for (int i = 0; i < 3; i++) {
        double t0 = now();
        memcpy(dst, src, (size_t)bytes);
        double t = now() - t0;
        if (bytes / t / 1e9 > best)
            best = (double)bytes / t / 1e9;
    }
    munmap(ms, ls);
    munmap(md, ld);
    return best;
}

static int memory(int rounds)
{
    const enum kvrt_layout layouts[] = {KVRT_LAYOUT_LBHNC, KVRT_LAYOUT_LBNHC, KVRT_LAYOUT_BLHNC, KVRT_LAYOUT_BLNHC};
    const uint64_t tokens = 16 * CHUNK, bytes = tokens * LAYERS * HEADS * 2 * HEAD * 2;
    for (size_t li = 0; li < sizeof(layouts) / sizeof(layouts[0]); li++) {
        struct seq q;
        seq_make(&q, layouts[li], tokens);
        kvrt_store *s = open_store(NULL, 4 * bytes, NULL);
        double put[32], get[32], roof[32];
        int n = rounds > 32 ? 32 : rounds < 1 ? 1 : rounds;
        /* warm: fill the tier to its capacity, so puts evict and reuse */
        for (int w = 0; w < 5; w++) {
            seq_tokens(&q, 1000 + (uint64_t)w);
            timed_put(s, &q, false);
        }
        for (int i = 0; i < n; i++) {
            seq_tokens(&q, (uint64_t)i);
            put[i] = (double)bytes / timed_put(s, &q, false) / 1e9;
            get[i] = (double)bytes / timed_get(s, &q) / 1e9;
            roof[i] = memcpy_gbps(bytes);
        }
        printf("{\"what\": \"memory\", \"layout\": \"%s\", \"bytes\": %llu, \"put_gbps\": %.3f, \"get_gbps\": %.3f, "
               "\"memcpy_gbps\": %.3f}\n",
               kvrt_layout_name(layouts[li]), (unsigned long long)bytes, median(put, n), median(get, n),
               median(roof, n));
        fflush(stdout);
        kvrt_store_close(s);
        kvrt_cache_destroy(q.cache);
        free(q.table);
        free(q.tokens);
    }
    return 0;
}

/* Drop the slot file's pages from the page cache (they are clean once
 * flushed): the next read comes from the disk. */
static void cold(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/slots.dat", dir);
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fdatasync(fd) != 0 || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0)
        fprintf(stderr, "bench-store: could not drop %s from the page cache\n", path);
    if (fd >= 0)
        close(fd);
}

static int disk(const char *dir, uint64_t mib)
{
    const uint64_t tokens = 16 * CHUNK, per_seq = tokens * LAYERS * HEADS * 2 * HEAD * 2;
    uint64_t seqs = (mib << 20) / per_seq;
    if (seqs < 1)
        seqs = 1;
    struct seq q;
    seq_make(&q, KVRT_LAYOUT_LBHNC, tokens);
    kvrt_store *s = open_store(dir, 0, NULL);
    double t_put = 0;
    for (uint64_t k = 0; k < seqs; k++) {
        seq_tokens(&q, k);
        double t0 = now();
        struct kvrt_store_span sp = span(&q);
        uint64_t stored;
        if (kvrt_store_put(s, &sp, &stored) != KVRT_OK)
            die("put");
        t_put += now() - t0;
    }
    double t0 = now();
    if (kvrt_store_flush(s) != KVRT_OK)
        die("flush");
    double t_flush = now() - t0;
    uint64_t bytes = seqs * per_seq;
    cold(dir);
    double t_cold = 0, t_warm = 0;
    for (uint64_t k = 0; k < seqs; k++) {
        seq_tokens(&q, k);
        t_cold += timed_get(s, &q);
    }
    for (uint64_t k = 0; k < seqs; k++) {
        seq_tokens(&q, k);
        t_warm += timed_get(s, &q);
    }
    printf("{\"what\": \"disk\", \"bytes\": %llu, \"put_gbps\": %.3f, \"put_seconds\": %.3f, \"flush_seconds\": %.3f, "
           "\"get_cold_gbps\": %.3f, \"get_warm_gbps\": %.3f, \"memcpy_gbps\": %.3f}\n",
           (unsigned long long)bytes, (double)bytes / (t_put + t_flush) / 1e9, t_put, t_flush,
           (double)bytes / t_cold / 1e9, (double)bytes / t_warm / 1e9, memcpy_gbps(per_seq));
    kvrt_store_close(s);
    kvrt_cache_destroy(q.cache);
    free(q.table);
    free(q.tokens);
    return 0;
}

static int lookup(const char *dir)
{
    /* small entries (one layer of head size 16): lookup costs the same */
    model(1, 16);
    const uint64_t tokens = 128 * 1024;
    struct seq q;
    seq_make(&q, KVRT_LAYOUT_LBHNC, tokens);
    seq_tokens(&q, 5);
    kvrt_store *s = open_store(dir, 1ull << 30, NULL);
    timed_put(s, &q, true);
    for (int where = 0; where < 2; where++) {
        if (where == 1) { /* a new store: nothing in memory, all on disk */
            kvrt_store_close(s);
            s = open_store(dir, 0, NULL);
        }
        double t[51];
        uint64_t hit = 0;
        for (int i = 0; i < 51; i++) {
            double t0 = now();
            if (kvrt_store_lookup(s, q.tokens, tokens, 0, 0, &hit) != KVRT_OK || hit != tokens)
                die("lookup");
            t[i] = now() - t0;
        }
        /* the keys alone: the SHA-256 share of it */
        uint64_t nk = tokens / CHUNK;
        uint8_t *keys = malloc(nk * KVRT_STORE_KEY_BYTES);
        double k0 = now();
        kvrt_store_keys(s, q.tokens, tokens, keys, nk, NULL);
        double tk = now() - k0;
        free(keys);
        double mid = median(t, 51); /* sorts t: t[0] is then the fastest */
        printf("{\"what\": \"lookup\", \"tier\": \"%s\", \"tokens\": %llu, \"chunks\": %llu, \"heads\": %u, "
               "\"median_ms\": %.4f, \"min_ms\": %.4f, \"keys_ms\": %.4f}\n",
               where ? "disk" : "memory", (unsigned long long)tokens, (unsigned long long)nk, HEADS, mid * 1e3,
               t[0] * 1e3, tk * 1e3);
    }
    kvrt_store_close(s);
    kvrt_cache_destroy(q.cache);
    free(q.table);
    free(q.tokens);
    return 0;
}

static int shared(const char *url, uint64_t entries_wanted)
{
    /* one chunk of every head per put: entries of 1 MiB */
    uint64_t chunks = entries_wanted / HEADS ? entries_wanted / HEADS : 1;
    struct seq q;
    seq_make(&q, KVRT_LAYOUT_LBHNC, chunks * CHUNK);
    kvrt_store *s = open_store(NULL, 0, url);
    /* untimed: another sequence first, so the store's entry buffers are
     * warm, as an engine's are after its first requests (a fresh buffer is
     * zeroed by the kernel as it is first touched) */
    seq_tokens(&q, 8);
    timed_put(s, &q, true);
    seq_tokens(&q, 9);
    double t_set = timed_put(s, &q, true);
    struct kvrt_store_stats st = {0};
    kvrt_store_stats(s, &st);
    if (st.written_shared != 2 * chunks * HEADS)
        die("the shared tier did not take every entry");
    double t_get = timed_get(s, &q);
    uint64_t n = chunks * HEADS, value = 128 + st.entry_bytes;
    printf("{\"what\": \"shared\", \"entries\": %llu, \"value_bytes\": %llu, \"set_per_s\": %.1f, \"get_per_s\": %.1f, "
           "\"set_gbps\": %.3f, \"get_gbps\": %.3f}\n",
           (unsigned long long)n, (unsigned long long)value, (double)n / t_set, (double)n / t_get,
           (double)(n * value) / t_set / 1e9, (double)(n * value) / t_get / 1e9);
    kvrt_store_close(s);
    kvrt_cache_destroy(q.cache);
    free(q.table);
    free(q.tokens);
    return 0;
}

/* The disk's own sequential write and read of the same bytes, the way the
 * store does its I/O but with nothing else: O_DIRECT from one buffer on
 * huge pages (as the store's entry buffers are), writes of 64 MiB (a batch
 * writes up to 64 neighbouring slots in one call) and an fdatasync, reads
 * of 8 MiB (one chunk of eight 1 MiB entries) and of 64 MiB. */
static int dd(const char *dir, uint64_t mib)
{
    const size_t big = 64u << 20, huge = 2u << 20;
    uint64_t bytes = (mib << 20) / big * big;
    char path[4200];
    snprintf(path, sizeof(path), "%s/dd.dat", dir);
    uint8_t *m = mmap(NULL, big + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || bytes == 0) {
        fprintf(stderr, "bench-store: dd: no buffer, or --mib %llu under 64\n", (unsigned long long)mib);
        return 1;
    }
    uint8_t *buf = m + (huge - (uintptr_t)m % huge) % huge;
    madvise(buf, big, MADV_HUGEPAGE);
    memset(buf, 0x5a, big);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
    double t0 = now();
    for (uint64_t at = 0; fd >= 0 && at < bytes; at += big)
        if (pwrite(fd, buf, big, (off_t)at) != (ssize_t)big) {
            perror("bench-store: dd: write");
            return 1;
        }
    if (fd < 0 || fdatasync(fd) != 0) {
        perror("bench-store: dd: open or sync (a file system without O_DIRECT?)");
        return 1;
    }
    double t_write = now() - t0;
    close(fd);
    double t_read[2];
    const size_t req[2] = {8u << 20, big};
    for (int k = 0; k < 2; k++) {
        fd = open(path, O_RDONLY | O_DIRECT);
        t0 = now();
        for (uint64_t at = 0; fd >= 0 && at < bytes; at += req[k])
            if (pread(fd, buf, req[k], (off_t)at) != (ssize_t)req[k]) {
                perror("bench-store: dd: read");
                return 1;
            }
        t_read[k] = now() - t0;
        if (fd >= 0)
            close(fd);
    }
    unlink(path);
    munmap(m, big + huge);
    printf("{\"what\": \"dd\", \"bytes\": %llu, \"write_gbps\": %.3f, \"read8_gbps\": %.3f, "
           "\"read64_gbps\": %.3f}\n",
           (unsigned long long)bytes, (double)bytes / t_write / 1e9, (double)bytes / t_read[0] / 1e9,
           (double)bytes / t_read[1] / 1e9);
    return 0;
}

/* Seconds to seal (or open) `n` entries of `len` bytes in place with
 * AES-256-GCM, as store/seal.c does (a 112-byte header as associated
 * data, a 12-byte nonce, a 16-byte tag). */
static double gcm_pass(uint8_t *buf, uint64_t n, uint64_t len, bool seal)
{
    static const uint8_t key[32] = {1, 2, 3}, nonce[12] = {4, 5, 6}, aad[112] = {7};
    uint8_t tag[16] = {0};
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    if (!c)
        die("EVP_CIPHER_CTX_new");
    double t0 = now();
    for (uint64_t i = 0; i < n; i++) {
        uint8_t *p = buf + i * len;
        int out = 0;
        if (seal) {
            EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, nonce);
            EVP_EncryptUpdate(c, NULL, &out, aad, sizeof(aad));
            EVP_EncryptUpdate(c, p, &out, p, (int)len);
            EVP_EncryptFinal_ex(c, p + out, &out);
            EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, sizeof(tag), tag);
        } else {
            /* the tag will not match (the bytes are not a sealed entry):
             * the cost is the same, and the verdict is not the point */
            EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, nonce);
            EVP_DecryptUpdate(c, NULL, &out, aad, sizeof(aad));
            EVP_DecryptUpdate(c, p, &out, p, (int)len);
            EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, sizeof(tag), tag);
            (void)EVP_DecryptFinal_ex(c, p + out, &out);
        }
    }
    double t = now() - t0;
    EVP_CIPHER_CTX_free(c);
    return t;
}

/* Where one chunk's time goes (docs/store.md "Speed"): each piece of the
 * store's per-byte work timed alone, in GB/s of entry bytes, over a
 * 4096-token sequence (128 entries of 1 MiB), medians of `rounds`:
 *   - memcpy on one thread and on all (the two limits a copy is rated by);
 *   - the canonical copy alone: a put into and a get from a store with only
 *     a memory tier (no checksum: nothing leaves the process);
 *   - XXH3-128 over the entries (every entry bound for the disk or the
 *     shared tier, and every one read back);
 *   - AES-256-GCM seal and open (with a tenant key, on the shared tier);
 *   - the disk tier: a put's own time (copy + checksum + queueing) and its
 *     flush (the writes), a cold get (O_DIRECT reads, check, copy) and a
 *     warm one (the same, the file in the page cache), and the bare
 *     O_DIRECT read of the same slot file in 1 MiB requests. */
static int breakdown(const char *dir, int rounds)
{
    const uint64_t tokens = 16 * CHUNK, bytes = tokens * LAYERS * HEADS * 2 * HEAD * 2;
    const uint64_t entry = bytes / (16 * HEADS), count = bytes / entry;
    int n = rounds > 32 ? 32 : rounds < 1 ? 1 : rounds;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "bench-store: breakdown: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    double m1[32], mall[32], cput[32], cget[32], xx[32], sealv[32], openv[32];
    double dput[32], dflush[32], dcold[32], dwarm[32], dread[32];
    struct seq q;
    seq_make(&q, KVRT_LAYOUT_LBHNC, tokens);
    struct bench_roof all;
    unsigned threads = bench_roof_threads();
    if (bench_roof_init(&all, bytes, threads) != 0)
        die("memcpy buffers");
    uint8_t *map;
    size_t map_bytes;
    uint8_t *buf = huge_buffer(bytes, &map, &map_bytes);
    for (int i = 0; i < n; i++) {
        m1[i] = memcpy_gbps(bytes);
        mall[i] = (double)bytes / bench_roof_copy_pass(&all) / 1e9;
        /* warm, as memory() is: the tier full, so the timed put reuses
         * the buffers of the entries it evicts instead of faulting in new
         * pages */
        kvrt_store *s = open_store(NULL, 2 * bytes, NULL);
        for (uint64_t w = 0; w < 3; w++) {
            seq_tokens(&q, 1000 + w);
            timed_put(s, &q, false);
        }
        seq_tokens(&q, 100 + (uint64_t)i);
        cput[i] = (double)bytes / timed_put(s, &q, false) / 1e9;
        cget[i] = (double)bytes / timed_get(s, &q) / 1e9;
        kvrt_store_close(s);
        double t0 = now();
        XXH128_hash_t h = {0, 0};
        for (uint64_t e = 0; e < count; e++) {
            XXH128_hash_t x = XXH3_128bits(buf + e * entry, entry);
            h.low64 ^= x.low64;
        }
        xx[i] = (double)bytes / (now() - t0) / 1e9;
        buf[0] ^= (uint8_t)h.low64; /* keep the sums */
        sealv[i] = (double)bytes / gcm_pass(buf, count, entry, true) / 1e9;
        openv[i] = (double)bytes / gcm_pass(buf, count, entry, false) / 1e9;
        /* the disk tier, a fresh directory each round */
        char sub[4200];
        snprintf(sub, sizeof(sub), "%s/breakdown-%d", dir, i);
        s = open_store(sub, 0, NULL);
        seq_tokens(&q, 200 + (uint64_t)i);
        struct kvrt_store_span sp = span(&q);
        uint64_t stored;
        t0 = now();
        if (kvrt_store_put(s, &sp, &stored) != KVRT_OK)
            die("put");
        dput[i] = (double)bytes / (now() - t0) / 1e9;
        t0 = now();
        if (kvrt_store_flush(s) != KVRT_OK)
            die("flush");
        dflush[i] = (double)bytes / (now() - t0) / 1e9;
        cold(sub);
        dcold[i] = (double)bytes / timed_get(s, &q) / 1e9;
        dwarm[i] = (double)bytes / timed_get(s, &q) / 1e9;
        kvrt_store_close(s);
        cold(sub);
        char path[4300];
        snprintf(path, sizeof(path), "%s/slots.dat", sub);
        int fd = open(path, O_RDONLY | O_DIRECT);
        uint64_t got = 0;
        t0 = now();
        for (ssize_t r; fd >= 0 && got < bytes; got += (uint64_t)r)
            if ((r = pread(fd, buf, entry, (off_t)got)) <= 0)
                break;
        dread[i] = got ? (double)got / (now() - t0) / 1e9 : 0;
        if (fd >= 0)
            close(fd);
    }
    printf("{\"what\": \"breakdown\", \"bytes\": %llu, \"entry_bytes\": %llu, \"rounds\": %d, \"threads\": %u, "
           "\"memcpy_gbps\": %.3f, \"memcpy_all_gbps\": %.3f, \"canon_put_gbps\": %.3f, \"canon_get_gbps\": %.3f, "
           "\"xxh3_gbps\": %.3f, \"seal_gbps\": %.3f, \"open_gbps\": %.3f, \"disk_put_call_gbps\": %.3f, "
           "\"disk_flush_gbps\": %.3f, \"disk_get_cold_gbps\": %.3f, \"disk_get_warm_gbps\": %.3f, "
           "\"disk_read_gbps\": %.3f}\n",
           (unsigned long long)bytes, (unsigned long long)entry, n, threads, median(m1, n), median(mall, n),
           median(cput, n), median(cget, n), median(xx, n), median(sealv, n), median(openv, n), median(dput, n),
           median(dflush, n), median(dcold, n), median(dwarm, n), median(dread, n));
    munmap(map, map_bytes);
    bench_roof_free(&all);
    kvrt_cache_destroy(q.cache);
    free(q.table);
    free(q.tokens);
    return 0;
}

int main(int argc, char **argv)
{
    struct kvrt_runtime_options o;
    kvrt_runtime_options_default(&o);
    if (kvrt_runtime_open(&o, &rt) != KVRT_OK)
        die("kvrt_runtime_open");
    model(LAYERS, HEAD);
    const char *what = argc > 1 ? argv[1] : "";
    int rc = 2;
    if (strcmp(what, "memory") == 0)
        rc = memory(argc > 3 && strcmp(argv[2], "--rounds") == 0 ? atoi(argv[3]) : 5);
    else if (strcmp(what, "disk") == 0 && argc > 2)
        rc = disk(argv[2], argc > 4 && strcmp(argv[3], "--mib") == 0 ? strtoull(argv[4], NULL, 10) : 512);
    else if (strcmp(what, "lookup") == 0 && argc > 2)
        rc = lookup(argv[2]);
    else if (strcmp(what, "dd") == 0 && argc > 2)
        rc = dd(argv[2], argc > 4 && strcmp(argv[3], "--mib") == 0 ? strtoull(argv[4], NULL, 10) : 512);
    else if (strcmp(what, "breakdown") == 0 && argc > 2)
        rc = breakdown(argv[2], argc > 4 && strcmp(argv[3], "--rounds") == 0 ? atoi(argv[4]) : 3);
    else if (strcmp(what, "shared") == 0 && argc > 2)
        rc = shared(argv[2], argc > 4 && strcmp(argv[3], "--entries") == 0 ? strtoull(argv[4], NULL, 10) : 128);
    else
        fprintf(stderr, "usage: bench-store memory [--rounds N] | disk DIR [--mib N] | lookup DIR | shared URL "
                        "[--entries N] | dd DIR [--mib N] | breakdown DIR [--rounds N]\n");
    kvrt_runtime_close(rt);
    return rc;
}
