/*
 * The metadata blob: little-endian, fixed-width fields; every length is
 * bounded and the placement is rebuilt by kvrt and compared with the blob.
 *
 * Layer 1 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/spec.h>

#include "metadata.h"

static const uint8_t magic[8] = {'K', 'V', 'R', 'T', 'X', 'F', 'E', 'R'};

enum {
    MAX_SETS = 4096,
    MAX_LAYERS = 65536,
    MAX_ADDRESS = 1 << 20,
};

/* ---- writing --------------------------------------------------------------- */

struct writer {
    uint8_t *buf;
    size_t len, cap;
    bool failed;
};

static void put_bytes(struct writer *w, const void *src, size_t n)
{
    /* An empty blob (a memory kind with no remote key) may come as NULL. */
    if (w->failed || n == 0)
        return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 1024;
        while (cap < w->len + n)
            cap *= 2;
        uint8_t *b = realloc(w->buf, cap);
        if (!b) {
            w->failed = true;
            return;
        }
        w->buf = b;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, src, n);
    w->len += n;
}

static void put_u64(struct writer *w, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put_bytes(w, b, 8);
}

static void put_u32(struct writer *w, uint32_t v)
{
    uint8_t b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put_bytes(w, b, 4);
}

static void put_blob(struct writer *w, const void *p, size_t n)
{
    put_u32(w, (uint32_t)n);
    put_bytes(w, p, n);
}

int xfer_md_write(const struct xfer_desc *cache, const struct xfer_md_fields *f, bool sign, uint8_t **blob, size_t *len,
                  size_t *mac_offset)
{
    const kvrt_placement *p = cache->placement;
    struct writer w = {0};
    size_t nsets = kvrt_placement_num_sets(p);
    struct kvrt_placement_set set;
    kvrt_placement_get_set(p, 0, &set);
    uint64_t kernel = set.geometry.info.kernel_blocks_per_block > 1 ? set.geometry.info.kernel_block_size : 0;

    put_bytes(&w, magic, sizeof(magic));
    put_u32(&w, KVRT_XFER_METADATA_VERSION);
    put_u32(&w, (uint32_t)cache->layout);
    put_u64(&w, cache->num_blocks);
    put_u64(&w, cache->bytes);
    put_u64(&w, kernel);
    put_u32(&w, (uint32_t)kvrt_placement_num_groups(p));
    put_u32(&w, (uint32_t)nsets);
    for (size_t s = 0; s < nsets; s++) {
        kvrt_placement_get_set(p, s, &set);
        const struct kvrt_spec *sp = set.spec;
        put_u32(&w, (uint32_t)set.group);
        put_u32(&w, (uint32_t)set.num_layers);
        put_u32(&w, (uint32_t)sp->kind);
        put_u32(&w, (uint32_t)sp->dtype);
        put_u64(&w, sp->block_size);
        put_u64(&w, sp->num_kv_heads);
        put_u64(&w, sp->head_size);
        put_u64(&w, sp->head_size_v);
        put_u64(&w, sp->num_head_slots);
        put_u64(&w, sp->state_content_bytes);
        put_u64(&w, sp->tokens_per_state_num);
        put_u64(&w, sp->tokens_per_state_den);
        put_u64(&w, sp->page_size_padded);
        put_u64(&w, set.layer_stride);
        put_u64(&w, set.block_stride);
        put_u64(&w, set.offset);
    }
    put_u32(&w, f->addressable ? 1u : 0u);
    put_u64(&w, f->agent_id);
    put_u64(&w, f->chunk_bytes);
    put_bytes(&w, f->nonce, XFER_NONCE_BYTES);
    put_blob(&w, f->worker_addr, f->worker_addr_len);
    put_u32(&w, sign ? 1u : 0u);
    size_t at = w.len;
    if (sign) {
        uint8_t zero[XFER_MAC_BYTES] = {0};
        put_bytes(&w, zero, sizeof(zero));
    }
    if (w.failed) {
        free(w.buf);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_metadata_export: out of memory");
    }
    *blob = w.buf;
    *len = w.len;
    if (mac_offset)
        *mac_offset = at;
    return KVRT_OK;
}

/* ---- reading --------------------------------------------------------------- */

struct reader {
    const uint8_t *p;
    size_t len, pos;
    const char *failed_field;
};

static bool get_bytes(struct reader *r, size_t n, const uint8_t **out, const char *field)
{
    if (r->failed_field)
        return false;
    if (n > r->len - r->pos) {
        r->failed_field = field;
        return false;
    }
    *out = r->p + r->pos;
    r->pos += n;
    return true;
}

static uint64_t get_u64(struct reader *r, const char *field)
{
    const uint8_t *b;
    uint64_t v = 0;
    if (!get_bytes(r, 8, &b, field))
        return 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static uint32_t get_u32(struct reader *r, const char *field)
{
    const uint8_t *b;
    uint32_t v = 0;
    if (!get_bytes(r, 4, &b, field))
        return 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)b[i] << (8 * i);
    return v;
}

static const uint8_t *get_blob(struct reader *r, uint32_t *n, const char *field)
{
    const uint8_t *b = NULL;
    *n = get_u32(r, field);
    if (r->failed_field)
        return NULL;
    if (*n > MAX_ADDRESS) {
        r->failed_field = field;
        return NULL;
    }
    get_bytes(r, *n, &b, field);
    return b;
}

#define TRUNC(r)                                                                                                       \
    BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer metadata: truncated at byte %zu of %zu (field %s)", (r)->pos, (r)->len,     \
              (r)->failed_field)

struct set_rec {
    uint32_t group, num_layers;
    struct kvrt_spec spec;
    uint64_t layer_stride, block_stride, offset;
};

static int rebuild(enum kvrt_layout layout, uint64_t num_blocks, uint64_t kernel, uint32_t ngroups,
                   const struct set_rec *sets, uint32_t nsets, kvrt_placement **out)
{
    uint64_t total = 0;
    for (uint32_t s = 0; s < nsets; s++)
        total += sets[s].num_layers;
    struct kvrt_layer_entry *entries = calloc(total, sizeof(*entries));
    struct kvrt_group *groups = calloc(ngroups, sizeof(*groups));
    char(*names)[32] = calloc(total, sizeof(*names));
    int rc = KVRT_OK;
    if (!entries || !groups || !names) {
        rc = BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer metadata: out of memory for %llu layers", ULL(total));
        goto done;
    }
    uint64_t k = 0;
    for (uint32_t s = 0; s < nsets; s++) {
        if (sets[s].group >= ngroups || (s > 0 && sets[s].group < sets[s - 1].group)) {
            rc = BASE_FAIL(KVRT_ERR_INVALID,
                           "kvrt-xfer metadata: set %u names group %u; groups must be "
                           "0..%u in nondecreasing order",
                           s, sets[s].group, ngroups - 1);
            goto done;
        }
        if (groups[sets[s].group].num_layers == 0)
            groups[sets[s].group].layers = &entries[k];
        for (uint32_t l = 0; l < sets[s].num_layers; l++, k++) {
            snprintf(names[k], sizeof(names[k]), "layer.%llu", ULL(k));
            entries[k].name = names[k];
            entries[k].spec = sets[s].spec;
            groups[sets[s].group].num_layers++;
        }
    }
    rc = kvrt_placement_create(layout, groups, ngroups, num_blocks, kernel, out);
    if (rc != KVRT_OK) {
        char why[1024];
        snprintf(why, sizeof(why), "%s", kvrt_error_message());
        rc = BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer metadata: the described cache is not valid: %s", why);
    }
done:
    free(entries);
    free(groups);
    free(names);
    return rc;
}

static int check_placement(const kvrt_placement *p, const struct set_rec *sets, uint32_t nsets, uint64_t bytes)
{
    if (kvrt_placement_num_sets(p) != nsets)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer metadata: %u sets described, kvrt places %zu", nsets,
                         kvrt_placement_num_sets(p));
    if (kvrt_placement_size(p) != bytes)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt-xfer metadata: cache size %llu bytes in the blob, kvrt "
                         "computes %llu for its layout and specs",
                         ULL(bytes), ULL(kvrt_placement_size(p)));
    for (uint32_t s = 0; s < nsets; s++) {
        struct kvrt_placement_set set;
        kvrt_placement_get_set(p, s, &set);
        if (set.layer_stride != sets[s].layer_stride || set.block_stride != sets[s].block_stride ||
            set.offset != sets[s].offset || set.num_layers != sets[s].num_layers)
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "kvrt-xfer metadata: set %u (layer stride %llu, block stride "
                             "%llu, offset %llu) disagrees with kvrt's geometry (%llu, %llu, %llu)",
                             s, ULL(sets[s].layer_stride), ULL(sets[s].block_stride), ULL(sets[s].offset),
                             ULL(set.layer_stride), ULL(set.block_stride), ULL(set.offset));
    }
    return KVRT_OK;
}

int xfer_md_parse(const uint8_t *blob, size_t len, struct xfer_md *md)
{
    struct reader r = {blob, len, 0, NULL};
    const uint8_t *m;
    memset(md, 0, sizeof(*md));
    if (!blob)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer metadata: blob is NULL");
    if (!get_bytes(&r, sizeof(magic), &m, "magic"))
        return TRUNC(&r);
    if (memcmp(m, magic, sizeof(magic)) != 0)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer metadata: bad magic (not a kvrt-xfer metadata blob; "
                                           "it starts with \"KVRTXFER\")");
    uint32_t version = get_u32(&r, "version");
    if (r.failed_field)
        return TRUNC(&r);
    if (version != KVRT_XFER_METADATA_VERSION)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer metadata: format version %u; this kvrt reads version %u", version,
                         KVRT_XFER_METADATA_VERSION);
    uint32_t layout = get_u32(&r, "layout");
    uint64_t num_blocks = get_u64(&r, "num_blocks");
    uint64_t bytes = get_u64(&r, "cache_bytes");
    uint64_t kernel = get_u64(&r, "kernel_block_size");
    uint32_t ngroups = get_u32(&r, "num_groups");
    uint32_t nsets = get_u32(&r, "num_sets");
    if (r.failed_field)
        return TRUNC(&r);
    if (!kvrt_layout_valid((int)layout))
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer metadata: layout %u is not one of the six (0..5)", layout);
    if (nsets == 0 || nsets > MAX_SETS || ngroups == 0 || ngroups > nsets)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt-xfer metadata: %u sets in %u groups; valid are 1..%d sets "
                         "and 1..(sets) groups",
                         nsets, ngroups, MAX_SETS);
    if (num_blocks == 0)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer metadata: 0 blocks; a cache has at least one");
    struct set_rec *sets = calloc(nsets, sizeof(*sets));
    if (!sets)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer metadata: out of memory");
    uint64_t total_layers = 0;
    int rc = KVRT_OK;
    for (uint32_t s = 0; s < nsets && rc == KVRT_OK; s++) {
        struct set_rec *x = &sets[s];
        x->group = get_u32(&r, "set.group");
        x->num_layers = get_u32(&r, "set.num_layers");
        x->spec.kind = (enum kvrt_spec_kind)get_u32(&r, "spec.kind");
        x->spec.dtype = (enum kvrt_dtype)get_u32(&r, "spec.dtype");
        x->spec.block_size = get_u64(&r, "spec.block_size");
        x->spec.num_kv_heads = get_u64(&r, "spec.num_kv_heads");
        x->spec.head_size = get_u64(&r, "spec.head_size");
        x->spec.head_size_v = get_u64(&r, "spec.head_size_v");
        x->spec.num_head_slots = get_u64(&r, "spec.num_head_slots");
        x->spec.state_content_bytes = get_u64(&r, "spec.state_content_bytes");
        x->spec.tokens_per_state_num = get_u64(&r, "spec.tokens_per_state_num");
        x->spec.tokens_per_state_den = get_u64(&r, "spec.tokens_per_state_den");
        x->spec.page_size_padded = get_u64(&r, "spec.page_size_padded");
        x->layer_stride = get_u64(&r, "set.layer_stride");
        x->block_stride = get_u64(&r, "set.block_stride");
        x->offset = get_u64(&r, "set.offset");
        if (r.failed_field)
            rc = TRUNC(&r);
        else if (x->num_layers == 0 || x->num_layers > MAX_LAYERS || (total_layers += x->num_layers) > MAX_LAYERS)
            rc = BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer metadata: set %u has %u layers; valid are 1..%d in all", s,
                           x->num_layers, MAX_LAYERS);
    }
    uint32_t addressable = get_u32(&r, "addressable");
    md->f.agent_id = get_u64(&r, "agent_id");
    md->f.chunk_bytes = get_u64(&r, "chunk_bytes");
    const uint8_t *nonce = NULL;
    if (get_bytes(&r, XFER_NONCE_BYTES, &nonce, "nonce"))
        memcpy(md->f.nonce, nonce, XFER_NONCE_BYTES);
    md->f.worker_addr = get_blob(&r, &md->f.worker_addr_len, "worker_address");
    md->signed_len = r.pos + 4;
    uint32_t is_signed = get_u32(&r, "signed");
    if (is_signed == 1)
        get_bytes(&r, XFER_MAC_BYTES, &md->mac, "mac");
    if (rc == KVRT_OK && r.failed_field)
        rc = TRUNC(&r);
    if (rc == KVRT_OK && r.pos != len)
        rc = BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer metadata: %zu stray bytes after the end (%zu of %zu used)",
                       len - r.pos, r.pos, len);
    if (rc == KVRT_OK && addressable > 1)
        rc = BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer metadata: addressable flag %u; valid are 0 and 1", addressable);
    if (rc == KVRT_OK && is_signed > 1)
        rc = BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer metadata: signed flag %u; valid are 0 and 1", is_signed);
    if (rc == KVRT_OK && md->f.agent_id == 0)
        rc = BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer metadata: agent id 0; an agent's id is never 0");
    if (rc == KVRT_OK && md->f.worker_addr_len == 0)
        rc = BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer metadata: the worker address is empty");
    md->f.addressable = addressable == 1;
    md->is_signed = is_signed == 1;
    kvrt_placement *p = NULL;
    if (rc == KVRT_OK)
        rc = rebuild((enum kvrt_layout)layout, num_blocks, kernel, ngroups, sets, nsets, &p);
    if (rc == KVRT_OK)
        rc = check_placement(p, sets, nsets, bytes);
    free(sets);
    if (rc != KVRT_OK) {
        kvrt_placement_destroy(p);
        return rc;
    }
    rc = xfer_desc_init(&md->cache, p, true);
    if (rc == KVRT_OK && (md->f.chunk_bytes < md->cache.staging_per_block || md->f.chunk_bytes > XFER_MAX_CHUNK))
        rc = BASE_FAIL(KVRT_ERR_INVALID,
                       "kvrt-xfer metadata: staging chunks of %llu bytes; valid are one block's staging bytes "
                       "(%llu) up to %llu",
                       ULL(md->f.chunk_bytes), ULL(md->cache.staging_per_block), ULL(XFER_MAX_CHUNK));
    if (rc != KVRT_OK)
        xfer_desc_free(&md->cache);
    return rc;
}

void xfer_md_free(struct xfer_md *md)
{
    xfer_desc_free(&md->cache);
}

int kvrt_xfer_metadata_parse(const void *blob, size_t len, struct kvrt_xfer_metadata_info *info)
{
    struct xfer_md md;
    if (info && info->size != 0 && info->size != sizeof(*info))
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_metadata_parse: info size %zu; expected %zu or 0", info->size,
                         sizeof(*info));
    int rc = xfer_md_parse(blob, len, &md);
    if (rc != KVRT_OK)
        return rc;
    if (info) {
        memset(info, 0, sizeof(*info));
        info->size = sizeof(*info);
        info->version = KVRT_XFER_METADATA_VERSION;
        info->layout = md.cache.layout;
        info->num_blocks = md.cache.num_blocks;
        info->num_layers = md.cache.num_layers;
        info->num_sets = kvrt_placement_num_sets(md.cache.placement);
        info->cache_bytes = md.cache.bytes;
        info->cache_addressable = md.f.addressable;
        info->chunk_bytes = md.f.chunk_bytes;
        info->is_signed = md.is_signed;
    }
    xfer_md_free(&md);
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}
