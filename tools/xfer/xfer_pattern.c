#include "xfer_pattern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* The C bytes of one (layer, block, global head, state) cell: defined on
 * logical coordinates only, so every layout holds the same values. */
static void cell(uint64_t seed, uint64_t l, uint64_t b, uint64_t g, uint64_t st, uint8_t *out, uint64_t c)
{
    uint64_t base = mix(seed ^ mix(l + 1) ^ mix((b + 1) << 20) ^ mix((g + 1) << 40) ^ mix(st * 0x9e3779b97f4a7c15ull));
    for (uint64_t i = 0; i < c; i += 8) {
        uint64_t w = mix(base + i);
        uint64_t n = c - i < 8 ? c - i : 8;
        for (uint64_t k = 0; k < n; k++)
            out[i + k] = (uint8_t)(w >> (8 * k));
    }
}

static uint8_t *cell_at(struct xpat *x, uint64_t b, uint64_t l, uint64_t h, uint64_t st)
{
    return x->expected + b * x->staging_per_block + x->layer_offset[l] +
           (h * x->layer_states[l] + st) * x->layer_content[l];
}

static int describe(struct xpat *x)
{
    const kvrt_placement *p = kvrt_cache_placement(x->cache);
    size_t nsets = kvrt_placement_num_sets(p);
    x->num_blocks = kvrt_placement_num_blocks(p);
    x->num_layers = kvrt_cache_num_layers(x->cache);
    x->layer_offset = calloc(x->num_layers, sizeof(uint64_t));
    x->layer_heads = calloc(x->num_layers, sizeof(uint64_t));
    x->layer_states = calloc(x->num_layers, sizeof(uint64_t));
    x->layer_content = calloc(x->num_layers, sizeof(uint64_t));
    if (!x->layer_offset || !x->layer_heads || !x->layer_states || !x->layer_content)
        return kvrt_error_report(KVRT_ERR_NOMEM, "xpat: out of memory");
    int rc = kvrt_placement_staging_bytes(p, &x->staging_per_block);
    uint64_t n = 0, page;
    for (size_t i = 0; rc == KVRT_OK && i < nsets; i++) {
        struct kvrt_placement_set set;
        kvrt_placement_get_set(p, i, &set);
        for (uint64_t l = 0; rc == KVRT_OK && l < set.num_layers; l++, n++) {
            rc = kvrt_placement_staging_layer(p, n, &x->layer_offset[n], &page);
            x->layer_heads[n] = set.geometry.info.head_slots;
            x->layer_states[n] = set.geometry.info.states_per_block;
            x->layer_content[n] = set.geometry.info.content_bytes;
        }
    }
    return rc;
}

/* Every block of the cache to or from `host` in staging order. */
static int move_blocks(struct xpat *x, const int64_t *ids, uint64_t n, bool to_cache, uint8_t *host)
{
    uint64_t bytes = n * x->staging_per_block;
    kvrt_buffer *buf = NULL;
    int rc = kvrt_buffer_create(x->backend, bytes ? bytes : 1, &buf);
    if (rc == KVRT_OK && to_cache) {
        rc = kvrt_buffer_upload(buf, 0, host, bytes);
        if (rc == KVRT_OK)
            rc = kvrt_cache_scatter(x->cache, n, ids, buf, 0);
    } else if (rc == KVRT_OK) {
        rc = kvrt_cache_gather(x->cache, n, ids, buf, 0);
        if (rc == KVRT_OK)
            rc = kvrt_buffer_download(buf, 0, host, bytes);
    }
    kvrt_buffer_destroy(buf);
    return rc;
}

static int move_all(struct xpat *x, bool to_cache, uint8_t *host)
{
    int64_t *ids = malloc((x->num_blocks ? x->num_blocks : 1) * sizeof(*ids));
    if (!ids)
        return kvrt_error_report(KVRT_ERR_NOMEM, "xpat: out of memory");
    for (uint64_t b = 0; b < x->num_blocks; b++)
        ids[b] = (int64_t)b;
    int rc = move_blocks(x, ids, x->num_blocks, to_cache, host);
    free(ids);
    return rc;
}

static int init(struct xpat *x, kvrt_backend *b, kvrt_cache *c)
{
    memset(x, 0, sizeof(*x));
    x->backend = b;
    x->cache = c;
    int rc = describe(x);
    uint64_t bytes;
    if (rc == KVRT_OK && (__builtin_mul_overflow(x->num_blocks, x->staging_per_block, &bytes) ||
                          !(x->expected = calloc(bytes ? bytes : 1, 1))))
        rc = kvrt_error_report(KVRT_ERR_NOMEM, "xpat: no memory for %llu blocks of %llu staging bytes",
                               (unsigned long long)x->num_blocks, (unsigned long long)x->staging_per_block);
    return rc;
}

int xpat_init_zero(struct xpat *x, kvrt_backend *b, kvrt_cache *c)
{
    return init(x, b, c);
}

int xpat_init(struct xpat *x, kvrt_backend *b, kvrt_cache *c, uint64_t seed, uint64_t head_offset)
{
    int rc = init(x, b, c);
    if (rc != KVRT_OK)
        return rc;
    for (uint64_t blk = 0; blk < x->num_blocks; blk++)
        for (uint64_t l = 0; l < x->num_layers; l++)
            for (uint64_t h = 0; h < x->layer_heads[l]; h++)
                for (uint64_t st = 0; st < x->layer_states[l]; st++)
                    cell(seed, l, blk, head_offset + h, st, cell_at(x, blk, l, h, st), x->layer_content[l]);
    return move_all(x, true, x->expected);
}

void xpat_free(struct xpat *x)
{
    free(x->layer_offset);
    free(x->layer_heads);
    free(x->layer_states);
    free(x->layer_content);
    free(x->expected);
    memset(x, 0, sizeof(*x));
}

/* A token range: token t from the source's block src_ids[t / src_bs], state
 * t % src_bs, to the destination's dst_ids[t / dst_bs], state t % dst_bs. */
static void apply_tokens(struct xpat *x, const struct xpat_record *r)
{
    uint64_t end = r->num_layers ? r->layer_start + r->num_layers : x->num_layers;
    for (uint64_t t = r->token_first; t < r->token_first + r->token_count; t++) {
        if (t / r->src_bs >= r->num_src_blocks || t / r->dst_bs >= r->num_blocks)
            return;
        uint64_t src = (uint64_t)r->src_ids[t / r->src_bs], d = (uint64_t)r->dst_ids[t / r->dst_bs];
        if (d >= x->num_blocks)
            continue;
        for (uint64_t l = r->layer_start; l < end && l < x->num_layers; l++) {
            uint64_t nh = r->num_heads ? r->num_heads : x->layer_heads[l];
            for (uint64_t h = 0; h < nh && r->dst_head_start + h < x->layer_heads[l]; h++)
                cell(r->seed, l, src, r->head_offset + r->src_head_start + h, t % r->src_bs,
                     cell_at(x, d, l, r->dst_head_start + h, t % r->dst_bs), x->layer_content[l]);
        }
    }
}

void xpat_apply(struct xpat *x, const struct xpat_record *r)
{
    if (r->token_count) {
        apply_tokens(x, r);
        return;
    }
    for (uint64_t i = 0; i < r->num_blocks; i++) {
        uint64_t d = (uint64_t)r->dst_ids[i], src = (uint64_t)r->src_ids[i];
        if (d >= x->num_blocks)
            continue;
        uint64_t end = r->num_layers ? r->layer_start + r->num_layers : x->num_layers;
        for (uint64_t l = r->layer_start; l < end && l < x->num_layers; l++) {
            uint64_t nh = r->num_heads ? r->num_heads : x->layer_heads[l];
            for (uint64_t h = 0; h < nh && r->dst_head_start + h < x->layer_heads[l]; h++)
                for (uint64_t st = 0; st < x->layer_states[l]; st++)
                    cell(r->seed, l, src, r->head_offset + r->src_head_start + h, st,
                         cell_at(x, d, l, r->dst_head_start + h, st), x->layer_content[l]);
        }
    }
}

uint64_t xpat_verify(struct xpat *x, char *where, size_t size)
{
    uint64_t bytes = x->num_blocks * x->staging_per_block, bad = 0;
    uint8_t *got = calloc(bytes ? bytes : 1, 1);
    where[0] = '\0';
    if (!got || move_all(x, false, got) != KVRT_OK) {
        snprintf(where, size, "%s", got ? kvrt_error_message() : "out of memory");
        free(got);
        return UINT64_MAX;
    }
    for (uint64_t i = 0; i < bytes; i++) {
        if (got[i] == x->expected[i])
            continue;
        if (bad++ == 0) {
            uint64_t b = i / x->staging_per_block, r = i % x->staging_per_block, l = 0;
            while (l + 1 < x->num_layers && x->layer_offset[l + 1] <= r)
                l++;
            uint64_t in = r - x->layer_offset[l], c = in / x->layer_content[l];
            snprintf(where, size, "block %llu layer %llu head %llu state %llu byte %llu", (unsigned long long)b,
                     (unsigned long long)l, (unsigned long long)(c / x->layer_states[l]),
                     (unsigned long long)(c % x->layer_states[l]), (unsigned long long)(in % x->layer_content[l]));
        }
    }
    free(got);
    return bad;
}

bool xpat_block_ok(struct xpat *x, int64_t block)
{
    uint8_t *got = malloc(x->staging_per_block);
    bool ok = got && block >= 0 && (uint64_t)block < x->num_blocks &&
              move_blocks(x, &block, 1, false, got) == KVRT_OK &&
              memcmp(got, x->expected + (uint64_t)block * x->staging_per_block, x->staging_per_block) == 0;
    free(got);
    return ok;
}

/* ---- records ----------------------------------------------------------------- */

static void put_ids(char **p, const int64_t *ids, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        *p += sprintf(*p, "%s%lld", i ? "," : "", (long long)ids[i]);
}

char *xpat_record_text(const struct xpat_record *r)
{
    /* The header, and two lists of ids of at most 22 bytes each with the comma. */
    uint64_t nsrc = r->token_count ? r->num_src_blocks : r->num_blocks;
    size_t cap = 320 + (size_t)(r->num_blocks + nsrc) * 22;
    char *t = malloc(cap), *p = t;
    if (!t)
        return NULL;
    p += sprintf(
        p,
        "xpat2 index=%llu last=%d pull=%d seed=%llu ho=%llu layers=%llu+%llu heads=%llu:%llu+%llu "
        "tokens=%llu+%llu bs=%llu:%llu src=",
        (unsigned long long)r->index, r->last, r->pull, (unsigned long long)r->seed, (unsigned long long)r->head_offset,
        (unsigned long long)r->layer_start, (unsigned long long)r->num_layers, (unsigned long long)r->src_head_start,
        (unsigned long long)r->dst_head_start, (unsigned long long)r->num_heads, (unsigned long long)r->token_first,
        (unsigned long long)r->token_count, (unsigned long long)r->src_bs, (unsigned long long)r->dst_bs);
    put_ids(&p, r->src_ids, r->token_count ? r->num_src_blocks : r->num_blocks);
    p += sprintf(p, " dst=");
    put_ids(&p, r->dst_ids, r->num_blocks);
    return t;
}

static bool get_ids(const char **p, const char *key, int64_t **out, uint64_t *n)
{
    size_t k = strlen(key);
    if (strncmp(*p, key, k) != 0)
        return false;
    *p += k;
    size_t cap = 16;
    int64_t *v = malloc(cap * sizeof(*v));
    *n = 0;
    *out = v;
    if (!v)
        return false;
    while (**p && **p != ' ') {
        char *end;
        long long x = strtoll(*p, &end, 10);
        if (end == *p || x < 0)
            return false;
        if (*n == cap) {
            int64_t *g = realloc(v, 2 * cap * sizeof(*v));
            if (!g)
                return false;
            *out = v = g;
            cap *= 2;
        }
        v[(*n)++] = x;
        *p = end;
        if (**p == ',')
            ++*p;
    }
    return true;
}

bool xpat_record_parse(const char *text, struct xpat_record *r)
{
    memset(r, 0, sizeof(*r));
    unsigned long long v[12];
    int last, pull, used = 0;
    if (!text ||
        sscanf(text,
               "xpat2 index=%llu last=%d pull=%d seed=%llu ho=%llu layers=%llu+%llu heads=%llu:%llu+%llu "
               "tokens=%llu+%llu bs=%llu:%llu %n",
               &v[0], &last, &pull, &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11],
               &used) != 14 ||
        used == 0)
        return false;
    r->token_first = v[8];
    r->token_count = v[9];
    r->src_bs = v[10];
    r->dst_bs = v[11];
    r->index = v[0];
    r->last = last != 0;
    r->pull = pull != 0;
    r->seed = v[1];
    r->head_offset = v[2];
    r->layer_start = v[3];
    r->num_layers = v[4];
    r->src_head_start = v[5];
    r->dst_head_start = v[6];
    r->num_heads = v[7];
    const char *p = text + used;
    uint64_t ns = 0, nd = 0;
    bool ok = get_ids(&p, "src=", &r->src_ids, &ns) && *p == ' ' && (++p, get_ids(&p, "dst=", &r->dst_ids, &nd)) &&
              *p == '\0' && (r->token_count ? r->src_bs && r->dst_bs : ns == nd);
    r->num_blocks = nd;
    r->num_src_blocks = ns;
    if (!ok)
        xpat_record_free(r);
    return ok;
}

void xpat_record_free(struct xpat_record *r)
{
    free(r->src_ids);
    free(r->dst_ids);
    r->src_ids = r->dst_ids = NULL;
}
