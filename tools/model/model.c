/* Entry points of the model readers: which format a file is, loading it,
 * and what the rest of the tool asks of a model. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kvrt/common.h>
#include <kvrt/spec.h>

#include "model_internal.h"

/* Larger than any published config; a guard against reading a wrong file. */
#define MODEL_MAX_FILE_BYTES (16u << 20)

void kvrt_model_options_default(struct kvrt_model_options *opt)
{
    memset(opt, 0, sizeof(*opt));
    opt->dtype = KVRT_DTYPE_BF16;
}

void kvrt_model_free(struct kvrt_model *m)
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
    free(m->name);
    free(m->source);
    free(m->format);
    free(m->architecture);
    free(m);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int kvrt_model_parse_buffer(const char *json, size_t len, const char *filename, const struct kvrt_model_options *opt,
                            struct kvrt_model **out, char *err, size_t err_size)
{
    struct model_ctx c = {filename ? filename : "(model)", err, err_size};
    struct kvrt_model_options defaults;
    if (err && err_size)
        err[0] = '\0';
    if (!json || !out)
        return model_fail(&c, KVRT_ERR_INVALID, "no model text to parse");
    *out = NULL;
    if (!opt) {
        kvrt_model_options_default(&defaults);
        opt = &defaults;
    }
    json_error_t jerr;
    /* No duplicate keys: a config with two "num_hidden_layers" is ambiguous. */
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return model_fail(&c, KVRT_ERR_INVALID, "line %d, column %d: not valid JSON: %s", jerr.line, jerr.column,
                          jerr.text);
    if (!json_is_object(root)) {
        int rc = model_fail(&c, KVRT_ERR_INVALID,
                            "the file is %s; a model file is a JSON object "
                            "(a Hugging Face config.json or a kvrt model file)",
                            model_json_type(root));
        json_decref(root);
        return rc;
    }
    struct kvrt_model *m = calloc(1, sizeof(*m));
    int rc = KVRT_OK;
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
    if (rc == KVRT_OK && (!m->format || !m->architecture))
        rc = model_fail(&c, KVRT_ERR_NOMEM, "out of memory reading the model");
    if (rc != KVRT_OK) {
        kvrt_model_free(m);
        return rc;
    }
    *out = m;
    return KVRT_OK;
}

int kvrt_model_load(const char *path, const struct kvrt_model_options *opt, struct kvrt_model **out, char *err,
                    size_t err_size)
{
    char joined[4096];
    struct stat st;
    struct model_ctx c = {path, err, err_size};
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
        rc = kvrt_model_parse_buffer(buf, n, path, opt, out, err, err_size);
    free(buf);
    return rc;
}

struct kvrt_group *kvrt_model_placement_groups(const struct kvrt_model *m)
{
    struct kvrt_group *g = calloc(m->num_groups ? m->num_groups : 1, sizeof(*g));
    for (size_t i = 0; g && i < m->num_groups; i++) {
        g[i].layers = m->groups[i].layers;
        g[i].num_layers = m->groups[i].num_layers;
    }
    return g;
}

bool kvrt_model_mixed_shapes(const struct kvrt_model *m)
{
    /* libkvrt's one rule; a model that loaded has valid specs, so an error
     * here can only be an allocation failure, which placement meets again. */
    struct kvrt_group *g = kvrt_model_placement_groups(m);
    bool mixed = false;
    if (g)
        (void)kvrt_placement_mixed_shapes(g, m->num_groups, &mixed);
    free(g);
    return mixed;
}
