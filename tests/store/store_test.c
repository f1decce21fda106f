#include "store_test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* The bytes of one (layer, global head, token) K or V vector. */
static void cell(uint64_t seed, uint64_t l, uint64_t g, uint64_t t, uint64_t part, uint8_t *out, uint64_t n)
{
    uint64_t base = mix(seed ^ mix(l + 1) ^ mix((g + 1) << 24) ^ mix((t + 1) * 0x9e3779b97f4a7c15ull) ^ mix(part + 7));
    for (uint64_t i = 0; i < n; i += 8) {
        uint64_t w = mix(base + i);
        for (uint64_t k = 0; k < 8 && i + k < n; k++)
            out[i + k] = (uint8_t)(w >> (8 * k));
    }
}

void st_model_init(struct st_model *m, enum kvrt_spec_kind kind, enum kvrt_dtype dtype, uint64_t layers, uint64_t heads,
                   uint64_t head_size, uint64_t head_size_v)
{
    memset(m, 0, sizeof(*m));
    m->layers = layers > ST_MAX_LAYERS ? ST_MAX_LAYERS : layers;
    m->heads = heads;
    m->head_size = head_size;
    m->head_size_v = kind == KVRT_SPEC_MLA ? 0 : head_size_v;
    m->kind = kind;
    m->dtype = dtype;
    for (uint64_t l = 0; l < m->layers; l++) {
        snprintf(m->names[l], sizeof(m->names[l]), "layer.%llu", (unsigned long long)l);
        struct kvrt_spec *s = &m->entries[l].spec;
        kvrt_spec_default(s);
        s->kind = kind;
        s->dtype = dtype;
        s->block_size = 16;
        s->num_kv_heads = heads;
        s->head_size = head_size;
        s->head_size_v = m->head_size_v;
        m->entries[l].name = m->names[l];
    }
    m->group.layers = m->entries;
    m->group.num_layers = m->layers;
}

bool st_cache_make(struct st_cache *c, kvrt_runtime *rt, const char *backend, const struct st_model *m,
                   enum kvrt_layout layout, uint64_t block_size, uint64_t kernel, uint64_t blocks, uint64_t head_offset,
                   uint64_t heads)
{
    return st_cache_make_layers(c, rt, backend, m, layout, block_size, kernel, blocks, head_offset, heads, 0,
                                m->layers);
}

bool st_cache_make_layers(struct st_cache *c, kvrt_runtime *rt, const char *backend, const struct st_model *m,
                          enum kvrt_layout layout, uint64_t block_size, uint64_t kernel, uint64_t blocks,
                          uint64_t head_offset, uint64_t heads, uint64_t layer_offset, uint64_t layers)
{
    memset(c, 0, sizeof(*c));
    c->layer_offset = layer_offset;
    c->layers = layers;
    c->model = m;
    c->layout = layout;
    c->block_size = block_size;
    c->kernel = kernel;
    c->blocks = blocks;
    c->head_offset = head_offset;
    c->heads = heads;
    struct kvrt_layer_entry e[ST_MAX_LAYERS];
    for (uint64_t l = 0; l < layers && layer_offset + l < m->layers; l++) {
        e[l] = m->entries[layer_offset + l];
        e[l].spec.block_size = block_size;
        e[l].spec.num_kv_heads = heads;
    }
    struct kvrt_group g = {e, layers};
    kvrt_placement *p = NULL;
    int rc = kvrt_runtime_bind(rt, backend, kvrt_layout_name(layout), &c->backend);
    if (rc == KVRT_OK)
        rc = kvrt_placement_create(layout, &g, 1, blocks, kernel, &p);
    if (rc == KVRT_OK)
        rc = kvrt_cache_create(c->backend, p, &c->cache);
    kvrt_placement_destroy(p);
    if (rc != KVRT_OK)
        tap_diag("cache %s %s bs %llu: %s", backend, kvrt_layout_name(layout), (unsigned long long)block_size,
                 kvrt_error_message());
    return rc == KVRT_OK;
}

void st_cache_free(struct st_cache *c)
{
    kvrt_cache_destroy(c->cache);
    c->cache = NULL;
}

void st_table(const struct st_cache *c, int64_t *table, uint64_t n, uint64_t seed)
{
    int64_t *all = malloc(c->blocks * sizeof(*all));
    for (uint64_t i = 0; i < c->blocks; i++)
        all[i] = (int64_t)i;
    uint64_t r = mix(seed + 99);
    for (uint64_t i = c->blocks; i > 1; i--) {
        r = mix(r);
        uint64_t j = r % i;
        int64_t t = all[i - 1];
        all[i - 1] = all[j];
        all[j] = t;
    }
    for (uint64_t i = 0; i < n && i < c->blocks; i++)
        table[i] = all[i];
    free(all);
}

void st_tokens(int32_t *tokens, uint64_t n, uint64_t seed)
{
    for (uint64_t i = 0; i < n; i++)
        tokens[i] = (int32_t)(mix(seed * 1000003 + i) % 50000);
}

/* K and V of tokens [first, first + n), every head, for one layer. */
static void vectors(const struct st_cache *c, uint64_t l, uint64_t first, uint64_t n, uint64_t seed, uint8_t *k,
                    uint8_t *v)
{
    const struct st_model *m = c->model;
    uint64_t es = kvrt_dtype_size(m->dtype), dk = m->head_size * es, dv = m->head_size_v * es;
    for (uint64_t t = 0; t < n; t++)
        for (uint64_t h = 0; h < c->heads; h++) {
            cell(seed, l, c->head_offset + h, first + t, 0, k + (t * c->heads + h) * dk, dk);
            if (dv)
                cell(seed, l, c->head_offset + h, first + t, 1, v + (t * c->heads + h) * dv, dv);
        }
}

static int64_t *slots_of(const struct st_cache *c, const int64_t *table, uint64_t first, uint64_t n)
{
    int64_t *slots = malloc((n ? n : 1) * sizeof(*slots));
    for (uint64_t t = 0; t < n; t++) {
        uint64_t pos = first + t;
        slots[t] = table[pos / c->block_size] * (int64_t)c->block_size + (int64_t)(pos % c->block_size);
    }
    return slots;
}

static bool io(const struct st_cache *c, const int64_t *table, uint64_t first, uint64_t n, uint64_t seed, bool write,
               uint64_t *bad, char *where, size_t size)
{
    const struct st_model *m = c->model;
    if (n == 0)
        return true;
    uint64_t es = kvrt_dtype_size(m->dtype);
    uint64_t kb = n * c->heads * m->head_size * es, vb = n * c->heads * m->head_size_v * es;
    uint8_t *k = malloc(kb + 1), *v = malloc(vb + 1), *gk = malloc(kb + 1), *gv = malloc(vb + 1);
    int64_t *slots = slots_of(c, table, first, n);
    kvrt_buffer *bk = NULL, *bv = NULL;
    int rc = kvrt_buffer_create(c->backend, kb + 1, &bk);
    if (rc == KVRT_OK && vb)
        rc = kvrt_buffer_create(c->backend, vb + 1, &bv);
    for (uint64_t l = 0; rc == KVRT_OK && l < c->layers; l++) {
        /* the pattern of the model's layer: equal in every stage's cache */
        vectors(c, c->layer_offset + l, first, n, seed, k, v);
        if (write) {
            rc = kvrt_buffer_upload(bk, 0, k, kb);
            if (rc == KVRT_OK && vb)
                rc = kvrt_buffer_upload(bv, 0, v, vb);
            if (rc == KVRT_OK)
                rc = kvrt_cache_write(c->cache, (uint32_t)l, n, slots, bk, 0, bv, 0);
            continue;
        }
        rc = kvrt_cache_read(c->cache, (uint32_t)l, n, slots, bk, 0, bv, 0);
        if (rc == KVRT_OK)
            rc = kvrt_buffer_download(bk, 0, gk, kb);
        if (rc == KVRT_OK && vb)
            rc = kvrt_buffer_download(bv, 0, gv, vb);
        uint64_t cellk = m->head_size * es, cellv = m->head_size_v * es;
        for (uint64_t t = 0; rc == KVRT_OK && t < n; t++)
            for (uint64_t h = 0; h < c->heads; h++) {
                uint64_t ko = (t * c->heads + h) * cellk, vo = (t * c->heads + h) * cellv;
                if (memcmp(k + ko, gk + ko, cellk) != 0 || (vb && memcmp(v + vo, gv + vo, cellv) != 0)) {
                    uint64_t layer = c->layer_offset + l;
                    if (*bad == 0 && where)
                        snprintf(where, size, "layer %llu, token %llu, head %llu", (unsigned long long)layer,
                                 (unsigned long long)first + t, (unsigned long long)c->head_offset + h);
                    (*bad)++;
                }
            }
    }
    if (rc != KVRT_OK)
        tap_diag("%s: %s", write ? "kvrt_cache_write" : "kvrt_cache_read", kvrt_error_message());
    kvrt_buffer_destroy(bk);
    kvrt_buffer_destroy(bv);
    free(k);
    free(v);
    free(gk);
    free(gv);
    free(slots);
    return rc == KVRT_OK;
}

bool st_fill(const struct st_cache *c, const int64_t *table, uint64_t first, uint64_t n, uint64_t seed)
{
    uint64_t bad = 0;
    return io(c, table, first, n, seed, true, &bad, NULL, 0);
}

uint64_t st_check(const struct st_cache *c, const int64_t *table, uint64_t first, uint64_t n, uint64_t seed,
                  char *where, size_t size)
{
    uint64_t bad = 0;
    if (where && size)
        where[0] = '\0';
    return io(c, table, first, n, seed, false, &bad, where, size) ? bad : UINT64_MAX;
}

kvrt_store *st_open(const struct st_model *m, const char *model_id, uint64_t chunk, uint64_t memory, const char *path,
                    uint64_t disk, const char *shared)
{
    struct kvrt_store_options o;
    kvrt_store_options_default(&o);
    o.groups = &m->group;
    o.num_groups = 1;
    o.model_id = model_id;
    o.chunk_tokens = chunk;
    o.memory_bytes = memory;
    o.path = path;
    o.disk_bytes = disk;
    o.shared = shared;
    kvrt_store *s = NULL;
    if (kvrt_store_open(&o, &s) != KVRT_OK)
        tap_diag("kvrt_store_open: %s", kvrt_error_message());
    return s;
}

struct kvrt_store_span st_span(const struct st_cache *c, const int64_t *table, uint64_t num_blocks,
                               const int32_t *tokens, uint64_t num_tokens, uint64_t first, uint64_t count)
{
    struct kvrt_store_span sp;
    kvrt_store_span_default(&sp);
    sp.cache = c->cache;
    sp.block_table = table;
    sp.num_blocks = num_blocks;
    sp.tokens = tokens;
    sp.num_tokens = num_tokens;
    sp.first = first;
    sp.count = count;
    sp.head_start = c->head_offset;
    sp.num_heads = c->heads == c->model->heads && c->head_offset == 0 ? 0 : c->heads;
    sp.layer_start = c->layer_offset;
    sp.num_layers = c->layers == c->model->layers && c->layer_offset == 0 ? 0 : c->layers;
    return sp;
}

char *st_tempdir(const char *what)
{
    const char *base = getenv("TMPDIR");
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/kvrt-store-%s-XXXXXX", base && base[0] ? base : "/tmp", what);
    if (!mkdtemp(p)) {
        tap_diag("mkdtemp %s failed", p);
        free(p);
        return NULL;
    }
    return p;
}

void st_rmdir(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        for (struct dirent *e; (e = readdir(d));) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char f[4200];
            snprintf(f, sizeof(f), "%s/%s", path, e->d_name);
            if (unlink(f) != 0)
                st_rmdir(f);
        }
        closedir(d);
    }
    rmdir(path);
}

void st_log_fn(void *user, enum kvrt_log_level level, const char *message)
{
    struct st_log *lg = user;
    (void)level;
    if (lg->n < 64)
        snprintf(lg->lines[lg->n++], sizeof(lg->lines[0]), "%s", message);
}
