/*
 * kvrt — the cache spec of one layer, and its derived quantities.
 *
 * Fill a spec with kvrt_spec_default() and then set what you need; optional
 * fields hold KVRT_UNSET until set.
 */
#ifndef KVRT_SPEC_H
#define KVRT_SPEC_H

#include <kvrt/common.h>
#include <kvrt/dtype.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Values are part of the ABI. */
enum kvrt_spec_kind {
    KVRT_SPEC_ATTENTION = 0, /* K and V per head and token */
    KVRT_SPEC_MLA = 1,       /* one latent vector per token, head_size_v == 0 */
    KVRT_SPEC_STATE = 2,     /* Mamba-like: one head slot, one state per block */
};

struct kvrt_spec {
    enum kvrt_spec_kind kind;
    enum kvrt_dtype dtype;
    uint64_t block_size;           /* tokens per block (manager block) */
    uint64_t num_kv_heads;         /* attention/MLA */
    uint64_t head_size;            /* attention/MLA, elements */
    uint64_t head_size_v;          /* KVRT_UNSET = head_size; 0 for MLA */
    uint64_t num_head_slots;       /* KVRT_UNSET = num_kv_heads */
    uint64_t state_content_bytes;  /* KVRT_UNSET = (head_size + head_size_v) * elem; required for state */
    uint64_t tokens_per_state_num; /* tokens_per_state = num / den, default 1/1 */
    uint64_t tokens_per_state_den;
    uint64_t page_size_padded; /* KVRT_UNSET = no padding */
    /* Room for fields of later API minors; must be zero, which
     * kvrt_spec_default() and designated initialisers both give. */
    uint8_t reserved[32];
};

/** Defaults: attention, fp16, tokens_per_state 1/1, optionals unset, sizes 0. */
KVRT_API void kvrt_spec_default(struct kvrt_spec *spec);

/* vLLM's default tokens per block (CacheConfig.block_size). */
#define KVRT_DEFAULT_BLOCK_SIZE 16

/**
 * Fill in what a caller may leave to kvrt, as the tool and the Python
 * package do: block_size 0 becomes KVRT_DEFAULT_BLOCK_SIZE, and
 * num_kv_heads 0 becomes 1 for an MLA spec (one latent vector per token)
 * and a state spec (one cell per block, no heads).  Everything else is left
 * as it is: an attention spec still needs its KV heads.
 * @return KVRT_OK; KVRT_ERR_INVALID for a NULL spec.
 */
KVRT_API int kvrt_spec_apply_defaults(struct kvrt_spec *spec);

/* Quantities derived from a spec (docs/design.md §3), for one kernel block. */
struct kvrt_spec_info {
    uint64_t elem_size;               /* bytes per element; 1 for state specs (opaque bytes) */
    uint64_t head_slots;              /* H */
    uint64_t states_per_block;        /* N for a whole manager block */
    uint64_t kernel_block_size;       /* k (== block_size when not split) */
    uint64_t kernel_blocks_per_block; /* r = block_size / k */
    uint64_t states_per_kernel_block; /* N(k) */
    uint64_t content_bytes;           /* C */
    uint64_t head_size;               /* D, elements (0 for state specs) */
    uint64_t head_size_v;             /* Dv, elements (0 for MLA and state) */
    uint64_t unpadded_page_size;      /* H * N * C of a manager block */
    uint64_t page_size;               /* page_size_padded, or the unpadded size */
};

/**
 * Validate a spec and derive its quantities.  kernel_block_size 0 means
 * "no splitting" (k = block_size).  N is rounded down per block
 * (floor(k * den / num)); a kernel split must keep every state of the block:
 * N(block_size) == r * N(k), else it is refused.
 * @return KVRT_OK; KVRT_ERR_INVALID for a zero size, a padded page smaller
 *   than the page or not a whole number of elements, a kernel block size
 *   that does not divide the block size, zero states per (kernel) block, a
 *   kernel split whose states do not add up or that splits a state spec,
 *   content bytes not divisible by the element size, head_size_v != 0 for
 *   MLA or == 0 for attention, an invalid kind or dtype;
 *   KVRT_ERR_OVERFLOW when a product does not fit in 64 bits.
 */
KVRT_API int kvrt_spec_derive(const struct kvrt_spec *spec, uint64_t kernel_block_size, struct kvrt_spec_info *out);

/** true when two specs describe the same per-layer cache: all fields equal
 *  once defaults are resolved (head_size_v and num_head_slots unset vs. their
 *  defaults, tokens_per_state reduced, a padded size equal to the page, the
 *  head fields of state specs ignored).  Leaves the error message alone. */
KVRT_API int kvrt_spec_equal(const struct kvrt_spec *a, const struct kvrt_spec *b);

/** Kind name ("attention", "mla", "state") or NULL. */
KVRT_API const char *kvrt_spec_kind_name(enum kvrt_spec_kind kind);

/**
 * Parse a kind name, exact and case-sensitive.
 * @return KVRT_OK, or KVRT_ERR_INVALID with a message that quotes the value
 *         and lists the valid names.
 */
KVRT_API int kvrt_spec_kind_parse(const char *name, enum kvrt_spec_kind *out);

/** The comma-separated kind names in enum order ("attention, mla, state"),
 *  for messages and help. */
KVRT_API const char *kvrt_spec_kind_valid_names(void);

#ifdef __cplusplus
}
#endif
#endif
