/*
 * The placements under test: small (every operation on every layout stays
 * in the milliseconds), yet each exercises one thing a backend can get
 * wrong: several layers, two sets of different head sizes in one
 * allocation, and manager blocks split into kernel blocks.
 */
#include "conformance.h"

const char *conf_shape_name(enum conf_shape shape)
{
    switch (shape) {
    case CONF_SHAPE_BASIC: return "basic";
    case CONF_SHAPE_TWO_SETS: return "two-sets";
    case CONF_SHAPE_SPLIT: return "kernel-split";
    case CONF_SHAPE_MLA: return "mla";
    case CONF_SHAPE_HYBRID: return "hybrid";
    }
    return "?";
}

/* Splitting needs a block to be one dense page: only LBHNC and LBNHC. */
bool conf_shape_applies(enum conf_shape shape, enum kvrt_layout layout)
{
    if (shape != CONF_SHAPE_SPLIT)
        return true;
    return layout == KVRT_LAYOUT_LBHNC || layout == KVRT_LAYOUT_LBNHC;
}

static struct kvrt_spec attention(enum kvrt_dtype dtype, uint64_t block_size, uint64_t heads, uint64_t head_size)
{
    struct kvrt_spec s;
    kvrt_spec_default(&s);
    s.dtype = dtype;
    s.block_size = block_size;
    s.num_kv_heads = heads;
    s.head_size = head_size;
    return s;
}

int conf_placement(enum conf_shape shape, enum kvrt_layout layout, enum kvrt_dtype dtype, bool split,
                   kvrt_placement **out)
{
    struct kvrt_layer_entry layers[4];
    size_t n = 2;
    uint64_t kernel = 0;
    switch (shape) {
    case CONF_SHAPE_BASIC:
        layers[0] = (struct kvrt_layer_entry){"layer.0", attention(dtype, 4, 2, 16)};
        layers[1] = (struct kvrt_layer_entry){"layer.1", attention(dtype, 4, 2, 16)};
        break;
    case CONF_SHAPE_TWO_SETS:
        /* Equal pages (H x C) so that every layout can hold both sets. */
        layers[0] = (struct kvrt_layer_entry){"wide.0", attention(dtype, 4, 2, 16)};
        layers[1] = (struct kvrt_layer_entry){"narrow.0", attention(dtype, 4, 4, 8)};
        layers[2] = (struct kvrt_layer_entry){"wide.1", attention(dtype, 4, 2, 16)};
        n = 3;
        break;
    case CONF_SHAPE_SPLIT:
        layers[0] = (struct kvrt_layer_entry){"layer.0", attention(dtype, 8, 2, 16)};
        layers[1] = (struct kvrt_layer_entry){"layer.1", attention(dtype, 8, 2, 16)};
        kernel = split ? 4 : 0;
        break;
    case CONF_SHAPE_MLA:
        /* head_size_v 0: V arguments are NULL, decode is refused. */
        for (int i = 0; i < 2; i++) {
            layers[i] = (struct kvrt_layer_entry){i ? "latent.1" : "latent.0", attention(dtype, 4, 1, 24)};
            layers[i].spec.kind = KVRT_SPEC_MLA;
            layers[i].spec.head_size_v = 0;
        }
        break;
    case CONF_SHAPE_HYBRID:
        /* Every page 2 heads x 4 tokens x 32 elements: any layout holds them.
         * Only block operations reach the last two layers. */
        layers[0] = (struct kvrt_layer_entry){"attn.0", attention(dtype, 4, 2, 16)};
        layers[1] = (struct kvrt_layer_entry){"ssm.0", attention(dtype, 4, 1, 0)};
        layers[1].spec.kind = KVRT_SPEC_STATE;
        /* Typed uint8 as the model readers type Mamba states, whether or not
         * the backend declares uint8: state bytes are opaque. */
        layers[1].spec.dtype = KVRT_DTYPE_UINT8;
        layers[1].spec.state_content_bytes = 2 * 4 * 32 * kvrt_dtype_size(dtype);
        layers[2] = (struct kvrt_layer_entry){"packed.0", attention(dtype, 4, 2, 32)};
        layers[2].spec.tokens_per_state_num = 2;
        layers[3] = (struct kvrt_layer_entry){"attn.1", attention(dtype, 4, 2, 16)};
        n = 4;
        break;
    }
    struct kvrt_group group = {layers, n};
    return kvrt_placement_create(layout, &group, 1, CONF_NUM_BLOCKS, kernel, out);
}
