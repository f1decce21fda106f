/* The cache's operations: every argument checked (layers, slots, buffers,
 * overlaps) before the plugin runs.
 *
 * Layer 7 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "error.h"
#include "reserved.h"
#include "slots_last_wins.h"
#include "cache_internal.h"

/*
 * Every operation is validated completely here, before the plugin runs, so
 * that all backends refuse the same bad input with the same message and a
 * refused call writes nothing.
 */

static int need_op(const kvrt_cache *c, uint32_t op, const char *fn)
{
    if (!(c->backend->plugin->desc->ops & op))
        return kvrt_fail(KVRT_ERR_UNSUPPORTED, "%s: backend \"%s\" does not implement this operation", fn,
                         c->backend->plugin->desc->name);
    return KVRT_OK;
}

static int check_layer(const kvrt_cache *c, uint32_t layer, const char *fn)
{
    if (layer >= c->desc.num_layers)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: layer %u out of range; the cache has %llu layers (0..%llu)", fn, layer,
                         (unsigned long long)c->desc.num_layers, (unsigned long long)c->desc.num_layers - 1);
    return KVRT_OK;
}

/* Token-level operations need one state per token and a K/V cell. */
static int check_token_layer(const kvrt_cache *c, uint32_t layer, const char *fn)
{
    const struct kvrt_spec *s = c->layer_spec[layer];
    if (s->kind == KVRT_SPEC_STATE)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%s: layer \"%s\" is a state (Mamba-like) layer; token operations "
                         "need an attention or MLA layer (use gather/scatter/copy_blocks for state pages)",
                         fn, c->layer_names[layer]);
    if (s->tokens_per_state_num != s->tokens_per_state_den)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%s: layer \"%s\" stores one state per %llu/%llu tokens; token "
                         "operations need tokens_per_state 1",
                         fn, c->layer_names[layer], (unsigned long long)s->tokens_per_state_num,
                         (unsigned long long)s->tokens_per_state_den);
    return KVRT_OK;
}

static int check_buffer(const kvrt_cache *c, const kvrt_buffer *buf, uint64_t offset, uint64_t count, uint64_t elem,
                        const char *fn, const char *what)
{
    uint64_t bytes, end;
    if (!buf)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: %s buffer is NULL", fn, what);
    if (buf->backend->plugin != c->backend->plugin)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%s: %s buffer belongs to backend \"%s\", the cache to \"%s\"; copy "
                         "through host memory first",
                         fn, what, buf->backend->plugin->desc->name, c->backend->plugin->desc->name);
    if (kvrt_mul_overflow(count, elem, &bytes) || kvrt_add_overflow(bytes, offset, &end))
        return kvrt_fail(KVRT_ERR_OVERFLOW, "%s: %s size %llu x %llu bytes overflows", fn, what,
                         (unsigned long long)count, (unsigned long long)elem);
    if (end > buf->size)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: %s needs %llu bytes at offset %llu, but the buffer holds %llu", fn,
                         what, (unsigned long long)bytes, (unsigned long long)offset, (unsigned long long)buf->size);
    /* Buffers are separate allocations, so only the cache's own buffer can
     * overlap the cache.  A backend would copy between overlapping ranges
     * (undefined for memcpy) and its workers would race on them. */
    if (buf == c->buffer && bytes > 0)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%s: %s range [%llu, %llu) lies in the cache's own buffer, which "
                         "holds the cache allocation [0, %llu); pass a separate buffer",
                         fn, what, (unsigned long long)offset, (unsigned long long)end,
                         (unsigned long long)c->buffer->size);
    return KVRT_OK;
}

/* Two regions of one operation where at least one is written must not
 * share bytes: the result would depend on the backend's copy order. */
static int check_disjoint(const kvrt_buffer *a, uint64_t a_off, uint64_t a_bytes, const char *a_what,
                          const kvrt_buffer *b, uint64_t b_off, uint64_t b_bytes, const char *b_what, const char *fn)
{
    /* Both ranges were checked against their buffers, so the ends fit. */
    if (a != b || a_bytes == 0 || b_bytes == 0 || a_off + a_bytes <= b_off || b_off + b_bytes <= a_off)
        return KVRT_OK;
    return kvrt_fail(KVRT_ERR_INVALID,
                     "%s: %s range [%llu, %llu) and %s range [%llu, %llu) overlap in one "
                     "buffer; an output must not share bytes with another region of the operation",
                     fn, a_what, (unsigned long long)a_off, (unsigned long long)(a_off + a_bytes), b_what,
                     (unsigned long long)b_off, (unsigned long long)(b_off + b_bytes));
}

static int check_slots(const kvrt_cache *c, uint64_t n, const int64_t *slots, const char *fn)
{
    uint64_t limit;
    if (n && !slots)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: slots is NULL for %llu tokens", fn, (unsigned long long)n);
    if (kvrt_mul_overflow(c->desc.num_blocks, c->desc.block_size, &limit))
        return kvrt_fail(KVRT_ERR_OVERFLOW, "%s: number of slots overflows", fn);
    for (uint64_t t = 0; t < n; t++)
        if (slots[t] >= 0 && (uint64_t)slots[t] >= limit)
            return kvrt_fail(KVRT_ERR_INVALID,
                             "%s: slot %lld of token %llu is out of range; valid slots are "
                             "0..%llu (%llu blocks x %llu tokens), or negative to skip",
                             fn, (long long)slots[t], (unsigned long long)t, (unsigned long long)limit - 1,
                             (unsigned long long)c->desc.num_blocks, (unsigned long long)c->desc.block_size);
    return KVRT_OK;
}

static int check_blocks(const kvrt_cache *c, uint64_t n, const int64_t *ids, const char *fn, const char *what)
{
    if (n && !ids)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: %s is NULL for %llu entries", fn, what, (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint64_t)ids[i] >= c->desc.num_blocks)
            return kvrt_fail(KVRT_ERR_INVALID, "%s: block id %lld at %s[%llu] is out of range; valid ids are 0..%llu",
                             fn, (long long)ids[i], what, (unsigned long long)i,
                             (unsigned long long)c->desc.num_blocks - 1);
    return KVRT_OK;
}

/* The checks every per-token operation (write, read, decode) makes before
 * looking at its arguments: the backend has it, the layer exists and holds
 * one state per token. */
static int check_token_op(const kvrt_cache *c, uint32_t op, uint32_t layer, const char *fn)
{
    int status = need_op(c, op, fn);
    if (status == KVRT_OK)
        status = check_layer(c, layer, fn);
    if (status == KVRT_OK)
        status = check_token_layer(c, layer, fn);
    return status;
}

static int token_io(kvrt_cache *c, bool is_write, uint32_t layer, uint64_t num_tokens, const int64_t *slots,
                    kvrt_buffer *k, uint64_t k_offset, kvrt_buffer *v, uint64_t v_offset)
{
    const char *fn = is_write ? "kvrt_cache_write" : "kvrt_cache_read";
    if (!c)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: cache is NULL", fn);
    int status = check_token_op(c, is_write ? KVRT_OP_WRITE : KVRT_OP_READ, layer, fn);
    if (status != KVRT_OK)
        return status;
    const struct kvrt_plugin_layer *L = &c->layers[layer];
    uint64_t rows;
    if (kvrt_mul_overflow(num_tokens, L->head_slots, &rows))
        return kvrt_fail(KVRT_ERR_OVERFLOW, "%s: %llu tokens x %llu heads overflows", fn,
                         (unsigned long long)num_tokens, (unsigned long long)L->head_slots);
    uint64_t krow, vrow;
    if (kvrt_mul_overflow(L->head_size, L->elem_size, &krow) || kvrt_mul_overflow(L->head_size_v, L->elem_size, &vrow))
        return kvrt_fail(KVRT_ERR_OVERFLOW, "%s: head size overflows", fn);
    status = check_buffer(c, k, k_offset, rows, krow, fn, "K");
    if (status != KVRT_OK)
        return status;
    if (L->head_size_v == 0) {
        if (v)
            return kvrt_fail(KVRT_ERR_INVALID, "%s: layer \"%s\" has no V part (head_size_v 0); pass NULL for V", fn,
                             c->layer_names[layer]);
    } else {
        status = check_buffer(c, v, v_offset, rows, vrow, fn, "V");
        /* Reading writes both K and V; writing only reads them. */
        if (status == KVRT_OK && !is_write)
            status = check_disjoint(k, k_offset, rows * krow, "K", v, v_offset, rows * vrow, "V", fn);
        if (status != KVRT_OK)
            return status;
    }
    status = check_slots(c, num_tokens, slots, fn);
    if (status != KVRT_OK || num_tokens == 0)
        return status;
    int64_t *unique = NULL;
    if (is_write && (status = kvrt_slots_last_wins(num_tokens, slots, &unique)) != KVRT_OK)
        return status;
    const struct kvrt_plugin_descriptor *d = c->backend->plugin->desc;
    kvrt_plugin_error err;
    err.message[0] = '\0';
    status = (is_write ? d->write : d->read)(c->backend->dev, &c->desc, c->buffer->handle, layer, num_tokens,
                                             unique ? unique : slots, k->handle, k_offset, v ? v->handle : NULL,
                                             v_offset, &err);
    free(unique);
    return kvrt_plugin_status(c->backend->plugin, status, &err, is_write ? "write" : "read");
}

int kvrt_cache_write(kvrt_cache *c, uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_buffer *k,
                     uint64_t k_offset, kvrt_buffer *v, uint64_t v_offset)
{
    return token_io(c, true, layer, num_tokens, slots, k, k_offset, v, v_offset);
}

int kvrt_cache_read(kvrt_cache *c, uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_buffer *k,
                    uint64_t k_offset, kvrt_buffer *v, uint64_t v_offset)
{
    return token_io(c, false, layer, num_tokens, slots, k, k_offset, v, v_offset);
}

int kvrt_cache_copy_blocks(kvrt_cache *c, uint64_t num_pairs, const int64_t *pairs)
{
    const char *fn = "kvrt_cache_copy_blocks";
    if (!c)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: cache is NULL", fn);
    int status = need_op(c, KVRT_OP_COPY_BLOCKS, fn);
    uint64_t n2;
    if (status == KVRT_OK && kvrt_mul_overflow(num_pairs, 2, &n2))
        status = kvrt_fail(KVRT_ERR_OVERFLOW, "%s: %llu pairs overflows", fn, (unsigned long long)num_pairs);
    if (status == KVRT_OK)
        status = check_blocks(c, n2, pairs, fn, "pairs");
    if (status != KVRT_OK || num_pairs == 0)
        return status;
    kvrt_plugin_error err;
    err.message[0] = '\0';
    status =
        c->backend->plugin->desc->copy_blocks(c->backend->dev, &c->desc, c->buffer->handle, num_pairs, pairs, &err);
    return kvrt_plugin_status(c->backend->plugin, status, &err, "copy_blocks");
}

static int staging_io(kvrt_cache *c, bool is_gather, uint64_t n, const int64_t *ids, kvrt_buffer *staging,
                      uint64_t offset)
{
    const char *fn = is_gather ? "kvrt_cache_gather" : "kvrt_cache_scatter";
    if (!c)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: cache is NULL", fn);
    int status = need_op(c, is_gather ? KVRT_OP_GATHER : KVRT_OP_SCATTER, fn);
    /* The count is checked against the staging buffer before the id
     * array is read, so a wrong count fails before reading past the array. */
    if (status == KVRT_OK)
        status = check_buffer(c, staging, offset, n, c->staging_bytes_per_block, fn, "staging");
    if (status == KVRT_OK)
        status = check_blocks(c, n, ids, fn, "block_ids");
    if (status != KVRT_OK || n == 0)
        return status;
    const struct kvrt_plugin_descriptor *d = c->backend->plugin->desc;
    kvrt_plugin_error err;
    err.message[0] = '\0';
    status = (is_gather ? d->gather : d->scatter)(c->backend->dev, &c->desc, c->buffer->handle, n, ids, staging->handle,
                                                  offset, &err);
    return kvrt_plugin_status(c->backend->plugin, status, &err, is_gather ? "gather" : "scatter");
}

int kvrt_cache_gather(kvrt_cache *c, uint64_t n, const int64_t *ids, kvrt_buffer *staging, uint64_t offset)
{
    return staging_io(c, true, n, ids, staging, offset);
}

int kvrt_cache_scatter(kvrt_cache *c, uint64_t n, const int64_t *ids, kvrt_buffer *staging, uint64_t offset)
{
    return staging_io(c, false, n, ids, staging, offset);
}

void kvrt_decode_params_default(struct kvrt_decode_params *params)
{
    if (!params)
        return;
    memset(params, 0, sizeof(*params));
    params->scale = 1.0f;
}

int kvrt_cache_decode(kvrt_cache *c, uint32_t layer, const struct kvrt_decode_params *p)
{
    const char *fn = "kvrt_cache_decode";
    if (!c || !p)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: NULL argument", fn);
    int status = kvrt_check_reserved(p->reserved, sizeof(p->reserved), "kvrt_decode_params");
    if (status == KVRT_OK)
        status = check_token_op(c, KVRT_OP_DECODE, layer, fn);
    if (status != KVRT_OK)
        return status;
    const struct kvrt_plugin_layer *L = &c->layers[layer];
    uint32_t decode_types = kvrt_plugin_decode_dtypes(c->backend->plugin->desc);
    if (!(decode_types & (1u << L->dtype))) {
        char names[160] = "";
        size_t len = 0;
        for (int t = 0; t < KVRT_NUM_DTYPES; t++)
            if (decode_types & (1u << t)) {
                int n = snprintf(names + len, sizeof(names) - len, "%s%s", len ? ", " : "",
                                 kvrt_dtype_name((enum kvrt_dtype)t));
                if (n < 0 || (size_t)n >= sizeof(names) - len)
                    break;
                len += (size_t)n;
            }
        return kvrt_fail(KVRT_ERR_UNSUPPORTED,
                         "%s: backend \"%s\" does not decode %s (layer \"%s\"); its decode "
                         "computes on: %s",
                         fn, c->backend->plugin->desc->name, kvrt_dtype_name((enum kvrt_dtype)L->dtype),
                         c->layer_names[layer], names);
    }
    if (L->head_size_v == 0)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: layer \"%s\" has no V part (MLA); paged decode needs head_size_v > 0",
                         fn, c->layer_names[layer]);
    if (p->num_seqs == 0)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: num_seqs is 0; decode needs at least one sequence", fn);
    if (p->num_q_heads == 0 || p->num_q_heads % L->head_slots != 0)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%s: num_q_heads %u must be a positive multiple of the layer's %llu KV heads", fn,
                         p->num_q_heads, (unsigned long long)L->head_slots);
    if (!isfinite(p->scale) || p->scale == 0.0f)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: scale %g must be a finite non-zero number (usually 1/sqrt(head_size))",
                         fn, (double)p->scale);
    if (p->max_blocks_per_seq == 0 || !p->block_tables || !p->seq_lens)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: block_tables, seq_lens and max_blocks_per_seq > 0 are required", fn);
    uint64_t rows = (uint64_t)p->num_seqs * p->num_q_heads;
    status = check_buffer(c, p->q, p->q_offset, rows, L->head_size * L->elem_size, fn, "q");
    if (status == KVRT_OK)
        status = check_buffer(c, p->out, p->out_offset, rows, L->head_size_v * L->elem_size, fn, "out");
    if (status == KVRT_OK)
        status = check_disjoint(p->q, p->q_offset, rows * L->head_size * L->elem_size, "q", p->out, p->out_offset,
                                rows * L->head_size_v * L->elem_size, "out", fn);
    if (status != KVRT_OK)
        return status;
    uint64_t max_len = (uint64_t)p->max_blocks_per_seq * c->desc.block_size;
    for (uint32_t s = 0; s < p->num_seqs; s++) {
        int32_t len = p->seq_lens[s];
        if (len < 1 || (uint64_t)len > max_len)
            return kvrt_fail(KVRT_ERR_INVALID,
                             "%s: seq_lens[%u] = %d; valid lengths are 1..%llu (max_blocks_per_seq "
                             "%u x block_size %llu)",
                             fn, s, (int)len, (unsigned long long)max_len, p->max_blocks_per_seq,
                             (unsigned long long)c->desc.block_size);
        uint64_t used = ((uint64_t)len + c->desc.block_size - 1) / c->desc.block_size;
        for (uint64_t i = 0; i < used; i++) {
            int32_t b = p->block_tables[(uint64_t)s * p->max_blocks_per_seq + i];
            if (b < 0 || (uint64_t)b >= c->desc.num_blocks)
                return kvrt_fail(KVRT_ERR_INVALID,
                                 "%s: block_tables[%u][%llu] = %d is out of range; valid ids are "
                                 "0..%llu",
                                 fn, s, (unsigned long long)i, (int)b, (unsigned long long)c->desc.num_blocks - 1);
        }
    }
    struct kvrt_plugin_decode_args a = {
        .size = sizeof(a),
        .num_seqs = p->num_seqs,
        .num_q_heads = p->num_q_heads,
        .max_blocks_per_seq = p->max_blocks_per_seq,
        .q = p->q->handle,
        .q_offset = p->q_offset,
        .out = p->out->handle,
        .out_offset = p->out_offset,
        .block_tables = p->block_tables,
        .seq_lens = p->seq_lens,
        .scale = p->scale,
    };
    kvrt_plugin_error err;
    err.message[0] = '\0';
    status = c->backend->plugin->desc->decode(c->backend->dev, &c->desc, c->buffer->handle, layer, &a, &err);
    return kvrt_plugin_status(c->backend->plugin, status, &err, "decode");
}
