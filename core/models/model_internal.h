/* Internal: what the model readers share (errors, field access, the
 * grouping of typed layers into vLLM-style groups) and the model itself,
 * behind the public handle of <kvrt/model.h>.
 *
 * Layer 4 of libkvrt (core/models/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_MODEL_INTERNAL_H
#define KVRT_CORE_MODEL_INTERNAL_H

#include <stdbool.h>

#include <jansson.h>

#include <kvrt/common.h>
#include <kvrt/model.h>

#define MODEL_MAX_NOTES 8u
#define MODEL_MAX_SETTINGS 12u

/* A group while it is built; published as struct model_group. */
struct model_group {
    char *name;
    char *what;
    uint64_t window;
    enum kvrt_model_usage usage;
    size_t num_layers;
    struct kvrt_layer_entry *layers; /* names owned by the model */
};

struct model_setting {
    char *name;
    char *value;
    char *source;
};

struct kvrt_model {
    char *name;
    char *source;
    char *format;
    char *architecture;
    uint64_t num_layers;
    uint64_t num_q_heads;
    size_t num_groups;
    struct model_group *groups;
    size_t num_notes;
    char *notes[MODEL_MAX_NOTES];
    size_t num_settings;
    struct model_setting settings[MODEL_MAX_SETTINGS];
    uint64_t max_model_len;
    char *max_model_len_source;
    /* The public view (model_publish), pointing into the fields above. */
    struct kvrt_model_info info;
    struct kvrt_model_group *info_groups;
    struct kvrt_group *placement_groups;
    struct kvrt_model_setting info_settings[MODEL_MAX_SETTINGS];
};

/* Fill m->info once the model is read; KVRT_ERR_NOMEM or KVRT_OK. */
int model_publish(struct kvrt_model *m);

/* The file being read, which every message names first. */
struct model_ctx {
    const char *file;
};

/* Set this thread's message to "<file>: <message>"; return `status`. */
int model_fail(const struct model_ctx *c, int status, const char *fmt, ...) KVRT_PRINTF(3, 4);

/* A JSON value's type, for messages ("a string", "null", ...). */
const char *model_json_type(const json_t *v);

/*
 * Field readers.  `where` prefixes the field name in messages ("" at top
 * level, "groups[1].spec." inside).  *_opt: absent or null leaves *out alone
 * and returns KVRT_OK with *found false.
 */
int model_get_u64(const struct model_ctx *c, const json_t *obj, const char *where, const char *key, uint64_t min,
                  uint64_t max, uint64_t *out);
int model_get_u64_opt(const struct model_ctx *c, const json_t *obj, const char *where, const char *key, uint64_t min,
                      uint64_t max, uint64_t *out, bool *found);
/* `text` as *out when it has no control characters; else an error naming
 * where/key and the offending byte. */
int model_check_text(const struct model_ctx *c, const char *text, const char *where, const char *key, const char **out);
int model_get_string_opt(const struct model_ctx *c, const json_t *obj, const char *where, const char *key,
                         const char **out);
int model_get_bool_opt(const struct model_ctx *c, const json_t *obj, const char *where, const char *key, bool *out,
                       bool *found);

/* One layer before grouping. */
struct model_layer {
    char *name;
    char *type; /* "full_attention", "sliding_attention", "linear_attention", "mamba", ... */
    char *what; /* for people */
    uint64_t window;
    struct kvrt_spec spec;
};

struct model_builder {
    struct model_layer *layers;
    size_t num_layers, cap;
};

/* Append a layer (strings copied). */
int model_builder_add(const struct model_ctx *c, struct model_builder *b, const char *name, const char *type,
                      const char *what, uint64_t window, const struct kvrt_spec *spec);
void model_builder_free(struct model_builder *b);

/* Group the layers like vLLM (see <kvrt/model.h>) into m->groups. */
int model_group_like_vllm(const struct model_ctx *c, struct model_builder *b, struct kvrt_model *m);

/* One explicit group (kvrt model files): the layers in order. */
int model_add_group(const struct model_ctx *c, struct kvrt_model *m, const char *name, const char *what,
                    uint64_t window, struct model_layer *layers, size_t n);

/* Record a decision for the reader. */
void model_note(struct kvrt_model *m, const char *fmt, ...) KVRT_PRINTF(2, 3);

/* Record (or replace, by name) a value the sizing used and its source. */
void model_setting(struct kvrt_model *m, const char *name, const char *value, const char *fmt, ...) KVRT_PRINTF(4, 5);

char *model_strdup(const char *s);

/* The layer kinds of a config.json. */
enum layer_kind { LK_FULL, LK_SLIDING, LK_CHUNKED, LK_LINEAR, LK_MAMBA, LK_KDA, NUM_LK };

/*
 * A config.json being read.  `cfg` is the language model's config: the
 * top level, or its "text_config" (`where` is then "text_config." so that
 * messages name the key as it is written in the file).
 */
struct hf {
    const struct model_ctx *c;
    const json_t *root;
    const json_t *cfg;
    const char *where;
    const char *model_type;
    const struct kvrt_model_options *opt;
    struct kvrt_model *m;
    uint64_t layers, heads, kv_heads, head_dim, block_size;
    enum kvrt_dtype model_dtype;    /* after vLLM's auto rule */
    enum kvrt_dtype kv_dtype;       /* the cache's element type */
    enum kvrt_dtype ssm_dtype;      /* temporal state of Mamba / GDN layers */
    enum kvrt_kv_cache_dtype cache; /* the KV-cache type asked for (flag or auto) */
    bool fp8_ds_mla;                /* DeepSeek-V3.2's 656-byte fp8 MLA entry */
    bool mla, sparse;               /* sparse: DeepSeek-V3.2's indexer (index_topk) */
    uint64_t mla_dim;
    uint64_t index_head_dim; /* indexer key cache entry, bytes */
    uint64_t window, chunk;
    enum layer_kind *kind;
};

/* model_hf_dtype.c: the model dtype (vLLM's auto rule), the KV-cache type,
 * the state dtypes. */
int hf_resolve_dtypes(struct hf *h);
/* model_hf_state.c: bytes of one layer's state, and what it is. */
int hf_state_bytes(struct hf *h, enum layer_kind kind, uint64_t *bytes, char *what, size_t size);
/* model_vllm.c: vLLM's block size (backend and hybrid rules) and
 * max_model_len. */
int hf_block_size(struct hf *h, uint64_t attn_bytes_per_token, uint64_t state_max);
int hf_max_model_len(struct hf *h);

/* The two formats. */
int model_parse_hf(const struct model_ctx *c, const json_t *root, const struct kvrt_model_options *opt,
                   struct kvrt_model *m);
int model_parse_kvrt(const struct model_ctx *c, const json_t *root, const struct kvrt_model_options *opt,
                     struct kvrt_model *m);

#endif
