/*
 * kvrt — geometry of one set of same-shaped layers under one layout.
 */
#ifndef KVRT_GEOMETRY_H
#define KVRT_GEOMETRY_H

#include <kvrt/common.h>
#include <kvrt/layout.h>
#include <kvrt/spec.h>

#ifdef __cplusplus
extern "C" {
#endif

struct kvrt_geometry_params {
    enum kvrt_layout layout;
    const struct kvrt_spec *spec;
    uint64_t num_layers;
    uint64_t num_blocks;        /* manager blocks */
    uint64_t kernel_block_size; /* 0 = no splitting */
    /* Byte strides fixed by the caller, logical [L, B, H, N, C] order;
     * KVRT_UNSET = computed.  The B stride is per manager block. */
    uint64_t fixed_strides[KVRT_NUM_AXES];
    /* Room for fields of later API minors; must be zero, which
     * kvrt_geometry_params_default() and designated initialisers both give. */
    uint8_t reserved[32];
};

/** Defaults: everything 0 / unset, layout LBNHC. */
KVRT_API void kvrt_geometry_params_default(struct kvrt_geometry_params *params);

struct kvrt_geometry {
    enum kvrt_layout layout;
    struct kvrt_spec_info info;
    uint64_t num_layers;
    uint64_t num_blocks;                   /* manager blocks */
    uint64_t shape_bytes[KVRT_NUM_AXES];   /* [L, B*r, H, N(k), C] */
    uint64_t strides_bytes[KVRT_NUM_AXES]; /* logical order; B per kernel block */
    uint64_t total_bytes;                  /* bytes spanned by the whole allocation */
    uint64_t layer_stride;                 /* bytes from layer l to l+1 */
    uint64_t block_stride;                 /* bytes from manager block b to b+1 */
};

/* A per-layer 4-D [B, H, N, C] view. */
struct kvrt_view {
    uint64_t offset_bytes;
    uint64_t elem_size;        /* 1 for state specs (views stay in bytes) */
    uint64_t shape[4];         /* C in elements */
    uint64_t strides[4];       /* in elements */
    uint64_t shape_bytes[4];   /* C in bytes */
    uint64_t strides_bytes[4]; /* C stride 1: the byte pair matches shape_bytes */
};

/**
 * Compute shape, strides, total size and the layer/block strides.
 * Refusals name the layout and say what to change: KVRT_ERR_REFUSED for
 * kernel splitting of a block that is not one dense unpadded page and for a
 * padded page whose outer axes are not L, B or of extent 1;
 * KVRT_ERR_INVALID for padding combined with kernel splitting, a fixed
 * stride below the span of the axes inside it (axes of extent > 1), a fixed
 * C stride other than 1, and the errors of kvrt_spec_derive.
 * A padded page is a floor: fixed inner strides may make the page longer.
 */
KVRT_API int kvrt_geometry_compute(const struct kvrt_geometry_params *params, struct kvrt_geometry *out);

/** The view of layer `layer` at base offset `base_offset`. */
KVRT_API int kvrt_geometry_layer_view(const struct kvrt_geometry *geom, uint64_t base_offset, uint64_t layer,
                                      struct kvrt_view *out);

/**
 * The geometry of `params` and the view of every layer as one JSON object:
 * what `kvrt plan --json` prints for flags and kvrt.plan() returns
 * (docs/cli.md).  layout_source (NULL: null) says where the layout came
 * from ("--layout", "VLLM_KV_CACHE_LAYOUT", "default") and budget_bytes
 * the budget the blocks were sized for (0: null); both are only echoed, as
 * for kvrt_model_plan_json.  *out is the caller's: kvrt_free it.
 * @return the errors of kvrt_geometry_compute; KVRT_ERR_OVERFLOW for a
 *   number above 2^63 - 1, which JSON readers do not all take exactly.
 */
KVRT_API int kvrt_geometry_json(const struct kvrt_geometry_params *params, const char *layout_source,
                                uint64_t budget_bytes, char **out);

#ifdef __cplusplus
}
#endif
#endif
