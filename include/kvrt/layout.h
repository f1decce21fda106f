/*
 * kvrt — the six standardized KV-cache layouts.
 *
 * Logical axes are always [L, B, H, N, C].  A layout is only the physical
 * nesting order of those axes: stride_order[p] is the logical axis at
 * physical position p (0 = outermost).  Every property below is derived from
 * the stride order, never from the name.
 */
#ifndef KVRT_LAYOUT_H
#define KVRT_LAYOUT_H

#include <stdbool.h>
#include <kvrt/common.h>
#include <kvrt/settings.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Logical axes; values are part of the ABI. */
enum kvrt_axis {
    KVRT_AXIS_L = 0, /* layer */
    KVRT_AXIS_B = 1, /* block */
    KVRT_AXIS_H = 2, /* head slot */
    KVRT_AXIS_N = 3, /* state (token) */
    KVRT_AXIS_C = 4, /* content bytes */
};
#define KVRT_NUM_AXES 5

/* The layouts in table order; values are part of the ABI. */
enum kvrt_layout {
    KVRT_LAYOUT_LBHNC = 0,
    KVRT_LAYOUT_LBNHC = 1,
    KVRT_LAYOUT_LHBNC = 2,
    KVRT_LAYOUT_BLHNC = 3,
    KVRT_LAYOUT_BLNHC = 4,
    KVRT_LAYOUT_BHLNC = 5,
};
#define KVRT_NUM_LAYOUTS 6

/** true when layout is one of the six values. */
KVRT_API bool kvrt_layout_valid(int layout);

/** Canonical name ("LBHNC"), or NULL for an invalid value. */
KVRT_API const char *kvrt_layout_name(enum kvrt_layout layout);

/**
 * Parse a name: the six canonical names and the aliases NHD/NHC (LBNHC) and
 * HND/HNC (LBHNC); exact and case-sensitive.
 * @return KVRT_OK, or KVRT_ERR_INVALID with a message that quotes the value
 *         and lists the valid names.
 */
KVRT_API int kvrt_layout_parse(const char *name, enum kvrt_layout *out);

/** Physical order: out[p] = logical axis at physical position p. */
KVRT_API int kvrt_layout_stride_order(enum kvrt_layout layout, int out[KVRT_NUM_AXES]);

/** Physical order of a per-layer [B, H, N, C] view (axes 0..3). */
KVRT_API int kvrt_layout_layer_view_order(enum kvrt_layout layout, int out[4]);

/** L outermost. */
KVRT_API bool kvrt_layout_layer_compact(enum kvrt_layout layout);
/** B outermost. */
KVRT_API bool kvrt_layout_block_outermost(enum kvrt_layout layout);
/** The two outermost axes are {L, B}: each page is one contiguous run. */
KVRT_API bool kvrt_layout_block_compact(enum kvrt_layout layout);
/** The three innermost axes are H, N, C. */
KVRT_API bool kvrt_layout_block_contiguous(enum kvrt_layout layout);

/** The comma-separated list of every valid spelling, for messages. */
KVRT_API const char *kvrt_layout_valid_names(void);

/**
 * The six layouts, their orders and properties, the aliases and every
 * valid name as one JSON object, what `kvrt layouts --json` prints and
 * kvrt.layouts() returns (docs/cli.md).  *out is the caller's: kvrt_free it.
 */
KVRT_API int kvrt_layouts_json(char **out);

/**
 * Read VLLM_KV_CACHE_LAYOUT.  Unset: *is_set = false, KVRT_OK.  Set to
 * anything (the empty string included): it must parse, else
 * KVRT_ERR_INVALID with a message that quotes the value.
 */
KVRT_API int kvrt_layout_from_env(bool *is_set, enum kvrt_layout *out);

/** The layout used when nothing constrains the choice: the first of
 *  resolution's default preference (docs/design.md §7, step 1). */
KVRT_API enum kvrt_layout kvrt_layout_default(void);

/**
 * The layout for a caller that did not choose one: VLLM_KV_CACHE_LAYOUT
 * when set (it must parse, as for kvrt_layout_from_env), else
 * kvrt_layout_default().  *from_env (may be NULL) says which.
 */
KVRT_API int kvrt_layout_from_env_or_default(enum kvrt_layout *out, bool *from_env);

/**
 * The layout a caller uses, with where it came from: `name` when not NULL
 * (a name or alias as the user spelled it; source ARGUMENT), else
 * VLLM_KV_CACHE_LAYOUT when set (ENVIRONMENT), else kvrt_layout_default()
 * (DEFAULT).  Whichever gives the layout must parse.  *source may be NULL;
 * kvrt_setting_origin words it for output.
 * @return KVRT_OK; KVRT_ERR_INVALID quoting the name, or naming the
 *   variable and quoting its value, with the valid names.
 */
KVRT_API int kvrt_layout_choose(const char *name, enum kvrt_layout *out, enum kvrt_setting_source *source);

#ifdef __cplusplus
}
#endif
#endif
