/*
 * Cache specs and the quantities derived from them (docs/design.md §3).
 *
 * Every rule of §2 is checked here, once, so that geometry and placement can
 * trust a derived kvrt_spec_info without re-validating it.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <kvrt/spec.h>

#include "checked.h"
#include "error.h"
#include "intmath.h"
#include "kernel_split.h"
#include "reserved.h"

static const char *const kind_names[] = {
    [KVRT_SPEC_ATTENTION] = "attention",
    [KVRT_SPEC_MLA] = "mla",
    [KVRT_SPEC_STATE] = "state",
};
#define NUM_KINDS (sizeof(kind_names) / sizeof(kind_names[0]))

void kvrt_spec_default(struct kvrt_spec *spec)
{
    if (!spec)
        return;
    memset(spec, 0, sizeof(*spec));
    spec->kind = KVRT_SPEC_ATTENTION;
    spec->dtype = KVRT_DTYPE_FP16;
    spec->head_size_v = KVRT_UNSET;
    spec->num_head_slots = KVRT_UNSET;
    spec->state_content_bytes = KVRT_UNSET;
    spec->tokens_per_state_num = 1;
    spec->tokens_per_state_den = 1;
    spec->page_size_padded = KVRT_UNSET;
}

int kvrt_spec_apply_defaults(struct kvrt_spec *spec)
{
    if (!spec)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_spec_apply_defaults: spec is NULL");
    if (spec->block_size == 0)
        spec->block_size = KVRT_DEFAULT_BLOCK_SIZE;
    if (spec->num_kv_heads == 0 && (spec->kind == KVRT_SPEC_MLA || spec->kind == KVRT_SPEC_STATE))
        spec->num_kv_heads = 1;
    return KVRT_OK;
}

const char *kvrt_spec_kind_name(enum kvrt_spec_kind kind)
{
    return (int)kind >= 0 && (size_t)kind < NUM_KINDS ? kind_names[kind] : NULL;
}

/* The lists in messages are written once from the table above. */
static char kind_list[64], kind_values[96];
static pthread_once_t kind_once = PTHREAD_ONCE_INIT;

static void write_kind_lists(void)
{
    size_t n = 0, v = 0;
    for (size_t i = 0; i < NUM_KINDS; i++) {
        n += (size_t)snprintf(kind_list + n, sizeof(kind_list) - n, "%s%s", i ? ", " : "", kind_names[i]);
        v += (size_t)snprintf(kind_values + v, sizeof(kind_values) - v, "%s%zu (%s)", i ? ", " : "", i, kind_names[i]);
    }
}

const char *kvrt_spec_kind_valid_names(void)
{
    pthread_once(&kind_once, write_kind_lists);
    return kind_list;
}

/* "0 (attention), 1 (mla), ...": the valid enum values, for messages. */
static const char *kind_values_text(void)
{
    pthread_once(&kind_once, write_kind_lists);
    return kind_values;
}

int kvrt_spec_kind_parse(const char *name, enum kvrt_spec_kind *out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_spec_kind_parse: out is NULL");
    for (size_t i = 0; name && i < NUM_KINDS; i++) {
        if (strcmp(name, kind_names[i]) == 0) {
            *out = (enum kvrt_spec_kind)i;
            return KVRT_OK;
        }
    }
    char quoted[128] = "NULL";
    if (name)
        kvrt_quote(quoted, sizeof(quoted), name);
    return kvrt_fail(KVRT_ERR_INVALID, "%s%s%s is not a spec kind; valid kinds (exact, case-sensitive) are %s",
                     name ? "\"" : "", quoted, name ? "\"" : "", kvrt_spec_kind_valid_names());
}

static int mul_checked(uint64_t a, const char *a_name, uint64_t b, const char *b_name, uint64_t *out)
{
    if (kvrt_mul_overflow(a, b, out))
        return kvrt_fail(KVRT_ERR_OVERFLOW,
                         "%s %llu * %s %llu does not fit in 64 bits; the spec describes an "
                         "impossibly large cache, use smaller values",
                         a_name, ULL(a), b_name, ULL(b));
    return KVRT_OK;
}

static int check_enums(const struct kvrt_spec *spec)
{
    if (!kvrt_spec_kind_name(spec->kind))
        return kvrt_fail(KVRT_ERR_INVALID, "spec kind %d is not valid; valid kinds are %s", (int)spec->kind,
                         kind_values_text());
    if (kvrt_dtype_size(spec->dtype) == 0) {
        char list[256];
        size_t n = 0;
        for (int i = 0; i < KVRT_NUM_DTYPES && n < sizeof(list); i++)
            n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%d (%s)", i ? ", " : "", i,
                                  kvrt_dtype_name((enum kvrt_dtype)i));
        return kvrt_fail(KVRT_ERR_INVALID, "spec dtype %d is not valid; valid dtypes are %s", (int)spec->dtype, list);
    }
    return KVRT_OK;
}

/* H and C of a state spec: one opaque cell of state_content_bytes per block. */
static int derive_state_cell(const struct kvrt_spec *spec, struct kvrt_spec_info *info)
{
    if (spec->num_head_slots != KVRT_UNSET && spec->num_head_slots != 1)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "num_head_slots %llu is not valid for a state spec: a state spec has "
                         "exactly one head slot; leave num_head_slots unset or set it to 1",
                         ULL(spec->num_head_slots));
    if (spec->state_content_bytes == KVRT_UNSET)
        return kvrt_fail(KVRT_ERR_INVALID, "state spec without state_content_bytes: set it to the sum of the "
                                           "bytes of the layer's state tensors");
    if (spec->state_content_bytes == 0)
        return kvrt_fail(KVRT_ERR_INVALID, "state_content_bytes 0 is not valid: a state spec needs at least 1 byte "
                                           "of state per block");
    /* State content mixes tensors of different types, so views of it stay
     * in bytes: the element size of a state spec is 1. */
    info->elem_size = 1;
    info->head_slots = 1;
    info->content_bytes = spec->state_content_bytes;
    info->head_size = 0;
    info->head_size_v = 0;
    return KVRT_OK;
}

/* H and C of an attention or MLA spec: K then V of each head slot and state. */
static int derive_head_cell(const struct kvrt_spec *spec, struct kvrt_spec_info *info)
{
    const char *kind = kvrt_spec_kind_name(spec->kind);
    uint64_t hsv = spec->head_size_v;
    int rc;

    info->elem_size = kvrt_dtype_size(spec->dtype);
    if (spec->num_kv_heads == 0)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "num_kv_heads 0 is not valid for an %s spec: it needs at least 1 KV head; set "
                         "num_kv_heads to the model's KV heads per layer (per rank)",
                         kind);
    if (spec->head_size == 0)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "head_size 0 is not valid for an %s spec: it needs at least 1 element per head; "
                         "set head_size to the K head dimension",
                         kind);
    if (spec->kind == KVRT_SPEC_MLA) {
        if (hsv == KVRT_UNSET)
            hsv = 0;
        if (hsv != 0)
            return kvrt_fail(KVRT_ERR_INVALID,
                             "head_size_v %llu is not valid for an mla spec: MLA stores one latent "
                             "vector per token, so head_size_v must be 0 or unset; use kind attention "
                             "for separate K and V vectors",
                             ULL(hsv));
    } else {
        if (hsv == KVRT_UNSET)
            hsv = spec->head_size;
        if (hsv == 0)
            return kvrt_fail(KVRT_ERR_INVALID,
                             "head_size_v 0 is not valid for an attention spec, which stores K and V; "
                             "leave it unset (= head_size %llu), give the V size, or use kind mla for "
                             "a single latent vector",
                             ULL(spec->head_size));
    }
    info->head_size = spec->head_size;
    info->head_size_v = hsv;

    info->head_slots = spec->num_head_slots == KVRT_UNSET ? spec->num_kv_heads : spec->num_head_slots;
    if (info->head_slots == 0)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "num_head_slots 0 is not valid: a cache needs at least 1 head slot; leave it "
                         "unset to use num_kv_heads (%llu)",
                         ULL(spec->num_kv_heads));

    if (spec->state_content_bytes != KVRT_UNSET) {
        if (spec->state_content_bytes == 0)
            return kvrt_fail(KVRT_ERR_INVALID,
                             "state_content_bytes 0 is not valid: a cell needs at least 1 byte; leave it "
                             "unset to use (head_size + head_size_v) * element size");
        if (spec->state_content_bytes % info->elem_size != 0)
            return kvrt_fail(KVRT_ERR_INVALID,
                             "state_content_bytes %llu is not a multiple of the %s element size %llu; "
                             "views count content in elements, so use a multiple of %llu",
                             ULL(spec->state_content_bytes), kvrt_dtype_name(spec->dtype), ULL(info->elem_size),
                             ULL(info->elem_size));
        info->content_bytes = spec->state_content_bytes;
        return KVRT_OK;
    }
    uint64_t elems;
    if (kvrt_add_overflow(spec->head_size, hsv, &elems))
        return kvrt_fail(KVRT_ERR_OVERFLOW,
                         "head_size %llu + head_size_v %llu does not fit in 64 bits; use smaller head sizes",
                         ULL(spec->head_size), ULL(hsv));
    rc = mul_checked(elems, "(head_size + head_size_v)", info->elem_size, "element size", &info->content_bytes);
    return rc;
}

/* N for `tokens` tokens: floor(tokens / tokens_per_state). */
static int states_for(const struct kvrt_spec *spec, uint64_t tokens, const char *what, uint64_t *n)
{
    uint64_t scaled;
    if (spec->kind == KVRT_SPEC_STATE) {
        *n = 1;
        return KVRT_OK;
    }
    int rc = mul_checked(tokens, what, spec->tokens_per_state_den, "tokens_per_state denominator", &scaled);
    if (rc != KVRT_OK)
        return rc;
    *n = scaled / spec->tokens_per_state_num;
    return KVRT_OK;
}

static int derive_states(const struct kvrt_spec *spec, uint64_t kernel_block_size, struct kvrt_spec_info *info)
{
    const uint64_t bs = spec->block_size;
    const uint64_t num = spec->tokens_per_state_num, den = spec->tokens_per_state_den;
    const uint64_t k = kernel_block_size ? kernel_block_size : bs;
    int rc;

    rc = kvrt_kernel_split_block(spec, kernel_block_size, info);
    if (rc != KVRT_OK)
        return rc;

    rc = states_for(spec, bs, "block_size", &info->states_per_block);
    if (rc != KVRT_OK)
        return rc;
    if (info->states_per_block == 0)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "tokens_per_state %llu/%llu is larger than block_size %llu, so a block would "
                         "hold zero states; use tokens_per_state <= block_size or a larger block_size",
                         ULL(num), ULL(den), ULL(bs));
    rc = states_for(spec, k, "kernel_block_size", &info->states_per_kernel_block);
    if (rc != KVRT_OK)
        return rc;
    if (info->states_per_kernel_block == 0)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "kernel_block_size %llu holds zero states at tokens_per_state %llu/%llu; use "
                         "a kernel block of at least %llu tokens",
                         ULL(k), ULL(num), ULL(den), ULL(num / den + (num % den != 0)));
    return kvrt_kernel_split_states(spec, info);
}

static int derive_page(const struct kvrt_spec *spec, struct kvrt_spec_info *info)
{
    uint64_t hn;
    if (kvrt_mul_overflow(info->head_slots, info->states_per_block, &hn) ||
        kvrt_mul_overflow(hn, info->content_bytes, &info->unpadded_page_size))
        return kvrt_fail(KVRT_ERR_OVERFLOW,
                         "the page H * N * C = head slots %llu * states per block %llu * content bytes "
                         "%llu does not fit in 64 bits; use fewer heads, smaller heads or smaller blocks",
                         ULL(info->head_slots), ULL(info->states_per_block), ULL(info->content_bytes));

    info->page_size = info->unpadded_page_size;
    if (spec->page_size_padded == KVRT_UNSET)
        return KVRT_OK;
    if (spec->page_size_padded < info->unpadded_page_size)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "page_size_padded %llu is smaller than the page (H %llu * N %llu * C %llu = "
                         "%llu bytes); use at least %llu, or leave it unset for no padding",
                         ULL(spec->page_size_padded), ULL(info->head_slots), ULL(info->states_per_block),
                         ULL(info->content_bytes), ULL(info->unpadded_page_size), ULL(info->unpadded_page_size));
    /* Padding strides a whole axis, and views count strides in elements. */
    if (spec->page_size_padded % info->elem_size != 0)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "page_size_padded %llu is not a multiple of the %s element size %llu; use a "
                         "multiple of %llu",
                         ULL(spec->page_size_padded), kvrt_dtype_name(spec->dtype), ULL(info->elem_size),
                         ULL(info->elem_size));
    info->page_size = spec->page_size_padded;
    return KVRT_OK;
}

int kvrt_spec_derive(const struct kvrt_spec *spec, uint64_t kernel_block_size, struct kvrt_spec_info *out)
{
    struct kvrt_spec_info info;
    int rc;

    if (!spec || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_spec_derive: spec and out must not be NULL");
    memset(&info, 0, sizeof(info));
    rc = kvrt_check_reserved(spec->reserved, sizeof(spec->reserved), "kvrt_spec");
    if (rc != KVRT_OK)
        return rc;
    rc = check_enums(spec);
    if (rc != KVRT_OK)
        return rc;
    if (spec->block_size == 0)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "block_size 0 is not valid: a block holds at least 1 token; set block_size to the "
                         "tokens per block (e.g. 16)");
    if (spec->tokens_per_state_num == 0 || spec->tokens_per_state_den == 0)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "tokens_per_state %llu/%llu is not valid: both parts must be at least 1 "
                         "(1/1 = one state per token)",
                         ULL(spec->tokens_per_state_num), ULL(spec->tokens_per_state_den));

    rc = spec->kind == KVRT_SPEC_STATE ? derive_state_cell(spec, &info) : derive_head_cell(spec, &info);
    if (rc != KVRT_OK)
        return rc;
    rc = derive_states(spec, kernel_block_size, &info);
    if (rc != KVRT_OK)
        return rc;
    rc = derive_page(spec, &info);
    if (rc != KVRT_OK)
        return rc;
    *out = info;
    return KVRT_OK;
}

/* A spec with every default resolved, so that two spellings of one cache
 * (head_size_v unset vs. equal to head_size, tokens_per_state 2/2 vs. 1/1,
 * a padded size equal to the page) compare equal. */
struct resolved_spec {
    int kind, dtype;
    uint64_t block_size, num_kv_heads, head_size, head_size_v;
    uint64_t tps_num, tps_den;
    uint64_t head_slots, content_bytes, page_size;
};

static void resolve(const struct kvrt_spec *s, struct resolved_spec *r)
{
    struct kvrt_spec_info info;
    memset(r, 0, sizeof(*r));
    r->kind = (int)s->kind;
    r->dtype = (int)s->dtype;
    r->block_size = s->block_size;
    if (s->kind != KVRT_SPEC_STATE) {
        r->num_kv_heads = s->num_kv_heads;
        r->head_size = s->head_size;
        r->head_size_v = s->head_size_v;
        r->head_slots = s->num_head_slots;
        uint64_t g = kvrt_gcd_u64(s->tokens_per_state_num, s->tokens_per_state_den);
        r->tps_num = g ? s->tokens_per_state_num / g : s->tokens_per_state_num;
        r->tps_den = g ? s->tokens_per_state_den / g : s->tokens_per_state_den;
    }
    r->content_bytes = s->state_content_bytes;
    r->page_size = s->page_size_padded;

    /* kvrt_spec_equal is a query: it must not replace the caller's last
     * error message, so a failed derivation is compared field by field. */
    char saved[2048];
    snprintf(saved, sizeof(saved), "%s", kvrt_error_message());
    if (kvrt_spec_derive(s, 0, &info) == KVRT_OK) {
        r->head_size_v = info.head_size_v;
        r->head_slots = info.head_slots;
        r->content_bytes = info.content_bytes;
        r->page_size = info.page_size;
    }
    kvrt_error_set("%s", saved);
}

int kvrt_spec_equal(const struct kvrt_spec *a, const struct kvrt_spec *b)
{
    struct resolved_spec ra, rb;
    if (!a || !b)
        return a == b;
    resolve(a, &ra);
    resolve(b, &rb);
    return ra.kind == rb.kind && ra.dtype == rb.dtype && ra.block_size == rb.block_size &&
           ra.num_kv_heads == rb.num_kv_heads && ra.head_size == rb.head_size && ra.head_size_v == rb.head_size_v &&
           ra.tps_num == rb.tps_num && ra.tps_den == rb.tps_den && ra.head_slots == rb.head_slots &&
           ra.content_bytes == rb.content_bytes && ra.page_size == rb.page_size;
}
