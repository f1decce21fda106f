/* <kvrt/model.h>: reading a model file (which format it is, the file
 * itself), a model of one spec, and the model's public description.
 *
 * Layer 4 of libkvrt (core/models/; CONTRIBUTING.md, "Where things live").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kvrt/common.h>
#include <kvrt/spec.h>

#include "error.h"
#include "model_internal.h"
#include "reserved.h"

/* Larger than any published config; a guard against reading a wrong file. */
#define MODEL_MAX_FILE_BYTES (16u << 20)

void kvrt_model_options_default(struct kvrt_model_options *opt)
{
    if (!opt)
        return;
    memset(opt, 0, sizeof(*opt));
    opt->dtype = KVRT_DTYPE_BF16;
}

void kvrt_model_destroy(kvrt_model *m)
{
    if (!m)
        return;
    for (size_t g = 0; g < m->num_groups; g++) {
        for (size_t i = 0; i < m->groups[g].num_layers; i++)
            free((char *)m->groups[g].layers[i].name);
        free(m->groups[g].layers);
        free(m->groups[g].name);
        free(m->groups[g].what);
    }
    for (size_t i = 0; i < m->num_notes; i++)
        free(m->notes[i]);
    for (size_t i = 0; i < m->num_settings; i++) {
        free(m->settings[i].name);
        free(m->settings[i].value);
        free(m->settings[i].source);
    }
    free(m->max_model_len_source);
    free(m->groups);
    free(m->info_groups);
    free(m->placement_groups);
    free(m->name);
    free(m->source);
    free(m->format);
    free(m->architecture);
    free(m);
}

int model_publish(struct kvrt_model *m)
{
    m->info_groups = calloc(m->num_groups ? m->num_groups : 1, sizeof(*m->info_groups));
    m->placement_groups = calloc(m->num_groups ? m->num_groups : 1, sizeof(*m->placement_groups));
    if (!m->info_groups || !m->placement_groups)
        return KVRT_ERR_NOMEM;
    for (size_t g = 0; g < m->num_groups; g++) {
        const struct model_group *src = &m->groups[g];
        m->info_groups[g] = (struct kvrt_model_group){
            .name = src->name,
            .what = src->what,
            .window = src->window,
            .usage = src->usage,
            .num_layers = src->num_layers,
            .layers = src->layers,
        };
        m->placement_groups[g] = (struct kvrt_group){src->layers, src->num_layers};
    }
    for (size_t i = 0; i < m->num_settings; i++)
        m->info_settings[i] = (struct kvrt_model_setting){
            .name = m->settings[i].name, .value = m->settings[i].value, .source = m->settings[i].source};
    m->info = (struct kvrt_model_info){
        .name = m->name,
        .source = m->source,
        .format = m->format,
        .architecture = m->architecture,
        .num_layers = m->num_layers,
        .num_q_heads = m->num_q_heads,
        .max_model_len = m->max_model_len,
        .max_model_len_source = m->max_model_len_source,
        .num_groups = m->num_groups,
        .groups = m->info_groups,
        .placement_groups = m->placement_groups,
        .num_settings = m->num_settings,
        .settings = m->info_settings,
        .num_notes = m->num_notes,
        .notes = (const char *const *)m->notes,
    };
    return KVRT_OK;
}

const struct kvrt_model_info *kvrt_model_get_info(const kvrt_model *m)
{
    return m ? &m->info : NULL;
}

/* Options an engine filled: reserved bytes zero, values in range. */
static int check_options(const struct kvrt_model_options *opt)
{
    int rc = kvrt_check_reserved(opt->reserved, sizeof(opt->reserved), "kvrt_model_options");
    if (rc != KVRT_OK)
        return rc;
    if ((unsigned)opt->kv_cache_dtype >= KVRT_NUM_KV_CACHE_DTYPES)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "kvrt_model_options.kv_cache_dtype is %d; valid values are 0 to %d (enum "
                         "kvrt_kv_cache_dtype)",
                         (int)opt->kv_cache_dtype, KVRT_NUM_KV_CACHE_DTYPES - 1);
    if ((unsigned)opt->attention_backend >= KVRT_NUM_ATTENTION_BACKENDS)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "kvrt_model_options.attention_backend is %d; valid values are 0 to %d (enum "
                         "kvrt_attention_backend)",
                         (int)opt->attention_backend, KVRT_NUM_ATTENTION_BACKENDS - 1);
    if (opt->dtype_given && !kvrt_dtype_name(opt->dtype))
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_model_options.dtype is %d, not an enum kvrt_dtype", (int)opt->dtype);
    return KVRT_OK;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int kvrt_model_parse(const char *json, size_t len, const char *name, const struct kvrt_model_options *opt,
                     kvrt_model **out)
{
    struct model_ctx c = {name ? name : "(model)"};
    struct kvrt_model_options defaults;
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_model_parse: out is NULL");
    *out = NULL;
    if (!json)
        return model_fail(&c, KVRT_ERR_INVALID, "no model text to parse");
    if (!opt) {
        kvrt_model_options_default(&defaults);
        opt = &defaults;
    }
    int rc = check_options(opt);
    if (rc != KVRT_OK)
        return rc;
    json_error_t jerr;
    /* No duplicate keys: a config with two "num_hidden_layers" is ambiguous. */
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return model_fail(&c, KVRT_ERR_INVALID, "line %d, column %d: not valid JSON: %s", jerr.line, jerr.column,
                          jerr.text);
    if (!json_is_object(root)) {
        rc = model_fail(&c, KVRT_ERR_INVALID,
                        "the file is %s; a model file is a JSON object "
                        "(a Hugging Face config.json or a kvrt model file)",
                        model_json_type(root));
        json_decref(root);
        return rc;
    }
    struct kvrt_model *m = calloc(1, sizeof(*m));
    if (!m || !(m->source = model_strdup(c.file)) || !(m->name = model_strdup(base_name(c.file)))) {
        rc = model_fail(&c, KVRT_ERR_NOMEM, "out of memory reading the model");
    } else {
        /* A kvrt model file says so; anything else is read as a config.json. */
        const json_t *format = json_object_get(root, "format");
        if (format)
            rc = model_parse_kvrt(&c, root, opt, m);
        else
            rc = model_parse_hf(&c, root, opt, m);
    }
    json_decref(root);
    if (rc == KVRT_OK && (!m->format || !m->architecture || model_publish(m) != KVRT_OK))
        rc = model_fail(&c, KVRT_ERR_NOMEM, "out of memory reading the model");
    if (rc != KVRT_OK) {
        kvrt_model_destroy(m);
        return rc;
    }
    kvrt_clear_error();
    *out = m;
    return KVRT_OK;
}

int kvrt_model_open(const char *path, const struct kvrt_model_options *opt, kvrt_model **out)
{
    char joined[4096];
    struct stat st;
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_model_open: out is NULL");
    *out = NULL;
    if (!path)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_model_open: path is NULL; give a config.json, a model folder or "
                                           "a kvrt model file");
    struct model_ctx c = {path};
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        /* A downloaded model folder: its config.json describes it. */
        int len = snprintf(joined, sizeof(joined), "%s/config.json", path);
        if (len < 0 || (size_t)len >= sizeof(joined))
            return model_fail(&c, KVRT_ERR_INVALID,
                              "the model folder path is %zu bytes; with /config.json "
                              "at most %zu fit",
                              strlen(path), sizeof(joined) - 1);
        path = joined;
        c.file = path;
    }
    /* O_NONBLOCK: opening a FIFO must not wait for a writer.  The type is
     * checked on the opened file, so it cannot change after the check. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return model_fail(&c, KVRT_ERR_INVALID,
                          "cannot open the model file: %s; give a config.json, "
                          "a model folder or a kvrt model file",
                          strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        bool known = fstat(fd, &st) == 0;
        close(fd);
        return model_fail(&c, KVRT_ERR_INVALID,
                          "the model file is %s, not a regular file; give a config.json, "
                          "a model folder or a kvrt model file",
                          !known                 ? "of unknown type"
                          : S_ISFIFO(st.st_mode) ? "a FIFO"
                          : S_ISCHR(st.st_mode)  ? "a character device"
                          : S_ISSOCK(st.st_mode) ? "a socket"
                          : S_ISBLK(st.st_mode)  ? "a block device"
                          : S_ISDIR(st.st_mode)  ? "a folder"
                                                 : "of another kind");
    }
    /* Back to blocking reads: the file is regular, so reads never wait. */
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return model_fail(&c, KVRT_ERR_NOMEM, "cannot read the model file: %s", strerror(errno));
    }
    char *buf = malloc(MODEL_MAX_FILE_BYTES + 1);
    size_t n = buf ? fread(buf, 1, MODEL_MAX_FILE_BYTES + 1, f) : 0;
    bool failed = ferror(f);
    fclose(f);
    int rc;
    if (!buf)
        rc = model_fail(&c, KVRT_ERR_NOMEM, "out of memory reading the model file");
    else if (failed)
        rc = model_fail(&c, KVRT_ERR_INVALID, "cannot read the model file");
    else if (n > MODEL_MAX_FILE_BYTES)
        rc = model_fail(&c, KVRT_ERR_INVALID,
                        "the file is larger than %u MiB; a model file is a "
                        "small JSON object",
                        MODEL_MAX_FILE_BYTES >> 20);
    else
        rc = kvrt_model_parse(buf, n, path, opt, out);
    free(buf);
    return rc;
}

int kvrt_model_mixed_shapes(const kvrt_model *m)
{
    /* The one rule (kvrt_placement_mixed_shapes); a model that loaded has
     * valid specs, and the flag stays 0 for a NULL model. */
    bool mixed = false;
    if (m && m->placement_groups)
        (void)kvrt_placement_mixed_shapes(m->placement_groups, m->num_groups, &mixed);
    return mixed ? 1 : 0;
}

int kvrt_model_from_spec(const struct kvrt_spec *spec, uint64_t num_layers, const char *name, kvrt_model **out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_model_from_spec: out is NULL");
    *out = NULL;
    if (!spec)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_model_from_spec: spec is NULL");
    if (num_layers < 1 || num_layers > KVRT_MODEL_MAX_LAYERS)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_model_from_spec: %llu layers; valid: 1 to %u",
                         (unsigned long long)num_layers, KVRT_MODEL_MAX_LAYERS);
    struct kvrt_spec_info in;
    int rc = kvrt_spec_derive(spec, 0, &in);
    if (rc != KVRT_OK)
        return rc;
    if (!name)
        name = "spec";
    struct kvrt_model *m = calloc(1, sizeof(*m));
    struct model_group *g = calloc(1, sizeof(*g));
    struct kvrt_layer_entry *layers = calloc(num_layers, sizeof(*layers));
    if (!m || !g || !layers) {
        free(m);
        free(g);
        free(layers);
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory building a model of %llu layers",
                         (unsigned long long)num_layers);
    }
    m->groups = g;
    g->layers = layers;
    m->num_groups = 1;
    const bool state = spec->kind == KVRT_SPEC_STATE;
    size_t len = strlen(name) + 3;
    bool ok = (m->name = model_strdup(name)) && (m->source = malloc(len)) && (m->format = model_strdup("spec")) &&
              (m->architecture = model_strdup("")) && (g->name = model_strdup("layers")) &&
              (g->what = model_strdup(state ? "state" : "attention"));
    if (ok)
        snprintf(m->source, len, "(%s)", name);
    g->usage = state ? KVRT_MODEL_USAGE_STATE : KVRT_MODEL_USAGE_FULL;
    for (uint64_t i = 0; ok && i < num_layers; i++) {
        char layer[32];
        snprintf(layer, sizeof(layer), "layer.%llu", (unsigned long long)i);
        ok = (layers[i].name = model_strdup(layer)) != NULL;
        layers[i].spec = *spec;
        g->num_layers = i + 1;
    }
    m->num_layers = num_layers;
    m->num_q_heads = spec->kind == KVRT_SPEC_ATTENTION ? spec->num_kv_heads : 0;
    if (!ok || model_publish(m) != KVRT_OK) {
        kvrt_model_destroy(m);
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory building a model of %llu layers",
                         (unsigned long long)num_layers);
    }
    kvrt_clear_error();
    *out = m;
    return KVRT_OK;
}
